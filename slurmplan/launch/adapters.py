"""Plans beyond data parallelism: turn a Plan into Megatron-LM and DeepSpeed launch arguments.

slurmplan does not run tensor or pipeline parallelism itself; like Rubick, it edits the launch command of the
framework that does. Three shapes are covered:

* :func:`megatron_args` — the parallelism, batch, recomputation, distributed-optimizer and offload flags of
  Megatron-LM's ``pretrain_*.py``;
* :func:`deepspeed_config` (+ :func:`megatron_deepspeed_args`) — a DeepSpeed JSON config and the flags
  Megatron-DeepSpeed reads next to it;
* :func:`edit_command` — an existing command line with those flags replaced in place (flags the plan turns off
  are removed), plus :func:`torchrun_prefix` for the process layout.

Example (what an sbatch template does): ``srun torchrun $(slurmplan launch-args torchrun --nodes 2)
pretrain_gpt.py $(slurmplan launch-args megatron --num-layers 24) ...`` — the plan is read from the job
(``SLURMPLAN_*`` or the admin comment); ``python -m slurmplan.launch.adapters KIND`` is the same command.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from slurmplan.domain import Plan, SlurmplanError, ValidationError
from slurmplan.perf.stacks import MIN_INTERLEAVED_STAGES

ADAPTER_STACKS: dict[str, tuple[str, ...]] = {
    "megatron": ("megatron",),
    "megatron-deepspeed": ("deepspeed",),
    "deepspeed": ("deepspeed",),
    "torchrun": ("ddp", "fsdp"),
}
"""The framework (``stack`` hint, ``formats.STACKS``) each adapter runs a plan under: the scheduler predicted the
job's throughput for its ``stack`` hint, so an adapter of another framework would run a plan chosen for another."""


def check_stack(adapter: str, stack: str | None) -> None:
    """Refuse to run a plan chosen for the job's ``stack`` hint under an adapter of another framework."""
    allowed = ADAPTER_STACKS.get(adapter)
    if stack is None or allowed is None or stack in allowed:
        return
    flags = " or ".join(f"--plan-stack={s}" for s in allowed)
    raise ValidationError("stack", stack, f"{' or '.join(allowed)} for the {adapter} adapter (resubmit with {flags})")


def _check_layout(plan: Plan, nodes: int | None, gpus_per_node: int | None) -> None:
    if nodes is not None and gpus_per_node is not None and nodes * gpus_per_node != plan.gpus:
        raise ValidationError(
            "plan",
            plan.short(),
            f"dp*tp*pp = {nodes * gpus_per_node} GPUs ({nodes} nodes x {gpus_per_node})",
            "adapter",
        )


def megatron_args(
    plan: Plan, *, num_layers: int | None = None, nodes: int | None = None, gpus_per_node: int | None = None
) -> list[str]:
    """Megatron-LM flags for ``plan``; ``num_layers`` is needed to express interleaved virtual stages."""
    _check_layout(plan, nodes, gpus_per_node)
    if plan.zero_stage == 3:
        raise ValidationError("zero_stage", 3, "0-2 for Megatron-LM (use the DeepSpeed adapter for stage 3)", "adapter")
    args = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--micro-batch-size", str(plan.micro_batch),
        "--global-batch-size", str(plan.global_batch),
    ]  # fmt: skip
    if plan.virtual_stages > 1:
        if plan.pp < MIN_INTERLEAVED_STAGES:
            # Megatron-LM refuses the interleaved schedule on two stages or fewer, so a plan the model ranks
            # must not reach a launcher that would fail at start-up.
            allowed = f"1 unless pp >= {MIN_INTERLEAVED_STAGES} (Megatron-LM's interleaved schedule)"
            raise ValidationError("virtual_stages", plan.virtual_stages, allowed, "adapter")
        if num_layers is not None:
            per_chunk, rest = divmod(num_layers, plan.pp * plan.virtual_stages)
            if rest or per_chunk < 1:
                allowed = f"a divisor of num_layers/pp = {num_layers}/{plan.pp}"
                raise ValidationError("virtual_stages", plan.virtual_stages, allowed, "adapter")
            args += ["--num-layers-per-virtual-pipeline-stage", str(per_chunk)]
        else:
            args += ["--num-virtual-stages-per-pipeline-rank", str(plan.virtual_stages)]
    if plan.checkpointing:
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if plan.zero_stage >= 1:
        args.append("--use-distributed-optimizer")
    if plan.offload:
        if plan.zero_stage < 1:
            raise ValidationError("offload", True, "only with zero_stage >= 1 (distributed optimizer)", "adapter")
        args += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
    return args


