"""What the daemon saw of each job: name, user, hints (or why they were refused), state, first and last seen."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from slurmplan.control.stores.db import Store, Table

_COLUMNS = {
    "job_id": int,
    "name": str,
    "user": str,
    "partition": str,
    "managed": int,
    "hints": str,
    "hint_error": str,
    "state": str,
    "first_seen": float,
    "last_seen": float,
    "finished_at": float,
}


class JobStore(Store):
    TABLES = (Table("jobs", _COLUMNS, pk="job_id", indexes=(["finished_at"],)),)  # retention walks finished jobs

    def upsert(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or update job rows, keeping ``first_seen`` and ``finished_at`` from the first time they were set."""
        if not rows:
            return
        with self.transaction():
            ids = [r["job_id"] for r in rows]
            known: dict[int, dict[str, Any]] = {}
            for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
                chunk = ids[start : start + 500]
                where = f"job_id IN ({','.join('?' * len(chunk))})"
                known.update((r["job_id"], r) for r in self.db["jobs"].rows_where(where, chunk))
            out = []
            for row in rows:
                old = known.get(row["job_id"])
                merged = {**(old or {}), **row}
                for keep in ("first_seen", "finished_at"):
                    if old and old.get(keep) is not None:
                        merged[keep] = old[keep]
                out.append(merged)
            self.db["jobs"].upsert_all(out, pk="job_id")

    def mark_finished(self, job_ids: Iterable[int], state: str, now: float) -> None:
        ids = list(job_ids)
        if not ids:
            return
        with self.transaction():
            for job_id in ids:
                self.db.execute(
                    "UPDATE jobs SET state = ?, finished_at = ? WHERE job_id = ? AND finished_at IS NULL",
                    [state, now, job_id],
                )

    def get(self, job_id: int) -> dict[str, Any] | None:
        rows = list(self.db["jobs"].rows_where("job_id = ?", [job_id]))
        return rows[0] if rows else None

    def all(self, *, unfinished_only: bool = False) -> list[dict[str, Any]]:
        where = "finished_at IS NULL" if unfinished_only else None
        return list(self.db["jobs"].rows_where(where, order_by="job_id"))

    def count(self) -> int:
        return self.db["jobs"].count
