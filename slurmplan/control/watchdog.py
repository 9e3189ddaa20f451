"""Fail-open: when the daemon stops ticking, managed jobs fall back to plain Slurm.

``slurmplan watchdog`` runs outside the daemon (a systemd timer or a cron line, every minute) and makes ONE
idempotent pass:

* heartbeat fresh: nothing to do; a fail-open record left by an earlier pass is cleared (the daemon is back and
  has taken the jobs over again from where Slurm has them: it observes, it does not remember);
* heartbeat stale (older than ``fail_open_after_s``, default 3 rounds) or missing: every held managed job is
  released. A job the daemon requeue-held for a move, and whose new configuration was decided but not yet
  applied, first gets that last decided configuration (the newest UPDATE intent in the journal), so it runs as
  the daemon meant; every other held job runs with its request as Slurm has it (as submitted, or as last
  applied). The pass then records the fail-open state beside the heartbeat, and journals what it did.

New submissions are the other half: job_submit.lua reads the same heartbeat and stops holding when it is stale.

The watchdog acts only through ``SlurmBackend`` (the slurm room runs every Slurm command). It takes the tick
lock when it can so that a daemon starting at that moment waits; a daemon that holds the lock yet has not
finished a tick for three rounds is hung, and the watchdog acts anyway: leaving jobs held is the worse failure.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from slurmplan.control.codec import job_state_from_dict, job_state_to_dict
from slurmplan.control.config import DaemonConfig
from slurmplan.control.heartbeat import read_heartbeat
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.lock import TickLock, TickLocked
from slurmplan.control.observe import classify
from slurmplan.domain import Action, ActionKind, ClusterBackend, Job, JobState

log = logging.getLogger(__name__)

_UPDATE_STATUSES = (ActionStatus.INTENT, ActionStatus.FAILED)
"""UPDATE rows decided but never applied: an applied one is already in Slurm's copy of the job."""


@dataclass(frozen=True)
class WatchdogReport:
    """One pass: what it saw and what it did (``slurmplan watchdog --json`` prints it)."""

    heartbeat_age_s: float | None
    limit_s: float
    fail_open: bool
    released: tuple[int, ...] = ()
    restored: tuple[int, ...] = ()
    """Jobs given their last decided configuration before the release."""
    failed: dict[int, str] = field(default_factory=dict)
    cleared: bool = False
    """A fail-open record was removed because the daemon is ticking again."""
    lock_held_by_daemon: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failed"] = {str(k): v for k, v in self.failed.items()}
        return d


def read_fail_open(path: Path) -> dict[str, Any] | None:
    """The fail-open record (``since``, ``heartbeat_age_s``, ``released``), or None when not failed open."""
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def held_managed_jobs(jobs: list[Job], config: DaemonConfig) -> list[Job]:
    """Pending jobs held by slurmplan (hints or a managed partition; bad-hint jobs and jobs an admin or their user
    held are not: ``classify`` leaves them alone, so the watchdog never lifts a hold that is not slurmplan's)."""
    return [
        j
        for j in jobs
        if j.held
        and j.state in (JobState.PENDING, JobState.REQUEUED)
        and classify(j, config.managed_partitions, config.trust).managed
    ]


def last_decided_update(journal: Journal | None, job_id: int) -> Action | None:
    """The newest UPDATE decided for the job that never reached Slurm, or None."""
    if journal is None:
        return None
    rows = [r for r in journal.intents.rows(job_id=job_id) if r.action.kind is ActionKind.UPDATE]
    if not rows:
        return None
    newest = max(rows, key=lambda r: r.id)
    return newest.action if newest.status in _UPDATE_STATUSES else None


def _open_journal(config: DaemonConfig) -> Journal | None:
    return Journal(config.database) if Path(config.database).is_file() else None