def deepspeed_config(plan: Plan, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DeepSpeed config with the plan's batch sizes, ZeRO stage, offload and activation checkpointing.

    ``base`` (the user's own config) is kept for everything the plan does not decide.
    """
    config: dict[str, Any] = json.loads(json.dumps(base or {}))
    config["train_batch_size"] = plan.global_batch
    config["train_micro_batch_size_per_gpu"] = plan.micro_batch
    config["gradient_accumulation_steps"] = plan.grad_accum
    zero = dict(config.get("zero_optimization", {}))
    zero["stage"] = plan.zero_stage
    zero.pop("offload_optimizer", None)
    zero.pop("offload_param", None)
    if plan.offload:
        if plan.zero_stage == 0:
            raise ValidationError("offload", True, "only with zero_stage >= 1", "adapter")
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if plan.zero_stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config["zero_optimization"] = zero
    if plan.checkpointing:
        config["activation_checkpointing"] = {
            "partition_activations": plan.tp > 1,
            "cpu_checkpointing": plan.offload,
            "contiguous_memory_optimization": False,
            "synchronize_checkpoint_boundary": False,
        }
    else:
        config.pop("activation_checkpointing", None)
    return config


def precision_for(gpu_type: str) -> str:
    """``bf16`` on GPU types with native bfloat16 (the catalog's ``bf16``), ``fp16`` on types with fast fp16
    (V100, T4, P100), else ``fp32`` (K80): what a DeepSpeed/Megatron script should train in there."""
    from slurmplan.perf.hardware import get_gpu

    spec = get_gpu(gpu_type)
    if spec.bf16:
        return "bf16"
    return "fp16" if spec.fp16_tflops > spec.fp32_tflops else "fp32"


def megatron_deepspeed_args(plan: Plan, config_path: str, *, num_layers: int | None = None) -> list[str]:
    """Megatron-DeepSpeed flags: Megatron's parallel sizes; ZeRO, offload and checkpointing go to DeepSpeed.

    Megatron-DeepSpeed has no ``--num-virtual-stages-per-pipeline-rank``: interleaved stages are expressed
    as ``--num-layers-per-virtual-pipeline-stage``, which needs ``num_layers``.
    """
    if plan.virtual_stages > 1 and num_layers is None:
        raise ValidationError(
            "num_layers",
            None,
            f"the model's layer count (--num-layers) for a plan with {plan.virtual_stages} virtual stages: "
            "Megatron-DeepSpeed only takes --num-layers-per-virtual-pipeline-stage",
            "adapter",
        )
    core = dataclasses.replace(plan, checkpointing=False, zero_stage=0, offload=False)
    args = megatron_args(core, num_layers=num_layers)
    if plan.checkpointing:  # Megatron-DeepSpeed's spelling, carried out by DeepSpeed's checkpointing
        args += ["--checkpoint-activations", "--deepspeed-activation-checkpointing"]
    args += ["--deepspeed", "--deepspeed_config", config_path, "--zero-stage", str(plan.zero_stage)]
    if plan.pp == 1:
        args.append("--no-pipeline-parallel")
    return args


def torchrun_prefix(nodes: int, gpus_per_node: int, *, rdzv_endpoint: str, job_id: str = "slurmplan") -> list[str]:
    """``torchrun`` arguments for one launcher per node (as started by ``srun --ntasks-per-node=1``)."""
    return [
        "--nnodes", str(nodes),
        "--nproc-per-node", str(gpus_per_node),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", rdzv_endpoint,
        "--rdzv-id", job_id,
    ]  # fmt: skip


_VALUED = {
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--micro-batch-size",
    "--global-batch-size",
    "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--deepspeed_config",
    "--zero-stage",
}
_SWITCHES = {
    "--use-distributed-optimizer",
    "--optimizer-cpu-offload",
    "--use-precision-aware-optimizer",
    "--checkpoint-activations",
    "--deepspeed-activation-checkpointing",
    "--deepspeed",
    "--no-pipeline-parallel",
}


def edit_command(argv: Sequence[str], plan_args: Sequence[str]) -> list[str]:
    """Replace every plan-controlled flag of ``argv`` by ``plan_args`` (Rubick's launch-command rewrite).

    Flags the plan controls are removed wherever they are (``--flag value`` and ``--flag=value``), other
    arguments keep their order, and the plan's flags are appended.
    """
    out: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in _VALUED:
            skip_value = "=" not in arg
            continue
        if name in _SWITCHES:
            continue
        out.append(arg)
    return out + list(plan_args)


if __name__ == "__main__":
    # ``python -m slurmplan.launch.adapters megatron`` is ``slurmplan launch-args megatron``, built from the
    # launch room's own parser so that launch/ does not import the cli.
    import argparse

    from slurmplan.launch.commands import register

    _parser = argparse.ArgumentParser(prog="python -m slurmplan.launch.adapters")
    register(_parser.add_subparsers(dest="command"))
    _args = _parser.parse_args(["launch-args", *sys.argv[1:]])
    try:
        sys.exit(int(_args.func(_args) or 0))
    except SlurmplanError as _exc:
        print(f"slurmplan: error: {_exc}", file=sys.stderr)
        sys.exit(1)
