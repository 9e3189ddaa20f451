"""Job events: starts and ends from the Slurm prolog/epilog hook, requeues and finishes seen by the daemon."""

from __future__ import annotations

from typing import Any

from slurmplan.control.stores.db import Store, Table
from slurmplan.domain import ValidationError


class EventStore(Store):
    TABLES = (
        Table(
            "events",
            {"job_id": int, "event": str, "time": float, "detail": str},
            indexes=(["job_id"], ["event", "time"]),  # (event, time): the restart timeline's window
        ),
    )

    def record(self, job_id: int, event: str, time: float, detail: str = "") -> None:
        """Journal one job event; the hook calls this while a tick may hold the database (it waits)."""
        if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id <= 0:
            raise ValidationError("job_id", job_id, "a positive integer", "events.record")
        with self.transaction():
            self.db["events"].insert({"job_id": job_id, "event": str(event), "time": float(time), "detail": detail})

    def of(self, job_id: int | None = None, *, newest: int | None = None) -> list[dict[str, Any]]:
        """Events of one job (or all), oldest first; ``newest=N`` keeps only the N latest."""
        where, args = ("job_id = ?", [job_id]) if job_id is not None else (None, None)
        if newest is None:
            return list(self.db["events"].rows_where(where, args, order_by="time, rowid"))
        rows = self.db["events"].rows_where(where, args, order_by="time desc, rowid desc", limit=newest)
        return list(reversed(list(rows)))

    def count(self) -> int:
        return self.db["events"].count
