"""Plan -> Megatron-LM / DeepSpeed launch arguments, checked on their output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmplan.domain import Plan, ValidationError
from slurmplan.launch.adapters import (
    deepspeed_config,
    edit_command,
    megatron_args,
    megatron_deepspeed_args,
    torchrun_prefix,
)


def _flags(args: list[str]) -> dict[str, str | bool]:
    """``--a 1 --b --c x`` -> {"--a": "1", "--b": True, "--c": "x"}; also fails on a repeated flag."""
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        assert args[i].startswith("--"), args
        assert args[i] not in out, f"{args[i]} repeated"
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]] = args[i + 1]
            i += 2
        else:
            out[args[i]] = True
            i += 1
    return out


def test_megatron_plan_from_the_contributing_example() -> None:
    plan = Plan(dp=2, tp=4, pp=1, micro_batch=2, grad_accum=8)
    flags = _flags(megatron_args(plan, nodes=1, gpus_per_node=8))
    assert flags == {
        "--tensor-model-parallel-size": "4",
        "--pipeline-model-parallel-size": "1",
        "--micro-batch-size": "2",
        "--global-batch-size": "32",
    }


def test_megatron_full_plan() -> None:
    plan = Plan(
        dp=2, tp=2, pp=4, micro_batch=1, grad_accum=16, checkpointing=True, zero_stage=1, offload=True, virtual_stages=2
    )
    flags = _flags(megatron_args(plan, num_layers=32))
    assert flags["--num-layers-per-virtual-pipeline-stage"] == "4"  # 32 layers / (4 stages * 2 chunks)
    assert flags["--recompute-granularity"] == "full" and flags["--recompute-method"] == "uniform"
    assert flags["--use-distributed-optimizer"] is True and flags["--optimizer-cpu-offload"] is True
    assert flags["--global-batch-size"] == "32"
    assert _flags(megatron_args(plan))["--num-virtual-stages-per-pipeline-rank"] == "2"


@pytest.mark.parametrize(
    ("plan", "kwargs", "field"),
    [
        (Plan(dp=2), {"nodes": 1, "gpus_per_node": 4}, "plan"),
        (Plan(zero_stage=3), {}, "zero_stage"),
        (Plan(virtual_stages=2), {}, "virtual_stages"),
        (Plan(pp=2, grad_accum=4, virtual_stages=2), {"num_layers": 32}, "virtual_stages"),
        (Plan(pp=4, virtual_stages=3), {"num_layers": 32}, "virtual_stages"),
        (Plan(offload=True), {}, "offload"),
    ],
)
def test_megatron_refuses_plans_it_cannot_express(plan: Plan, kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        megatron_args(plan, **kwargs)
    assert err.value.field == field


@given(
    st.integers(1, 16),
    st.integers(1, 8),
    st.integers(1, 64),
    st.sampled_from([0, 1, 2, 3]),
    st.booleans(),
    st.booleans(),
)
def test_deepspeed_batch_identity_holds(dp: int, mb: int, ga: int, zero: int, offload: bool, gc: bool) -> None:
    plan = Plan(dp=dp, micro_batch=mb, grad_accum=ga, zero_stage=zero, offload=offload and zero > 0, checkpointing=gc)
    cfg = deepspeed_config(plan, base={"optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 0}})
    # DeepSpeed asserts train_batch_size == micro_batch_per_gpu * gradient_accumulation * data-parallel size
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * dp
    assert cfg["zero_optimization"]["stage"] == zero
    assert ("offload_optimizer" in cfg["zero_optimization"]) == plan.offload
    assert ("offload_param" in cfg["zero_optimization"]) == (plan.offload and zero == 3)
    assert ("activation_checkpointing" in cfg) == gc
    assert cfg["optimizer"] == {"type": "AdamW"}
    json.dumps(cfg)


def test_megatron_deepspeed_args() -> None:
    plan = Plan(dp=4, tp=2, micro_batch=2, grad_accum=4, zero_stage=2, checkpointing=True)
    flags = _flags(megatron_deepspeed_args(plan, "/tmp/ds.json"))
    assert flags["--deepspeed"] is True and flags["--deepspeed_config"] == "/tmp/ds.json"
    assert flags["--zero-stage"] == "2" and flags["--no-pipeline-parallel"] is True
    assert flags["--checkpoint-activations"] is True and "--recompute-granularity" not in flags
    assert "--use-distributed-optimizer" not in flags  # ZeRO is DeepSpeed's job here


def test_edit_command_replaces_plan_flags_and_keeps_the_rest() -> None:
    old = [
        "pretrain_gpt.py",
        "--num-layers",
        "24",
        "--tensor-model-parallel-size",
        "8",
        "--micro-batch-size=4",
        "--recompute-granularity",
        "full",
        "--use-distributed-optimizer",
        "--lr",
        "3e-4",
    ]
    plan = Plan(dp=4, tp=2, micro_batch=1, grad_accum=8)
    new = edit_command(old, megatron_args(plan))
    assert new[:5] == ["pretrain_gpt.py", "--num-layers", "24", "--lr", "3e-4"]
    flags = _flags(new[1:])
    assert flags["--tensor-model-parallel-size"] == "2" and flags["--micro-batch-size"] == "1"
    assert "--recompute-granularity" not in flags and "--use-distributed-optimizer" not in flags
    assert flags["--global-batch-size"] == "32"


def test_torchrun_prefix() -> None:
    flags = _flags(torchrun_prefix(2, 8, rdzv_endpoint="node01:29400", job_id="42"))
    assert flags["--nnodes"] == "2" and flags["--nproc-per-node"] == "8" and flags["--rdzv-id"] == "42"


def test_adapter_command_line_reads_the_plan_from_the_environment() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURMPLAN_DP": "2",
        "SLURMPLAN_TP": "4",
        "SLURMPLAN_MICRO_BATCH": "2",
        "SLURMPLAN_GRAD_ACCUM": "8",
    }
    out = subprocess.run(
        [sys.executable, "-m", "slurmplan.launch.adapters", "megatron"],
        env=env,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    assert _flags(out.split())["--global-batch-size"] == "32"
    cfg = subprocess.run(
        [sys.executable, "-m", "slurmplan.launch.adapters", "deepspeed"],
        env=env,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    assert json.loads(cfg)["gradient_accumulation_steps"] == 8


def test_slurmplan_launch_args_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from slurmplan.cli import main

    for name, value in {"SLURMPLAN_DP": "2", "SLURMPLAN_PP": "2", "SLURMPLAN_ZERO_STAGE": "1"}.items():
        monkeypatch.setenv(name, value)
    assert main(["launch-args", "megatron", "--json"]) == 0
    flags = _flags(json.loads(capsys.readouterr().out))
    assert flags["--pipeline-model-parallel-size"] == "2" and flags["--use-distributed-optimizer"] is True
    assert main(["launch-args", "torchrun", "--nodes", "2"]) == 0
    assert _flags(capsys.readouterr().out.split())["--nproc-per-node"] == "2"  # 4 GPUs over 2 nodes


def test_an_adapter_refuses_a_plan_chosen_for_another_framework() -> None:
    from slurmplan.domain import ValidationError
    from slurmplan.formats import STACKS
    from slurmplan.launch.adapters import ADAPTER_STACKS, check_stack
    from slurmplan.perf.stacks import stack_for_adapter

    check_stack("megatron", "megatron")
    check_stack("torchrun", "fsdp")
    check_stack("megatron", None)  # no stack hint: the default stack plans for the Megatron adapters
    with pytest.raises(ValidationError) as err:
        check_stack("torchrun", "megatron")
    assert err.value.field == "stack" and "--plan-stack=ddp" in err.value.allowed
    for adapter, stacks in ADAPTER_STACKS.items():  # the launcher and the performance model agree
        assert set(stacks) <= set(STACKS) and stack_for_adapter(adapter).name in stacks
