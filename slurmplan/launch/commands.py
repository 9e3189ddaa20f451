"""``slurmplan launch-args``: the job's assigned plan as Megatron-LM, DeepSpeed or torchrun arguments.

For job scripts that launch a framework slurmplan does not run itself (tensor/pipeline/ZeRO plans): the plan is
read from the job (``SLURMPLAN_*`` variables or the admin comment) and printed for a shell ``$(...)``.
"""

from __future__ import annotations

import argparse
import json
import shlex

from slurmplan.launch.adapters import deepspeed_config, megatron_args, megatron_deepspeed_args, torchrun_prefix
from slurmplan.launch.plan_env import load_assigned_plan


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "launch-args",
        help="print the job's plan as Megatron-LM / DeepSpeed / torchrun arguments",
        description=__doc__,
    )
    p.add_argument("kind", choices=["megatron", "megatron-deepspeed", "deepspeed", "torchrun"])
    p.add_argument("--num-layers", type=int, default=None, help="model layers (for interleaved virtual stages)")
    p.add_argument("--config-path", default="ds_config.json", help="DeepSpeed config path for megatron-deepspeed")
    p.add_argument("--base-config", default=None, help="a DeepSpeed JSON config to start from")
    p.add_argument("--nodes", type=int, default=1, help="nodes (torchrun)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (torchrun; default plan GPUs/nodes)")
    p.add_argument("--rdzv-endpoint", default="127.0.0.1:29500", help="torchrun rendezvous host:port")
    p.add_argument("--json", action="store_true", help="print JSON (a list of arguments, or the config)")
    p.set_defaults(func=_launch_args)


def _launch_args(args: argparse.Namespace) -> int:
    plan = load_assigned_plan().plan
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
        gpus = args.gpus_per_node or max(1, plan.gpus // args.nodes)
        out = torchrun_prefix(args.nodes, gpus, rdzv_endpoint=args.rdzv_endpoint)
    print(json.dumps(out) if args.json else shlex.join(out))
    return 0
