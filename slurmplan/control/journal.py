"""The daemon's journal: one SQLite file (WAL), read and written through small stores that share a connection.

It is both the audit trail (``slurmplan explain`` / ``history`` read it) and the daemon's memory between
ticks. Actions go in as *intents* before anything touches Slurm, in the same transaction as the scheduler state
they belong to; the applier then marks each ``applied`` (or ``failed``), and the next observation marks it
``confirmed``. A tick killed anywhere therefore leaves either nothing (decision not written) or intents that the
next tick re-applies: nothing is lost and nothing is done twice that is not idempotent.

``Journal(path)`` opens (and creates) the file and exposes one store per purpose::

    journal.events        job events (the Slurm prolog/epilog hook writes them while a tick may run)
    journal.jobs          what the daemon saw of each job
    journal.ticks         one row per tick
    journal.decisions     decisions, rounds and the policy's allocation X
    journal.candidates    each job's latest priced candidates
    journal.intents       actions from intent to confirmation
    journal.state         the scheduler's memory between ticks
    journal.measurements  throughputs reported by jobs

``Journal(path, readonly=True)`` is for the commands that only read (``explain``, ``history``): it never
creates a file, and a path that holds no journal is an error naming it. The old one-class methods
(``record_event``, ``add_intents``, ...) remain as delegates until the branches that call them have merged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slurmplan.control.stores.candidates import CandidateStore
from slurmplan.control.stores.db import BUSY_TIMEOUT_MS, JournalDb
from slurmplan.control.stores.decisions import DecisionStore
from slurmplan.control.stores.events import EventStore
from slurmplan.control.stores.intents import ActionRow, ActionStatus, IntentStore
from slurmplan.control.stores.jobs import JobStore
from slurmplan.control.stores.measurements import MeasurementStore
from slurmplan.control.stores.state import StateStore
from slurmplan.control.stores.ticks import TickStore
from slurmplan.domain import Action, Allocation, Assignment, Candidate

__all__ = ["BUSY_TIMEOUT_MS", "ActionRow", "ActionStatus", "Journal"]

_STORES = (
    EventStore,
    JobStore,
    TickStore,
    DecisionStore,
    CandidateStore,
    IntentStore,
    StateStore,
    MeasurementStore,
)


class Journal:
    """The SQLite journal at ``path`` (created with its schema on first use unless ``readonly``)."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = Path(path)
        self._jdb = JournalDb(path, [t for store in _STORES for t in store.TABLES], readonly=readonly)
        self.db = self._jdb.db
        self.readonly = readonly
        self.events = EventStore(self._jdb)
        self.jobs = JobStore(self._jdb)
        self.ticks = TickStore(self._jdb)
        self.decisions = DecisionStore(self._jdb)
        self.candidates = CandidateStore(self._jdb)
        self.intents = IntentStore(self._jdb)
        self.state = StateStore(self._jdb)
        self.measurements = MeasurementStore(self._jdb)

    def close(self) -> None:
        self._jdb.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic write across every store (``BEGIN IMMEDIATE``: a concurrent hook waits, never fails)."""
        with self._jdb.transaction():
            yield

    def is_empty(self) -> bool:
        """No decision, action or event on record (what ``history`` calls "nothing journaled yet")."""
        return not (self.decisions.count() or self.intents.count() or self.events.count())

    # -------------------------------------------- delegates: the old one-class API, until the branches merge
    # ``journal.events(...)``, ``jobs(...)``, ``ticks(...)``, ``decisions(...)`` and ``candidates(...)`` keep
    # working because those stores are callable with the old methods' arguments.

    def record_event(self, job_id: int, event: str, time: float, detail: str = "") -> None:
        self.events.record(job_id, event, time, detail)

    def upsert_jobs(self, rows: Sequence[dict[str, Any]]) -> None:
        self.jobs.upsert(rows)

    def mark_finished(self, job_ids: Iterable[int], state: str, now: float) -> None:
        self.jobs.mark_finished(job_ids, state, now)

    def job(self, job_id: int) -> dict[str, Any] | None:
        return self.jobs.get(job_id)

    def begin_tick(self, mode: str, started_at: float) -> int:
        return self.ticks.begin(mode, started_at)

    def finish_tick(self, tick_id: int, **fields: Any) -> None:
        self.ticks.finish(tick_id, **fields)

    def record_decision(
        self,
        tick_id: int,
        round_index: int,
        now: float,
        assignments: Sequence[Assignment],
        allocation: Allocation | None,
        new_round: bool,
        policy: str,
    ) -> None:
        self.decisions.record(tick_id, round_index, now, assignments, allocation, new_round, policy)

    def changed_decisions(self, assignments: Sequence[Assignment]) -> list[Assignment]:
        return self.decisions.changed(assignments)

    def record_candidates(self, tick_id: int, by_job: dict[int, Sequence[Candidate]]) -> None:
        self.candidates.replace(tick_id, by_job)

    def allocation_of(self, job_id: int, round_index: int | None = None) -> list[dict[str, Any]]:
        return self.decisions.allocation_of(job_id, round_index)

    def rounds(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.decisions.rounds(limit)

    def add_intents(self, tick_id: int, round_index: int, actions: Sequence[Action], now: float) -> list[int]:
        return self.intents.add(tick_id, round_index, actions, now)

    def mark_action(self, action_id: int, status: str, now: float, message: str = "") -> None:
        self.intents.mark(action_id, status, now, message)

    def actions(
        self, *, status: str | Sequence[str] | None = None, job_id: int | None = None, limit: int | None = None
    ) -> list[ActionRow]:
        return self.intents.rows(status=status, job_id=job_id, limit=limit)

    def restart_timeline(self) -> list[dict[str, Any]]:
        """Applied checkpoint signals and GPU updates plus job start/end events (``control.calibration``)."""
        return self.intents.restart_timeline()

    def get_value(self, key: str, default: Any = None) -> Any:
        return self.state.get(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self.state.set(key, value)
