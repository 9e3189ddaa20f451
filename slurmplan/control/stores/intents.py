"""Actions, from intent to confirmation: written before anything touches Slurm, then marked as they go.

Life of a row: ``intent`` (in the tick's transaction) -> ``applied`` or ``failed`` by the applier ->
``confirmed`` or ``diverged`` by the next observation; ``shadow`` rows are decided but never applied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slurmplan.control.codec import action_from_dict, action_to_dict
from slurmplan.control.stores.db import Store, Table
from slurmplan.domain import Action


class ActionStatus:
    """The life of one action row. Plain strings in the database so ``sqlite3`` users can read them."""

    INTENT = "intent"
    APPLIED = "applied"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    DIVERGED = "diverged"
    """Applied, but the next observation shows Slurm did not take it (the next decision corrects it)."""
    SHADOW = "shadow"
    """Decided in shadow mode: journaled, never applied."""


@dataclass(frozen=True)
class ActionRow:
    id: int
    action: Action
    status: str
    tick_id: int
    round_index: int
    attempts: int
    created_at: float
    applied_at: float | None = None
    message: str = ""


_COLUMNS = {
    "id": int,
    "tick_id": int,
    "round_index": int,
    "job_id": int,
    "kind": str,
    "payload": str,
    "status": str,
    "created_at": float,
    "applied_at": float,
    "confirmed_at": float,
    "attempts": int,
    "message": str,
}


RECENT_RESTARTS = 500
"""How many of the latest checkpoint signals the restart timeline covers (``restart_timeline``): enough restarts for
the calibration's per-size medians, while a long-running site's tick does not read its whole history."""


class IntentStore(Store):
    TABLES = (Table("actions", _COLUMNS, pk="id", indexes=(["status"], ["job_id"], ["kind", "applied_at"])),)

    def add(
        self, tick_id: int, round_index: int, actions: Sequence[Action], now: float, status: str = ActionStatus.INTENT
    ) -> list[int]:
        """Write actions (as intents unless ``status`` says otherwise); call inside the tick's transaction."""
        ids = []
        table = self.db["actions"]
        with self.transaction():
            for a in actions:
                row = {
                    "tick_id": tick_id,
                    "round_index": round_index,
                    "job_id": a.job_id,
                    "kind": a.kind.value,
                    "payload": json.dumps(action_to_dict(a)),
                    "status": status,
                    "created_at": now,
                    "attempts": 0,
                    "message": "",
                }
                ids.append(int(table.insert(row).last_pk))
        return ids

    def mark(self, action_id: int, status: str, now: float, message: str = "") -> None:
        """Move one action along its life; ``applied``/``failed`` count an attempt."""
        with self.transaction():
            if status in (ActionStatus.APPLIED, ActionStatus.FAILED):
                self.db.execute(
                    "UPDATE actions SET status = ?, applied_at = ?, message = ?, attempts = attempts + 1 WHERE id = ?",
                    [status, now, message, action_id],
                )
            else:
                self.db.execute(
                    "UPDATE actions SET status = ?, confirmed_at = ?, message = CASE WHEN ? = '' THEN message "
                    "ELSE ? END WHERE id = ?",
                    [status, now, message, message, action_id],
                )

    def count_attempt(self, action_id: int, message: str) -> None:
        """A failed try that will be retried: one more attempt, the row stays an intent."""
        with self.transaction():
            self.db.execute(
                "UPDATE actions SET attempts = attempts + 1, message = ? WHERE id = ?", [f"retry: {message}", action_id]
            )

    def set_status(self, ids: Sequence[int], status: str) -> None:
        """Relabel rows without counting an attempt (shadow mode's decisions)."""
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self.transaction():
            self.db.execute(f"UPDATE actions SET status = ? WHERE id IN ({marks})", [status, *ids])

    def rows(
        self,
        *,
        status: str | Sequence[str] | None = None,
        job_id: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[ActionRow]:
        """Rows oldest first; ``newest=True`` with a ``limit`` takes the latest ``limit`` (still oldest first)."""
        clauses, args = [], []
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            clauses.append(f"status IN ({','.join('?' * len(statuses))})")
            args += statuses
        if job_id is not None:
            clauses.append("job_id = ?")
            args.append(job_id)
        order = "id desc" if newest else "id"
        found = list(
            self.db["actions"].rows_where(" AND ".join(clauses) or None, args or None, order_by=order, limit=limit)
        )
        if newest:
            found.reverse()
        return [
            ActionRow(
                id=r["id"],
                action=action_from_dict(json.loads(r["payload"])),
                status=r["status"],
                tick_id=r["tick_id"],
                round_index=r["round_index"],
                attempts=r["attempts"] or 0,
                created_at=r["created_at"],
                applied_at=r["applied_at"],
                message=r["message"] or "",
            )
            for r in found
        ]

    def oldest_unconfirmed_at(self) -> float | None:
        """Creation time of the oldest action not yet confirmed by Slurm (an intent, or applied but unseen)."""
        row = self.db.execute(
            "SELECT MIN(created_at) FROM actions WHERE status IN (?, ?)", [ActionStatus.INTENT, ActionStatus.APPLIED]
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def count(self) -> int:
        return self.db["actions"].count

    def restart_timeline(self, recent: int | None = RECENT_RESTARTS) -> list[dict[str, Any]]:
        """Applied checkpoint signals and GPU updates plus job start/end events, ordered by job and time: the raw
        rows ``control.calibration`` measures restarts from (``what`` is the action kind or the event name).

        Only rows from the ``recent``-th latest applied signal on (``None``: all history), read through the
        ``(kind, applied_at)`` and ``(event, time)`` indexes, so the cost follows ``recent``, not the journal's age.
        """
        if "events" not in self.db.table_names():
            return []
        applied = "kind = ? AND status IN ('applied', 'confirmed') AND applied_at IS NOT NULL"
        since = float("-inf")
        if recent is not None:
            row = self.db.execute(
                f"SELECT applied_at FROM actions WHERE {applied} ORDER BY applied_at DESC LIMIT 1 OFFSET ?",
                ["signal", max(0, recent - 1)],
            ).fetchone()
            since = float(row[0]) if row is not None else since
        reports = ""  # the first throughput report after a restart ends it (calibration: end to end)
        if "measurements" in self.db.table_names():
            reports = "UNION ALL SELECT job_id, time, 'report' AS what, '' FROM measurements WHERE time >= ? "
        sql = (
            "SELECT job_id, applied_at AS time, kind AS what, payload AS detail FROM actions "
            "WHERE kind IN ('signal', 'update') AND applied_at >= ? AND status IN ('applied', 'confirmed') "
            "UNION ALL SELECT job_id, time, event AS what, detail FROM events "
            f"WHERE event IN ('job-start', 'job-end') AND time >= ? {reports}ORDER BY job_id, time"
        )
        rows = self.db.execute(sql, [since, since, since] if reports else [since, since])
        return [dict(zip(("job_id", "time", "what", "detail"), r, strict=True)) for r in rows]
