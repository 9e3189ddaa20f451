"""Journal retention: old rows pruned in small batches while the daemon runs (``journal_keep_days``).

Slurm's accounting is the long-term record of jobs; the journal keeps what ``explain``, ``history``, calibration
and recovery need. Without pruning it grows by a decision and an allocation row per job per round (a 2,000-job
site: about 480,000 of each a day). Pruning deletes, oldest first and at most ``batch`` rows per statement so no
step holds the database for long (a tick waits for it, see ``benchmarks/bench_journal_retention.py``):

* decisions, events, ticks and rounds older than the cutoff, except the latest decision of every job not yet
  finished (``explain`` of a long-running job) and the latest round (the state the next tick continues from);
* actions older than the cutoff that are final: an unconfirmed intent (``intent``/``applied``) is never deleted,
  since recovery re-applies or confirms it;
* allocations (one row per job and Cell per round, the largest table) of rounds older than one day
  (``ALLOCATION_KEEP_S``): ``explain`` shows a job's latest share only;
* decisions older than one day that repeat the job's previous decision (each new round journals every job in
  full): after a day ``history`` keeps the changes, which is what it shows anyway;
* the candidates of jobs that finished over a day ago (``explain`` of a job just finished still shows them);
* jobs that finished before the cutoff, with their scheduler-state row.

Measurements (the jobs' throughput reports the performance model learns from) are kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from slurmplan.control.stores.db import Store

ALLOCATION_KEEP_S = 86_400.0
DEFAULT_BATCH = 250

_LIVE = "SELECT job_id FROM jobs WHERE finished_at IS NULL"
_FINAL = "('confirmed', 'failed', 'diverged', 'shadow')"

_STEPS: tuple[tuple[str, str, str, str], ...] = (
    (
        "decisions",
        "decisions",
        f"time < ? AND NOT (job_id IN ({_LIVE}) AND w.rid = "
        "(SELECT MAX(d2.rowid) FROM decisions d2 WHERE d2.job_id = w.job_id))",
        "time, job_id",
    ),
    ("actions", "actions", f"created_at < ? AND status IN {_FINAL}", "created_at, status"),
    ("events", "events", "time < ?", "time"),
    ("ticks", "ticks", "started_at < ? AND id < (SELECT MAX(id) FROM ticks)", "started_at, id"),
    (
        "rounds",
        "rounds",
        "started_at < ? AND round_index < (SELECT MAX(round_index) FROM rounds)",
        "started_at, round_index",
    ),  # fmt: skip
    ("job_state", "job_state", "job_id IN (SELECT job_id FROM jobs WHERE finished_at < ?)", ""),
    ("jobs", "jobs", "finished_at < ?", ""),
)
"""(label, table, condition on the rows to delete (? is the cutoff), columns it needs). Tables with columns are
appended in time order: only their oldest ``batch * WINDOW_FACTOR`` rows (rowid order) are examined, and not even
those when the oldest row is younger than the cutoff, so a batch costs the same on a journal of a thousand rows
or of ten million, and finding that nothing is left is as cheap."""
WINDOW_FACTOR = 4
_THIN_KEY = "retention.thinned_decisions_to_rowid"


@dataclass
class PruneReport:
    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    longest_batch_s: float = 0.0
    done: bool = False
    """Nothing older than the cutoff is left to delete."""

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


class Retention(Store):
    """Deletes what ``journal_keep_days`` no longer keeps; owns no table of its own."""

    def prune_batch(self, keep_s: float, now: float, batch: int = DEFAULT_BATCH) -> tuple[str, int]:
        """Delete at most ``batch`` rows of the first table that has any to delete; returns (table, count),
        ("", 0) when nothing is left (a step may also return a table with 0: it examined rows and moved on).
        One short transaction each."""
        cutoff = now - keep_s
        alloc_cutoff = now - min(keep_s, ALLOCATION_KEEP_S)
        with self.transaction():
            n = self._delete_allocations(alloc_cutoff, batch)
            if n:
                return "allocations", n
            cur = self.db.execute(
                "DELETE FROM candidates WHERE rowid IN (SELECT rowid FROM candidates WHERE job_id IN "
                "(SELECT job_id FROM jobs WHERE finished_at < ?) LIMIT ?)",
                [alloc_cutoff, batch],
            )
            if cur.rowcount:
                return "candidates", cur.rowcount
            thinned = self._thin_decisions(alloc_cutoff, batch)
            if thinned is not None:
                return "repeated decisions", thinned
            for label, table, where, columns in _STEPS:
                if columns:
                    oldest = self.db.execute(f"SELECT {columns.split(',')[0]} FROM {table} ORDER BY rowid LIMIT 1")
                    first = oldest.fetchone()
                    if first is None or (first[0] is not None and first[0] >= cutoff):
                        continue
                    source = f"(SELECT rowid AS rid, {columns} FROM {table} ORDER BY rowid LIMIT ?)"
                    args: list[float | int] = [batch * WINDOW_FACTOR, cutoff, batch]
                else:
                    source, args = table, [cutoff, batch]
                rid = "rid" if columns else "rowid"
                cur = self.db.execute(
                    f"DELETE FROM {table} WHERE rowid IN (SELECT {rid} FROM {source} AS w WHERE {where} LIMIT ?)",
                    args,
                )
                if cur.rowcount:
                    return label, cur.rowcount
        return "", 0

    def _thin_decisions(self, cutoff: float, batch: int) -> int | None:
        """Delete decisions older than ``cutoff`` that repeat the job's previous one (every new round journals
        every job; after a day only the changes are kept). A watermark in the ``state`` table says how far it
        got, so each call examines at most ``batch * WINDOW_FACTOR`` rows. Returns the rows deleted, or None
        when the watermark has reached the rows younger than ``cutoff`` (nothing to thin now)."""
        row = self.db.execute("SELECT value FROM state WHERE key = ?", [_THIN_KEY]).fetchone()
        mark = int(row[0]) if row else 0
        head = self.db.execute("SELECT time FROM decisions WHERE rowid > ? ORDER BY rowid LIMIT 1", [mark]).fetchone()
        if head is None or head[0] is None or head[0] >= cutoff:
            return None
        window = self.db.execute(
            "SELECT rowid, time FROM decisions WHERE rowid > ? ORDER BY rowid LIMIT ?", [mark, batch * WINDOW_FACTOR]
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
            [first, last, batch],
        )
        if cur.rowcount < batch:  # the whole window was examined: move past it
            self.db.execute(
                "INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [_THIN_KEY, str(last)],
            )
        return cur.rowcount

    def _delete_allocations(self, cutoff: float, batch: int) -> int:
        last = self.db.execute("SELECT MAX(round_index) FROM rounds").fetchone()[0]
        old = "SELECT round_index FROM rounds WHERE started_at < ? AND round_index < ?"
        cur = self.db.execute(
            f"DELETE FROM allocations WHERE rowid IN "
            f"(SELECT rowid FROM allocations WHERE round_index IN ({old}) LIMIT ?)",
            [cutoff, last if last is not None else 0, batch],
        )
        return cur.rowcount

    def journal_now(self) -> float | None:
        """The time of the latest snapshot the journal recorded (the clock its rows were written with)."""
        try:
            return self.db.execute("SELECT MAX(last_seen) FROM jobs").fetchone()[0]
        except Exception:  # no jobs table yet
            return None

    def prune(self, keep_s: float, now: float, *, budget_s: float = 0.05, batch: int = DEFAULT_BATCH) -> PruneReport:
        """Prune batch after batch until nothing is left or ``budget_s`` is spent (a batch is never cut)."""
        report = PruneReport()
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            table, count = self.prune_batch(keep_s, now, batch)
            report.longest_batch_s = max(report.longest_batch_s, time.perf_counter() - t0)
            if not table:
                report.done = True
                return report
            report.batches += 1
            report.deleted[table] = report.deleted.get(table, 0) + count
            if time.perf_counter() - start >= budget_s:
                return report
