"""The scheduler's memory between ticks: named values (round, allocation, ...) and one state per job.

Written in the same transaction as the tick's intents (``control/state_store.py`` maps ``SchedulerState`` onto
it), so the state the next tick starts from always matches the actions on record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slurmplan.control.stores.db import Store, Table


class StateStore(Store):
    TABLES = (
        Table("state", {"key": str, "value": str}, pk="key"),
        Table("job_state", {"job_id": int, "value": str}, pk="job_id"),
    )

    def get(self, key: str, default: Any = None) -> Any:
        rows = list(self.db["state"].rows_where("key = ?", [key]))
        return json.loads(rows[0]["value"]) if rows else default

    def set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under ``key``."""
        with self.transaction():
            self.db["state"].upsert({"key": key, "value": json.dumps(value)}, pk="key")

    def replace_jobs(self, by_job: Mapping[int, Any]) -> None:
        """Replace every job's stored state by ``by_job`` (JSON-serialisable values; missing jobs are dropped)."""
        with self.transaction():
            self.db.execute("DELETE FROM job_state")
            self.db["job_state"].insert_all({"job_id": j, "value": json.dumps(v)} for j, v in by_job.items())

    def job(self, job_id: int) -> Any:
        """One job's stored state (None when the scheduler holds none for it)."""
        rows = list(self.db["job_state"].rows_where("job_id = ?", [job_id]))
        return json.loads(rows[0]["value"]) if rows else None

    def set_job(self, job_id: int, value: Any) -> None:
        """Replace one job's stored state (the watchdog forgets operations in flight this way)."""
        with self.transaction():
            self.db["job_state"].upsert({"job_id": job_id, "value": json.dumps(value)}, pk="job_id")

    def jobs(self) -> dict[int, Any]:
        """Every job's stored state, by job id."""
        return {int(r["job_id"]): json.loads(r["value"]) for r in self.db["job_state"].rows_where(order_by="job_id")}
