"""The launcher: runs inside a Slurm job, applies the assigned plan, checkpoints on signal, resumes anywhere.

Entry points: :func:`run` (``TrainSpec`` in, ``TrainResult`` out), :class:`ElasticTraining` (a submitit
``Checkpointable``), ``python -m slurmplan.launch`` for plain sbatch scripts, :func:`load_assigned_plan`, and
the Megatron-LM/DeepSpeed adapters in ``slurmplan.launch.adapters``. Needs the ``launch`` extra (torch).
"""

from slurmplan.launch.plan_env import AssignedPlan, PlanSource, load_assigned_plan, parse_decision, parse_plan_short
from slurmplan.launch.requeue import RequeueMode
from slurmplan.launch.spec import Outcome, TrainResult, TrainSpec
from slurmplan.launch.trainer import run

__all__ = [
    "AssignedPlan",
    "Outcome",
    "PlanSource",
    "RequeueMode",
    "TrainResult",
    "TrainSpec",
    "load_assigned_plan",
    "parse_decision",
    "parse_plan_short",
    "run",
]
