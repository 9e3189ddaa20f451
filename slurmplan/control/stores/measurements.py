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
}


class MeasurementStore(Store):
    TABLES = (
        Table("measurements", _COLUMNS, indexes=(["model", "gpu_type"], ["time"])),
        Table("report_offsets", {"file": str, "offset": int}, pk="file"),
    )

    def offsets(self) -> dict[str, int]:
        """Bytes already ingested of each report file, by file name."""
        return {r["file"]: r["offset"] for r in self.db["report_offsets"].rows}

    def add(self, rows: Sequence[dict[str, Any]], file: str, offset: int) -> None:
        """Add one file's new rows and move its offset, together (a crash re-reads, never skips)."""
        with self.transaction():
            if rows:
                self.db["measurements"].insert_all(rows)
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
