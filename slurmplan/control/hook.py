"""``slurmplan hook job-start|job-end``: what the PrologSlurmctld/EpilogSlurmctld scripts in ``prolog/`` run.

Slurm runs those scripts on the controller when a job starts and when it ends, with the job described in
``SLURM_JOB_*`` environment variables. Recording both moments in the daemon's journal makes attained service
and completion times exact instead of sampled once per tick. A hook must never fail or delay a job because
slurmplan is down or its database is locked or broken, so every error is logged and the exit status is 0.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import Cell, Plan, ValidationError
from slurmplan.formats import plan_environment

log = logging.getLogger(__name__)

EVENTS = ("job-start", "job-end")

# Variables slurmctld gives PrologSlurmctld/EpilogSlurmctld in 22.05 that are worth keeping with the event.
_DETAIL_VARS = {
    "SLURM_JOB_NODELIST": "nodes",
    "SLURM_JOB_PARTITION": "partition",
    "SLURM_JOB_USER": "user",
    "SLURM_JOB_ACCOUNT": "account",
    "SLURM_JOB_RESTART_COUNT": "restart_count",
    "SLURM_JOB_GPUS": "gpus",
    "SLURM_JOB_EXIT_CODE": "exit_code",
    "SLURM_JOB_EXIT_CODE2": "exit_code2",
    "SLURM_JOB_DERIVED_EC": "derived_exit_code",
}


@dataclass(frozen=True)
class HookEvent:
    """One start or end of a job, as the hook journals it."""

    job_id: int
    event: str
    time: float
    detail: Mapping[str, str]

    @property
    def exit_state(self) -> str | None:
        """For job-end: ``completed`` when the job exited 0, else ``failed:<exit>:<signal>`` (from EXIT_CODE2)."""
        if self.event != "job-end":
            return None
        code2 = self.detail.get("exit_code2") or ""
        if code2:
            return "completed" if code2 == "0:0" else f"failed:{code2}"
        code = self.detail.get("exit_code")
        if code is None:
            return None
        return "completed" if code == "0" else f"failed:{code}"


def event_from_env(event: str, env: Mapping[str, str], now: float | None = None) -> HookEvent:
    """Build the event from Slurm's script environment; raises ``ValidationError`` on a missing job id."""
    if event not in EVENTS:
        raise ValidationError("event", event, "one of " + ", ".join(EVENTS), "hook")
    raw = env.get("SLURM_JOB_ID", "")
    if not raw.isdigit() or int(raw) <= 0:
        raise ValidationError("SLURM_JOB_ID", raw, "a positive job id (run by PrologSlurmctld/EpilogSlurmctld)", "hook")
    detail = {key: env[var] for var, key in _DETAIL_VARS.items() if env.get(var)}
    return HookEvent(int(raw), event, time.time() if now is None else now, detail)


def record(event: HookEvent, database: str | os.PathLike[str]) -> None:
    """Append the event to the journal at ``database`` (the exit state goes into the detail JSON)."""
    from slurmplan.control.journal import Journal

    detail = dict(event.detail)
    path = Path(database)
    if not path.exists() and path.parent.is_dir() and path.parent.stat().st_uid != os.geteuid():
        # the daemon's folder: a journal the hook (SlurmUser, maybe root) created would lock the daemon out
        log.warning("journal %s does not exist yet (the daemon creates it): %s of job %d not recorded",
                    path, event.event, event.job_id)  # fmt: skip
        return
    with Journal(database) as journal:
        if (state := event.exit_state) is not None:
            detail["exit_state"] = "requeued" if was_requeued(event, journal.events.of(event.job_id)) else state
        journal.events.record(event.job_id, event.event, event.time, json.dumps(detail, sort_keys=True))


def was_requeued(end: HookEvent, earlier: list[dict[str, object]]) -> bool:
    """Whether this job-end is a requeue, not an end: Slurm gives EpilogSlurmctld no job state, and a requeued
    run exits 0:0 like a completed one, but the epilog already sees the restart count of the run to come (the
    start of this run had one less). Issue 29: the journal recorded every requeue as ``completed``."""
    ended = end.detail.get("restart_count", "")
    starts = [e for e in earlier if e.get("event") == "job-start"]
    if not ended.isdigit() or not starts:
        return False
    try:
        started = json.loads(str(starts[-1].get("detail") or "{}")).get("restart_count", "")
    except (ValueError, AttributeError):
        return False
    return isinstance(started, str) and started.isdigit() and int(ended) > int(started)


def run_hook(event: str, database: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> int:
    """The whole hook: never raises, always 0, so Slurm never fails or requeues a job on slurmplan's account."""
    try:
        hook_event = event_from_env(event, os.environ if env is None else env)
        record(hook_event, database)
        log.info("journaled %s for job %d", hook_event.event, hook_event.job_id)
    except Exception:  # noqa: BLE001 - a hook must not fail a job, whatever went wrong
        log.exception("slurmplan hook %s: could not journal the event; the job is not affected", event)
    return 0


def write_plan_file(plan_dir: str | os.PathLike[str], job_id: int, cell: Cell, plan: Plan) -> Path:
    """Write ``<plan_dir>/<job_id>.env`` for the SPANK plugin (its first plan source), atomically.

    The daemon may call this when it releases a job so that tasks get their plan without the plugin asking
    slurmctld; ``plan_dir`` must be visible on the compute nodes (the plugin's ``plan_dir=`` argument).
    """
    directory = Path(plan_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{job_id}.env"
    tmp = directory / f".{job_id}.env.tmp"
    tmp.write_text("".join(f"{k}={v}\n" for k, v in plan_environment(cell, plan).items()))
    os.replace(tmp, target)
    return target
