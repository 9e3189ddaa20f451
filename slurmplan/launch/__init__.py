"""The launcher: runs inside a Slurm job, applies the assigned plan, checkpoints on signal, resumes anywhere.

Entry points: :func:`run` (``TrainSpec`` in, ``TrainResult`` out), ``entry.ElasticTraining`` (a submitit
``Checkpointable``), ``python -m slurmplan.launch`` for plain sbatch scripts, :func:`load_assigned_plan`, and
the Megatron-LM/DeepSpeed adapters in ``slurmplan.launch.adapters``. Needs the ``launch`` extra (torch).

Names are imported lazily so that ``slurmplan`` commands which only read a plan do not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AssignedPlan": "slurmplan.launch.plan_env",
    "PlanSource": "slurmplan.launch.plan_env",
    "load_assigned_plan": "slurmplan.launch.plan_env",
    "parse_decision": "slurmplan.launch.plan_env",
    "parse_plan_short": "slurmplan.launch.plan_env",
    "RequeueMode": "slurmplan.launch.requeue",
    "Outcome": "slurmplan.launch.spec",
    "TrainResult": "slurmplan.launch.spec",
    "TrainSpec": "slurmplan.launch.spec",
    "run": "slurmplan.launch.trainer",
    "ElasticTraining": "slurmplan.launch.entry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'slurmplan.launch' has no attribute {name!r}")
