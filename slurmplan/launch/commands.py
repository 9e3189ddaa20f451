"""``slurmplan launch-args``: the job's assigned plan as Megatron-LM, DeepSpeed or torchrun arguments.

For job scripts that launch a framework slurmplan does not run itself (tensor/pipeline/ZeRO plans): the plan is
read from the job (``SLURMPLAN_*`` variables or the admin comment) and printed for a shell ``$(...)``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Mapping

from slurmplan.domain import SlurmplanError, ValidationError
from slurmplan.launch.adapters import (
    check_stack,
    deepspeed_config,
    megatron_args,
    megatron_deepspeed_args,
    precision_for,
    torchrun_prefix,
)
from slurmplan.launch.plan_env import AssignedPlan, load_assigned_plan


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "launch-args",
        help="print the job's plan as Megatron-LM / DeepSpeed / torchrun arguments",
        description=__doc__,
    )
    p.add_argument("kind", choices=["megatron", "megatron-deepspeed", "deepspeed", "torchrun", "precision"])
    p.add_argument("--num-layers", type=int, default=None, help="model layers (for interleaved virtual stages)")
    p.add_argument("--config-path", default="ds_config.json", help="DeepSpeed config path for megatron-deepspeed")
    p.add_argument("--base-config", default=None, help="a DeepSpeed JSON config to start from")
    p.add_argument(
        "--nodes", type=int, default=None, help="nodes (torchrun; default: the allocation's, $SLURM_JOB_NUM_NODES)"
    )
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (torchrun; default plan GPUs/nodes)")
    p.add_argument(
        "--rdzv-endpoint",
        default=None,
        help="torchrun rendezvous host:port (default: the allocation's first node and a port derived from the job"
        " id, as the launcher uses; 127.0.0.1:29500 outside Slurm)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (a list of arguments, or the config)")
    p.add_argument("--gpu-type", default=None, help="precision: the GPU type (default: the plan's)")
    p.add_argument(
        "--default-ok",
        action="store_true",
        help="when no plan was assigned, print a one-GPU default plan instead of failing",
    )
    p.set_defaults(func=_launch_args)


def _no_plan_message() -> str:
    job = os.environ.get("SLURM_JOB_ID")
    where = (
        f"no SLURMPLAN_* variables and no slurmplan decision in the admin comment of job {job}"
        if job
        else "not inside a Slurm job and no SLURMPLAN_* variables"
    )
    return (
        f"launch-args: no plan found for this job ({where}); printing a default would override the script's own "
        "settings. Submit the job managed by slurmplan, or pass --default-ok to accept a one-GPU default plan"
    )


def allocation_nodes(env: Mapping[str, str]) -> int:
    """The job's node count from Slurm's variables (1 outside a job)."""
    text = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
    if not text.isdigit() or int(text) < 1:
        raise ValidationError("SLURM_JOB_NUM_NODES", text, "a positive integer", "environment")
    return int(text)


def rendezvous_endpoint(env: Mapping[str, str]) -> str:
    """``host:port`` every node of the job reaches: the allocation's first node (or ``MASTER_ADDR``), and
    ``MASTER_PORT`` or the port the launcher derives from the job id (``dist.DistEnv``)."""
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        return f"{env.get('MASTER_ADDR') or '127.0.0.1'}:{env.get('MASTER_PORT') or 29500}"
    from slurmplan.launch.dist import rendezvous_host  # torch: only when needed

    host = env.get("MASTER_ADDR") or rendezvous_host(nodelist, env, allocation_nodes(env) == 1)
    job_id = int(env.get("SLURM_JOB_ID", "0") or 0)
    return f"{host}:{env.get('MASTER_PORT') or 20000 + job_id % 20000}"


def _launch_args(args: argparse.Namespace) -> int:
    try:
        return _print_args(args)
    except (SlurmplanError, OSError, json.JSONDecodeError) as exc:
        print(f"slurmplan launch-args: error: {exc}", file=sys.stderr)
        return 1


def _print_args(args: argparse.Namespace) -> int:
    assigned: AssignedPlan = load_assigned_plan()
    if args.kind == "precision":
        gpu_type = args.gpu_type or assigned.gpu_type
        if not gpu_type:
            print("slurmplan launch-args: error: precision: no GPU type (no --gpu-type, and the plan names none)",
                  file=sys.stderr)  # fmt: skip
            return 1
        print(precision_for(gpu_type))
        return 0
    if not assigned.managed and not args.default_ok:
        print(f"slurmplan {_no_plan_message()}", file=sys.stderr)
        return 1
    plan = assigned.plan
    check_stack(args.kind, assigned.stack)
    if args.kind == "deepspeed":
        base = None
        if args.base_config:
            with open(args.base_config) as fh:
                base = json.load(fh)
        print(json.dumps(deepspeed_config(plan, base), indent=2, sort_keys=True))
        return 0
    if args.kind == "megatron":
        out = megatron_args(plan, num_layers=args.num_layers)
    elif args.kind == "megatron-deepspeed":
        out = megatron_deepspeed_args(plan, args.config_path, num_layers=args.num_layers)
    else:
        nodes = args.nodes or allocation_nodes(os.environ)
        gpus = args.gpus_per_node or max(1, plan.gpus // nodes)
        endpoint = args.rdzv_endpoint or rendezvous_endpoint(os.environ)
        job_id = os.environ.get("SLURM_JOB_ID") or "slurmplan"
        out = torchrun_prefix(nodes, gpus, rdzv_endpoint=endpoint, job_id=job_id)
    print(json.dumps(out) if args.json else shlex.join(out))
    return 0
