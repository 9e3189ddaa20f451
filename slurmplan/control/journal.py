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
creates a file, and a path that holds no journal is an error naming it. Callers use the stores
(``journal.events.record(...)``, ``journal.intents.rows(...)``); the journal itself only opens, closes and
groups writes into one transaction.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slurmplan.control.stores.candidates import CandidateStore
from slurmplan.control.stores.db import BUSY_TIMEOUT_MS, JournalDb
from slurmplan.control.stores.decisions import DecisionStore
from slurmplan.control.stores.events import EventStore
from slurmplan.control.stores.intents import ActionRow, ActionStatus, IntentStore
from slurmplan.control.stores.jobs import JobStore
from slurmplan.control.stores.measurements import MeasurementStore
from slurmplan.control.stores.retention import Retention
from slurmplan.control.stores.state import StateStore
from slurmplan.control.stores.ticks import TickStore

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
        self.retention = Retention(self._jdb)

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
