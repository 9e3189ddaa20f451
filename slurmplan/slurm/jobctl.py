"""What a job asks of Slurm about itself: requeue me, and what did the daemon write in my admin comment.

The launcher (``slurmplan.launch``) runs inside the job and must not start processes itself (only this room
talks to Slurm), so its two Slurm calls live here. Both go through :func:`slurmplan.slurm.run.run_slurm` and
never raise: a job that cannot requeue or read its comment logs why and carries on with what it has.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from slurmplan.slurm.reader import SlurmOutputError, find_job, read_jobs
from slurmplan.slurm.run import SlurmCommandError, run_slurm

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommandOutcome:
    """How one Slurm command went: ``ok`` with its stdout, or not with the reason (stderr or the failure)."""

    ok: bool
    argv: tuple[str, ...]
    message: str = ""


def requeue_argv(job_id: str, *, hold: bool, scontrol: str = "scontrol") -> tuple[str, ...]:
    """``scontrol requeuehold JOB`` for a managed job (the daemon releases it), else ``scontrol requeue JOB``."""
    return (scontrol, "requeuehold" if hold else "requeue", str(job_id))


def requeue(job_id: str, *, hold: bool, scontrol: str = "scontrol", timeout_s: float = 60.0) -> CommandOutcome:
    """Requeue ``job_id`` (held when ``hold``); never raises."""
    argv = requeue_argv(job_id, hold=hold, scontrol=scontrol)
    try:
        proc = run_slurm(argv, timeout=timeout_s, check=False)
    except (SlurmCommandError, OSError) as exc:
        return CommandOutcome(False, argv, str(exc))
    if proc.returncode != 0:
        return CommandOutcome(False, argv, proc.stderr.strip() or f"exit status {proc.returncode}")
    return CommandOutcome(True, argv, proc.stdout.strip())


def admin_comment(job_id: str, *, squeue: str = "squeue", timeout_s: float = 20.0) -> str | None:
    """The job's admin comment via ``squeue --json -j JOB``, or None when it cannot be read (logged)."""
    argv = (squeue, "--json", "-j", str(job_id))
    try:
        proc = run_slurm(argv, timeout=timeout_s, check=False)
    except (SlurmCommandError, OSError) as exc:
        log.warning("cannot run squeue for job %s: %s", job_id, exc)
        return None
    if proc.returncode != 0:
        log.warning("squeue --json -j %s failed (%d): %s", job_id, proc.returncode, proc.stderr.strip())
        return None
    try:
        record = find_job(read_jobs(json.loads(proc.stdout), skip_bad=True), job_id)
    except (json.JSONDecodeError, SlurmOutputError) as exc:
        log.warning("cannot read squeue --json -j %s: %s", job_id, exc)
        return None
    return record.admin_comment if record is not None else None


LIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING"})
"""Job states in which a job may still write to its files."""


def job_state(job_id: str, *, squeue: str = "squeue", timeout_s: float = 20.0) -> str | None:
    """The job's state (``RUNNING``, ``PENDING``, ...) via ``squeue --json -j JOB``; ``""`` when Slurm no longer
    knows the job; None when it cannot be asked (logged)."""
    argv = (squeue, "--json", "--states=all", "-j", str(job_id))
    try:
        proc = run_slurm(argv, timeout=timeout_s, check=False)
    except (SlurmCommandError, OSError) as exc:
        log.warning("cannot run squeue for job %s: %s", job_id, exc)
        return None
    if proc.returncode != 0:
        # squeue exits non-zero for a job id it has forgotten ("Invalid job id specified")
        return "" if "invalid job id" in proc.stderr.lower() else None
    try:
        record = find_job(read_jobs(json.loads(proc.stdout), skip_bad=True), job_id)
    except (json.JSONDecodeError, SlurmOutputError) as exc:
        log.warning("cannot read squeue --json -j %s: %s", job_id, exc)
        return None
    return record.job_state if record is not None else ""
