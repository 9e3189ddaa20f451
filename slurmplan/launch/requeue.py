"""Putting the job back in the queue after a checkpoint.

A job that slurmplan manages is requeued *held* (``scontrol requeuehold``): the daemon decides where and with
which plan it runs next, then releases it. Any other job is requeued plainly (``scontrol requeue``), as
submitit does. A countdown bounds how often one job requeues itself, against a job that is signalled forever.
This is the job's view of its own requeue; the daemon's actions on other jobs live in ``slurmplan.slurm``.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from slurmplan.slurm import jobctl

log = logging.getLogger(__name__)


class RequeueMode(enum.Enum):
    AUTO = "auto"
    """Delegate to a handler installed before ours (submitit), else use Slurm when inside a Slurm job."""
    SLURM = "slurm"
    NONE = "none"


@dataclass(frozen=True)
class RequeueResult:
    requeued: bool
    command: tuple[str, ...] = ()
    message: str = ""


def requeue_command(job_id: str, *, hold: bool, scontrol: str = "scontrol") -> tuple[str, ...]:
    return jobctl.requeue_argv(job_id, hold=hold, scontrol=scontrol)


def requeue_job(
    *,
    hold: bool,
    max_requeues: int,
    env: Mapping[str, str] | None = None,
    scontrol: str = "scontrol",
    timeout_s: float = 60.0,
) -> RequeueResult:
    """Requeue the current Slurm job unless it has already restarted ``max_requeues`` times."""
    env = os.environ if env is None else env
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    job_id = f"{array_job}_{array_task}" if array_job and array_task else env.get("SLURM_JOB_ID")
    if not job_id:
        return RequeueResult(False, message="not inside a Slurm job")
    restarts = int(env.get("SLURM_RESTART_COUNT", "0") or 0)
    if restarts >= max_requeues:
        msg = f"job {job_id} restarted {restarts} times (limit {max_requeues}); not requeued"
        log.error(msg)
        return RequeueResult(False, message=msg)
    done = jobctl.requeue(job_id, hold=hold, scontrol=scontrol, timeout_s=timeout_s)
    cmd = " ".join(done.argv)
    if not done.ok:
        log.error("%s failed: %s", cmd, done.message)
        return RequeueResult(False, done.argv, done.message)
    log.info("%s done (restart %d of at most %d)", cmd, restarts + 1, max_requeues)
    return RequeueResult(True, done.argv, done.message)
