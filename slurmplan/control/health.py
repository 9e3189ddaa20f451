"""``slurmplan health``: is the scheduler doing its job? One Nagios-style answer (0 ok, 1 warning, 2 critical).

Everything is read, nothing is written: the journal is opened read-only (``file:...?mode=ro``; a missing
journal is reported, never created), the lock file is probed with a shared ``flock`` that is dropped at once,
and Slurm is read with one snapshot (a controller that does not answer is a warning, not a crash).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from slurmplan.control.config import DaemonConfig
from slurmplan.control.heartbeat import read_heartbeat
from slurmplan.control.journal import Journal
from slurmplan.control.watchdog import held_managed_jobs, read_fail_open
from slurmplan.domain import ClusterBackend, SlurmplanError

OK, WARNING, CRITICAL = 0, 1, 2
STATUS_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL"}


@dataclass(frozen=True)
class Health:
    status: int
    problems: tuple[str, ...]
    last_tick_age_s: float | None
    last_round: int | None
    behind_s: float | None
    """How much later than its interval the daemon is (0 when on time)."""
    lock_holder: str | None
    held_jobs: int | None
    oldest_held_s: float | None
    oldest_unconfirmed_intent_s: float | None
    last_tick_error: str | None
    fail_open: dict[str, Any] | None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status_name": STATUS_NAMES[self.status]}


def lock_holder(path: Path) -> str | None:
    """Who holds the tick lock (the text the holder wrote), or None when nobody does or there is no lock file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _journal_facts(path: Path, now: float) -> dict[str, Any]:
    """Last tick and the oldest unconfirmed intent, from the journal opened read-only."""
    if not path.is_file():
        return {"journal": "missing"}
    try:
        with Journal(path, readonly=True) as journal:
            tick = journal.ticks.last_finished()
            oldest = journal.intents.oldest_unconfirmed_at()
    except (sqlite3.Error, SlurmplanError) as exc:
        return {"journal": f"unreadable: {exc}"}
    last = None if tick is None else (tick["finished_at"], tick["round_index"], tick["error"])
    return {
        "journal": "ok",
        "last_round": last[1] if last else None,
        "last_tick_error": (last[2] or None) if last else None,
        "oldest_intent_s": None if oldest is None else now - oldest,
    }


def check_health(config: DaemonConfig, backend: ClusterBackend | None, now: float | None = None) -> Health:
    """Gather the facts and grade them; ``backend=None`` skips Slurm (held jobs then unknown)."""
    now = time.time() if now is None else now
    problems: list[tuple[int, str]] = []
    beat = read_heartbeat(config.heartbeat_path)
    age = None if beat is None else beat.age(now)
    limit = config.fail_open_limit_s
    if age is None:
        problems.append((CRITICAL, f"no heartbeat at {config.heartbeat_path}: the daemon never completed a tick"))
    elif age > limit:
        problems.append((CRITICAL, f"last tick {age:.0f} s ago (fail-open limit {limit:.0f} s): daemon down"))
    elif age > 2 * config.interval_s + 60:
        problems.append((WARNING, f"last tick {age:.0f} s ago, interval {config.interval_s:.0f} s: daemon behind"))
    behind = None if age is None else max(0.0, age - config.interval_s)

    facts = _journal_facts(Path(config.database), now)
    if facts["journal"] != "ok":
        problems.append((WARNING, f"journal {config.database}: {facts['journal']}"))
    if facts.get("last_tick_error"):
        problems.append((WARNING, f"last tick failed: {facts['last_tick_error']}"))
    intent_age = facts.get("oldest_intent_s")
    if intent_age is not None and intent_age > config.round_s:
        problems.append((WARNING, f"an action unconfirmed for {intent_age:.0f} s (round {config.round_s:.0f} s)"))

    held = oldest_held = None
    if backend is not None:
        try:
            jobs = held_managed_jobs(list(backend.snapshot().jobs), config)
        except Exception as exc:  # Slurm unreachable: say so, keep the rest of the answer
            problems.append((WARNING, f"cannot read Slurm: {type(exc).__name__}: {exc}"))
        else:
            held = len(jobs)
            oldest_held = max((now - j.submit_time for j in jobs if j.submit_time), default=None)
            if oldest_held is not None and oldest_held > 2 * config.round_s:
                problems.append((WARNING, f"{held} managed jobs held, the oldest for {oldest_held:.0f} s"))

    fail_open = read_fail_open(config.fail_open_path)
    if fail_open is not None:
        problems.append((CRITICAL, f"fail-open since {time.ctime(fail_open.get('since', 0))}: jobs run as plain Slurm"))
    return Health(
        status=max((level for level, _ in problems), default=OK),
        problems=tuple(text for _, text in problems),
        last_tick_age_s=age,
        last_round=beat.round_index if beat else facts.get("last_round"),
        behind_s=behind,
        lock_holder=lock_holder(config.lock_path),
        held_jobs=held,
        oldest_held_s=oldest_held,
        oldest_unconfirmed_intent_s=intent_age,
        last_tick_error=facts.get("last_tick_error"),
        fail_open=fail_open,
        details={"heartbeat": str(config.heartbeat_path), "journal": str(config.database), "limit_s": limit},
    )


def format_health(h: Health) -> str:
    """First line in the Nagios plugin shape (``SLURMPLAN OK - ...``), then one line per fact."""
    summary = "; ".join(h.problems) if h.problems else "daemon ticking"
    age = "never" if h.last_tick_age_s is None else f"{h.last_tick_age_s:.0f}s ago"
    lines = [
        f"SLURMPLAN {STATUS_NAMES[h.status]} - {summary}",
        f"  last tick:          {age} (round {h.last_round})",
        f"  behind schedule:    {'-' if h.behind_s is None else f'{h.behind_s:.0f}s'}",
        f"  lock holder:        {h.lock_holder or 'none'}",
        f"  held managed jobs:  {'unknown' if h.held_jobs is None else h.held_jobs}"
        + (f" (oldest {h.oldest_held_s:.0f}s)" if h.oldest_held_s is not None else ""),
        "  oldest unconfirmed: "
        + ("none" if h.oldest_unconfirmed_intent_s is None else f"{h.oldest_unconfirmed_intent_s:.0f}s"),
        f"  fail-open:          {'yes, since ' + time.ctime(h.fail_open['since']) if h.fail_open else 'no'}",
    ]
    return "\n".join(lines)
