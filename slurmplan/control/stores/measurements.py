"""Throughputs the jobs reported (``control/reports.py`` ingests them), and how far each report file was read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slurmplan.control.stores.db import Store, Table

_COLUMNS = {
    "job_id": int,
    "model": str,
    "gpu_type": str,
    "gpus": int,
    "nodes": int,
    "plan": str,
    "samples_per_s": float,
    "memory_gb": float,
    "time": float,
    "stack": str,
}
"""``stack``: the framework that ran the plan (None: the report did not say; older journals gain the column on
their next insert)."""


_PROGRESS = {
    "job_id": int,
    "step": float,
    "checkpoint_step": float,
    "total_steps": float,
    "time": float,
    "steps_per_s": float,
}
"""Each job's latest reported progress (issue 23): steps done, its newest checkpoint's step, its step count, and
the step rate between its newest two reports of one run (``explain`` predicts the finish from it)."""


class MeasurementStore(Store):
    TABLES = (
        Table("measurements", _COLUMNS, indexes=(["model", "gpu_type"], ["time"])),
        Table("report_offsets", {"file": str, "offset": int}, pk="file"),
        Table("job_progress", _PROGRESS, pk="job_id"),
    )

    def offsets(self) -> dict[str, int]:
        """Bytes already ingested of each report file, by file name."""
        return {r["file"]: r["offset"] for r in self.db["report_offsets"].rows}

    def add(
        self, rows: Sequence[dict[str, Any]], file: str, offset: int, progress: Sequence[dict[str, Any]] = ()
    ) -> None:
        """Add one file's new rows and move its offset, together (a crash re-reads, never skips); ``progress``
        rows (``job_id``, ``time`` and any of ``step``, ``checkpoint_step``, ``total_steps``) update each job's
        latest progress."""
        with self.transaction():
            if rows:
                self.db["measurements"].insert_all(rows, alter=True)
            for row in progress:  # alter: a journal from before steps_per_s gains the column
                self.db["job_progress"].upsert(row, pk="job_id", alter=True)
            self.db["report_offsets"].upsert({"file": file, "offset": offset}, pk="file")

    def with_prediction_since(self, rowid: int) -> list[tuple[int, float, float | None]]:
        """``(rowid, reported samples/s, last predicted samples/s before it)`` for reports after ``rowid``.

        The prediction is the newest decision for the job made at or before the report (metrics compare them).
        """
        return [
            (int(r[0]), float(r[1]), None if r[2] is None else float(r[2]))
            for r in self.db.execute(
                "SELECT m.rowid, m.samples_per_s, (SELECT d.throughput FROM decisions d WHERE d.job_id = m.job_id"
                " AND d.throughput > 0 AND d.time <= m.time ORDER BY d.time DESC LIMIT 1)"
                " FROM measurements m WHERE m.rowid > ? ORDER BY m.rowid",
                [rowid],
            ).fetchall()
        ]

    def rows(self, model: str | None = None) -> list[dict[str, Any]]:
        """Measurement rows (all, or one model's), oldest first."""
        where, args = ("model = ?", [model]) if model else (None, None)
        return list(self.db["measurements"].rows_where(where, args, order_by="rowid"))

    def progress(self) -> dict[int, dict[str, Any]]:
        """Each job's latest reported progress, by job id."""
        return {int(r["job_id"]): r for r in self.db["job_progress"].rows}

    def progress_of(self, job_id: int) -> dict[str, Any] | None:
        """One job's latest reported progress (None: none reported)."""
        rows = list(self.db["job_progress"].rows_where("job_id = ?", [int(job_id)]))
        return rows[0] if rows else None
