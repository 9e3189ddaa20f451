"""One row per tick: when, in which mode, how long each step took, and why it decided nothing (if so)."""

from __future__ import annotations

import time
from typing import Any

from slurmplan.control.stores.db import Store, Table

_COLUMNS = {
    "id": int,
    "started_at": float,
    "finished_at": float,
    "mode": str,
    "round_index": int,
    "new_round": int,
    "observe_s": float,
    "decide_s": float,
    "act_s": float,
    "jobs": int,
    "actions": int,
    "error": str,
}


class TickStore(Store):
    TABLES = (Table("ticks", _COLUMNS, pk="id"),)

    def begin(self, mode: str, started_at: float) -> int:
        with self.transaction():
            return int(self.db["ticks"].insert({"started_at": started_at, "mode": mode}).last_pk)

    def finish(self, tick_id: int, **fields: Any) -> None:
        fields.setdefault("finished_at", time.time())
        with self.transaction():
            self.db["ticks"].update(tick_id, fields)

    def last_finished(self) -> dict[str, Any] | None:
        """The newest tick that completed (health reads its time, round and error)."""
        rows = list(self.db["ticks"].rows_where("finished_at IS NOT NULL", order_by="id desc", limit=1))
        return rows[0] if rows else None

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.db["ticks"].rows_where(order_by="id desc", limit=limit))