def watchdog_pass(config: DaemonConfig, backend: ClusterBackend, now: float | None = None) -> WatchdogReport:
    """One pass (see the module docstring). Running it twice in a row changes nothing the second time."""
    given = now
    now = time.time() if now is None else now
    beat = read_heartbeat(config.heartbeat_path)
    age = None if beat is None else beat.age(given)  # monotonic on this host unless a time is given (tests)
    limit = config.fail_open_limit_s
    if age is not None and age <= limit:
        cleared = config.fail_open_path.exists()
        if cleared:
            config.fail_open_path.unlink()
            log.warning("slurmplan daemon is ticking again (heartbeat %.0f s old): fail-open state cleared", age)
        return WatchdogReport(age, limit, fail_open=False, cleared=cleared)

    lock = TickLock(config.lock_path)
    try:
        lock.acquire()
    except TickLocked:
        log.error("the tick lock is held but no tick completed for %s s: the daemon looks hung; failing open", age)
    try:
        return _fail_open(config, backend, now, age, limit, lock_held=not lock.held)
    finally:
        lock.release()


def _fail_open(
    config: DaemonConfig, backend: ClusterBackend, now: float, age: float | None, limit: float, lock_held: bool
) -> WatchdogReport:
    snapshot = backend.snapshot()
    journal = _open_journal(config)
    released: list[int] = []
    restored: list[int] = []
    failed: dict[int, str] = {}
    try:
        for job in held_managed_jobs(list(snapshot.jobs), config):
            update = last_decided_update(journal, job.job_id)
            if update is not None:  # refused by Slurm: the job still runs, with the request Slurm has
                result = backend.apply([update])[0]
                if result.ok:
                    restored.append(job.job_id)
                else:
                    log.warning("job %d: last decided configuration refused: %s", job.job_id, result.message)
            release = Action(ActionKind.RELEASE, job.job_id, reason="fail-open: slurmplan daemon down")
            result = backend.apply([release])[0]
            if result.ok:
                released.append(job.job_id)
            else:
                failed[job.job_id] = result.message
        managed = [j.job_id for j in snapshot.jobs if classify(j, config.managed_partitions, config.trust).managed]
        _journal_pass(journal, released, restored, managed, now, age)
    finally:
        if journal is not None:
            journal.close()
    previous = read_fail_open(config.fail_open_path) or {}
    _write_json(
        config.fail_open_path,
        {
            "since": previous.get("since", now),
            "last_pass": now,
            "heartbeat_age_s": age,
            "limit_s": limit,
            "released": sorted(set(previous.get("released", [])) | set(released)),
        },
    )
    if released or failed:
        log.warning(
            "fail-open: released %s, failed %s (heartbeat age %s s, limit %.0f s)", released, failed, age, limit
        )
    return WatchdogReport(age, limit, True, tuple(released), tuple(restored), failed, lock_held_by_daemon=lock_held)


def _journal_pass(
    journal: Journal | None, released: list[int], restored: list[int], managed: list[int], now: float, age: float | None
) -> None:
    """Events for the audit trail; an applied UPDATE row is marked so the daemon does not re-apply it; every
    managed job's in-flight memory is dropped (running ones too: a checkpoint signal may be pending)."""
    if journal is None:
        return
    with journal.transaction():
        for job_id in released:
            detail = f"heartbeat {'missing' if age is None else f'{age:.0f} s old'}"
            if job_id in restored:
                detail += "; last decided configuration applied"
                rows = [r for r in journal.intents.rows(job_id=job_id) if r.action.kind is ActionKind.UPDATE]
                newest = max(rows, key=lambda r: r.id)
                journal.intents.mark(newest.id, ActionStatus.APPLIED, now, "applied by the watchdog (fail-open)")
            journal.events.record(job_id, "fail-open-release", now, detail)
        for job_id in managed:
            _forget_in_flight(journal, job_id)


def _forget_in_flight(journal: Journal, job_id: int) -> None:
    """Drop the daemon's memory of operations in flight for a job Slurm now runs on its own.

    A checkpoint signal sent before the daemon died, or the key of the last actions sent, would otherwise make
    the returning daemon requeue the job at once (grace long past) or skip re-sending a decision. The time the
    job received (its priority) is kept: the daemon takes the job over from where Slurm has it.
    """
    stored = journal.state.job(job_id)
    if stored is None:
        return
    state = replace(job_state_from_dict(stored), signalled_at=None, sent="")
    journal.state.set_job(job_id, job_state_to_dict(state))
