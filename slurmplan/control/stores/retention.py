"""Journal retention: old rows pruned in short batches while the daemon runs (``journal_keep_days``).

Slurm's accounting is the long-term record of jobs; the journal keeps what ``explain``, ``history``, calibration
and recovery need. Without pruning it grows by a decision and an allocation row per job per round (a 2,000-job
site: about 480,000 of each a day). Pruning deletes, oldest first, in batches of one short transaction each (a
tick waits for at most one, see ``benchmarks/bench_journal_retention.py``):

* allocations (one row per job and Cell per round, the largest table) of rounds older than one day
  (``ALLOCATION_KEEP_S``) except the latest round: ``explain`` shows a job's latest share only;
* decisions older than one day that repeat the job's previous decision (each new round journals every job in
  full): after a day ``history`` keeps the changes, which is what it shows anyway;
* decisions, events, ticks and rounds older than the cutoff, except the latest decision of every job not yet
  finished (``explain`` of a long-running job) and the latest round (the state the next tick continues from);
* actions older than the cutoff that are final: an unconfirmed intent (``intent``/``applied``) is never deleted,
  since recovery re-applies or confirms it;
* the candidates of jobs that finished over a day ago (``explain`` of a job just finished still shows them);
* jobs that finished before the cutoff, with their scheduler-state row.

Measurements (the jobs' throughput reports the performance model learns from) are kept.

Why every step is cheap however large the journal: each finds its rows by an index range or a watermark (never
by scanning a table), and its batch size adapts to a time budget (``TARGET_BATCH_S``): a batch that ran long
shrinks the next one of that step, a short one lets it grow. The sizes are kept in the ``state`` table, since the
daemon opens the journal anew each tick.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slurmplan.control.stores.db import JournalDb, Store

ALLOCATION_KEEP_S = 86_400.0
DEFAULT_BATCH = 250
TARGET_BATCH_S = 0.02
"""Time one batch aims at; the goal is that none holds the database (and so delays a tick) for over 100 ms."""
MIN_BATCH, MAX_BATCH = 16, 4_000
WINDOW_FACTOR = 4
"""Windowed steps (tables appended in time order) examine only their oldest ``batch * WINDOW_FACTOR`` rows."""

_FINAL = "('confirmed', 'failed', 'diverged', 'shadow')"
_NOT_LATEST_OF_LIVE = (
    "(NOT EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = w.job_id AND j.finished_at IS NULL) "
    "OR w.rid < (SELECT MAX(d2.rowid) FROM decisions d2 WHERE d2.job_id = w.job_id))"
)
_WINDOWED: tuple[tuple[str, str, str], ...] = (
    ("decisions", f"time < ? AND {_NOT_LATEST_OF_LIVE}", "time, job_id"),
    ("actions", f"created_at < ? AND status IN {_FINAL}", "created_at, status"),
    ("events", "time < ?", "time"),
    ("ticks", "started_at < ? AND rid < (SELECT MAX(id) FROM ticks)", "started_at"),
    ("rounds", "started_at < ? AND rid < (SELECT MAX(round_index) FROM rounds)", "started_at"),
)
"""(table, condition on a window row ``w`` to delete (? is the cutoff), the columns it reads; the first is the
row's time, which an oldest row younger than the cutoff makes the step skip at once)."""
_THIN_KEY = "retention.thinned_decisions_to_rowid"
_CANDIDATES_KEY = "retention.candidates_of_jobs_finished_to"
_SIZES_KEY = "retention.batch_rows"

Step = Callable[[float, int], "int | None"]
"""(cutoff, batch rows) -> rows deleted (0: examined rows and moved a watermark), or None: nothing to do."""


@dataclass
class PruneReport:
    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    longest_batch_s: float = 0.0
    batch_s: list[tuple[str, float, float]] = field(default_factory=list)
    """(step, wall seconds, CPU seconds of this thread) of each transaction, in order; step "" is the last pass
    that found nothing to delete (it holds the database too). On a busy machine the wall time includes waiting
    for a CPU or the disk; the CPU time is what the batch's work cost."""
    done: bool = False
    """Nothing older than the cutoff is left to delete."""
    checkpoint_s: float = 0.0
    """The WAL checkpoint after the batches (it holds no lock: a writer goes on meanwhile)."""

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


class Retention(Store):
    """Deletes what ``journal_keep_days`` no longer keeps; owns no table of its own."""

    def __init__(self, jdb: JournalDb) -> None:
        super().__init__(jdb)
        self.sizes: dict[str, int] = {}
        """Rows per batch of each step, adapted to ``TARGET_BATCH_S`` (loaded and saved by :meth:`prune`)."""

    def _steps(self, cutoff: float, alloc_cutoff: float) -> list[tuple[str, Step, float]]:
        windowed = [(t, self._windowed_step(t, where, cols), cutoff) for t, where, cols in _WINDOWED]
        return [
            ("allocations", self._allocations, alloc_cutoff),
            ("repeated decisions", self._thin_decisions, alloc_cutoff),
            *windowed,
            ("candidates", self._candidates, alloc_cutoff),
            ("jobs", self._jobs, cutoff),
        ]

    def prune_batch(self, keep_s: float, now: float, batch: int | None = None) -> tuple[str, int]:
        """One short transaction: at most one batch of the first step that has rows to delete; returns (step,
        count), ("", 0) when nothing is left (a step may return 0: it examined rows and moved a watermark).
        ``batch`` fixes the rows per batch; by default each step's adapted size is used and adapted."""
        start = time.perf_counter()
        with self.transaction():
            for label, step, cut in self._steps(now - keep_s, now - min(keep_s, ALLOCATION_KEEP_S)):
                rows = batch or self.sizes.get(label, DEFAULT_BATCH)
                count = step(cut, rows)
                if count is not None:
                    break
            else:
                return "", 0
        if batch is None:
            self._adapt(label, rows, count, time.perf_counter() - start)
        return label, count

    def _adapt(self, label: str, rows: int, count: int, took_s: float) -> None:
        """Next batch of this step sized to take ``TARGET_BATCH_S``: shrink at once, grow at most twofold."""
        if took_s > TARGET_BATCH_S:
            rows = int(rows * TARGET_BATCH_S / took_s)
        elif count >= rows and took_s < TARGET_BATCH_S / 2:
            rows *= 2
        self.sizes[label] = max(MIN_BATCH, min(MAX_BATCH, rows))

    def _windowed_step(self, table: str, where: str, columns: str) -> Step:
        first = columns.split(",")[0]

        def step(cutoff: float, rows: int) -> int | None:
            oldest = self.db.execute(f"SELECT {first} FROM {table} ORDER BY rowid LIMIT 1").fetchone()
            if oldest is None or (oldest[0] is not None and oldest[0] >= cutoff):
                return None
            window = f"(SELECT rowid AS rid, {columns} FROM {table} ORDER BY rowid LIMIT ?)"
            cur = self.db.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM {window} AS w WHERE {where} LIMIT ?)",
                [rows * WINDOW_FACTOR, cutoff, rows],
            )
            return cur.rowcount or None

        return step

    def _allocations(self, cutoff: float, rows: int) -> int | None:
        """Allocations of the rounds before the first one younger than ``cutoff`` (and before the latest round):
        an index range from the oldest allocation kept, so finding that none is left costs two index lookups."""
        low = self.db.execute("SELECT MIN(round_index) FROM allocations").fetchone()[0]
        last = self.db.execute("SELECT MAX(round_index) FROM rounds").fetchone()[0]
        if low is None or last is None:
            return None
        young = self.db.execute(
            "SELECT MIN(round_index) FROM rounds WHERE round_index >= ? AND started_at >= ?", [low, cutoff]
        ).fetchone()[0]
        bound = last if young is None else min(young, last)
        if low >= bound:
            return None
        cur = self.db.execute(
            "DELETE FROM allocations WHERE rowid IN (SELECT rowid FROM allocations WHERE round_index < ? LIMIT ?)",
            [bound, rows],
        )
        return cur.rowcount or None

    def _thin_decisions(self, cutoff: float, rows: int) -> int | None:
        """Delete decisions older than ``cutoff`` that repeat the job's previous one (every new round journals
        every job; after a day only the changes are kept). A watermark in the ``state`` table says how far it
        got, so each call examines at most ``rows * WINDOW_FACTOR`` rows. Returns the rows deleted, or None
        when the watermark has reached the rows younger than ``cutoff`` (nothing to thin now)."""
        mark = int(self._mark(_THIN_KEY, [0])[0])
        head = self.db.execute("SELECT time FROM decisions WHERE rowid > ? ORDER BY rowid LIMIT 1", [mark]).fetchone()
        if head is None or head[0] is None or head[0] >= cutoff:
            return None
        window = self.db.execute(
            "SELECT rowid, time FROM decisions WHERE rowid > ? ORDER BY rowid LIMIT ?", [mark, rows * WINDOW_FACTOR]
        ).fetchall()
        old = [rid for rid, t in window if t is not None and t < cutoff]
        if not old:
            return None
        first, last = old[0], old[-1]
        cur = self.db.execute(
            "DELETE FROM decisions WHERE rowid IN (SELECT w.rowid FROM decisions w JOIN decisions p "
            "ON p.rowid = (SELECT MAX(q.rowid) FROM decisions q WHERE q.job_id = w.job_id AND q.rowid < w.rowid) "
            "WHERE w.rowid BETWEEN ? AND ? AND p.reason IS w.reason AND p.cell IS w.cell "
            "AND p.plan IS w.plan AND p.nodes IS w.nodes LIMIT ?)",
            [first, last, rows],
        )
        if cur.rowcount < rows:  # the whole window was examined: move past it
            self._set_mark(_THIN_KEY, [last])
        return cur.rowcount

    def _candidates(self, cutoff: float, rows: int) -> int | None:
        """Candidates of the jobs finished before ``cutoff``, walking the jobs in (finished_at, job_id) order from
        a watermark (an index range: the jobs whose candidates are gone are not looked at again)."""
        mark = self._mark(_CANDIDATES_KEY, [float("-inf"), 0])
        jobs = self.db.execute(
            "SELECT job_id, finished_at FROM jobs WHERE (finished_at, job_id) > (?, ?) AND finished_at < ? "
            "ORDER BY finished_at, job_id LIMIT ?",
            [*mark, cutoff, rows],
        ).fetchall()
        if not jobs:
            return None
        marks = ",".join("?" * len(jobs))
        cur = self.db.execute(
            f"DELETE FROM candidates WHERE rowid IN (SELECT rowid FROM candidates WHERE job_id IN ({marks}) LIMIT ?)",
            [j for j, _ in jobs] + [rows],
        )
        if cur.rowcount < rows:  # every candidate of these jobs is gone
            self._set_mark(_CANDIDATES_KEY, [jobs[-1][1], jobs[-1][0]])
        return cur.rowcount

    def _jobs(self, cutoff: float, rows: int) -> int | None:
        """Jobs finished before ``cutoff`` (an index range on finished_at), with their state row and any
        candidates left."""
        ids = [r[0] for r in self.db.execute(
            "SELECT job_id FROM jobs WHERE finished_at < ? ORDER BY finished_at LIMIT ?", [cutoff, rows]
        )]  # fmt: skip
        if not ids:
            return None
        marks = ",".join("?" * len(ids))
        for table in ("job_state", "candidates", "jobs"):
            self.db.execute(f"DELETE FROM {table} WHERE job_id IN ({marks})", ids)
        return len(ids)

    def _mark(self, key: str, default: list[float]) -> list[float]:
        """A watermark from the ``state`` table (a list; an older journal's single number is read as one)."""
        row = self.db.execute("SELECT value FROM state WHERE key = ?", [key]).fetchone()
        if row is None:
            return default
        try:
            value = json.loads(row[0])
            return [float(v) for v in value] if isinstance(value, list) else [float(value)]
        except (ValueError, TypeError):  # a hand-edited state row: walk again from the start (only costs time)
            return default

    def _set_mark(self, key: str, value: object) -> None:
        self.db.execute(
            "INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [key, json.dumps(value)],
        )

    def journal_now(self) -> float | None:
        """The time of the latest snapshot the journal recorded (the clock its rows were written with)."""
        try:
            return self.db.execute("SELECT MAX(last_seen) FROM jobs").fetchone()[0]
        except Exception:  # no jobs table yet
            return None

    def prune(self, keep_s: float, now: float, *, budget_s: float = 0.05, batch: int | None = None) -> PruneReport:
        """Prune batch after batch until nothing is left or ``budget_s`` is spent (a batch is never cut).

        SQLite's automatic checkpoint (copying the WAL into the database file, with an fsync) would otherwise run
        in the commit of whichever batch fills the WAL, holding the write lock: measured, it was most of the
        longest batches. So it is off during the batches, and one passive checkpoint follows them, which lets
        writers (a tick, the prolog hook) go on while it copies."""
        self.sizes = dict(self._sizes_saved())
        saved = dict(self.sizes)
        conn = self._jdb.conn
        autockpt = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            report = self._batches(keep_s, now, budget_s, batch)
        finally:
            conn.execute(f"PRAGMA wal_autocheckpoint={int(autockpt)}")
        if self.sizes != saved:
            with self.transaction():
                self._set_mark(_SIZES_KEY, self.sizes)
        if report.batches:
            t0 = time.perf_counter()
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            report.checkpoint_s = time.perf_counter() - t0
        return report

    def _batches(self, keep_s: float, now: float, budget_s: float, batch: int | None) -> PruneReport:
        report = PruneReport()
        start = time.perf_counter()
        while True:
            t0, c0 = time.perf_counter(), time.thread_time()
            table, count = self.prune_batch(keep_s, now, batch)
            took = time.perf_counter() - t0
            report.longest_batch_s = max(report.longest_batch_s, took)
            report.batch_s.append((table, took, time.thread_time() - c0))
            if not table:
                report.done = True
                break
            report.batches += 1
            report.deleted[table] = report.deleted.get(table, 0) + count
            if time.perf_counter() - start >= budget_s:
                break
        return report

    def _sizes_saved(self) -> dict[str, int]:
        row = self.db.execute("SELECT value FROM state WHERE key = ?", [_SIZES_KEY]).fetchone()
        try:
            sizes = json.loads(row[0]) if row else {}
            return {str(k): int(v) for k, v in sizes.items()}
        except (ValueError, TypeError, AttributeError):  # a hand-edited state row: start again from the default
            return {}
