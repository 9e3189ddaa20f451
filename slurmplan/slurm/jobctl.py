"""A running job's own calls to Slurm: requeue itself, read its admin comment.

The launcher (``slurmplan.launch``) runs inside the job and must not start processes itself; these two calls
are the only Slurm commands it needs, and they go through :func:`slurmplan.slurm.run.run_slurm` like every
other Slurm call, so failures read the same everywhere.
"""

from __future__ import annotations

import json
import logging

from slurmplan.slurm.run import SlurmCommandError, run_slurm

log = logging.getLogger(__name__)


def requeue_command(job_id: str, *, hold: bool, scontrol: str = "scontrol") -> tuple[str, ...]:
    return (scontrol, "requeuehold" if hold else "requeue", str(job_id))


def requeue(job_id: str, *, hold: bool, scontrol: str = "scontrol", timeout_s: float = 60.0) -> str:
    """``scontrol requeue[hold] JOB``; returns its stdout, raises :class:`SlurmCommandError` when it fails."""
    proc = run_slurm(requeue_command(job_id, hold=hold, scontrol=scontrol), timeout=timeout_s)
    return proc.stdout.strip()


def admin_comment(job_id: str, *, squeue: str = "squeue", timeout_s: float = 20.0) -> str | None:
    """The job's admin comment via ``squeue --json -j JOB``, or None (logged) when it cannot be read."""
    try:
        proc = run_slurm([squeue, "--json", "-j", str(job_id)], timeout=timeout_s)
    except SlurmCommandError as exc:
        log.warning("cannot read the admin comment of job %s: %s", job_id, exc)
        return None
    try:
        jobs = json.loads(proc.stdout).get("jobs", [])
    except json.JSONDecodeError as exc:
        log.warning("squeue --json printed no JSON: %s", exc)
        return None
    for job in jobs:
        if str(job.get("job_id")) == str(job_id):
            return str(job.get("admin_comment") or "")
    return None
