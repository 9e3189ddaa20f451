"""What each tick decided, job by job, and on a new round the policy's allocation X it came from.

``explain`` and ``history`` read this back: the reason, Cell, plan, nodes, priority and share of every
decision, never recomputed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from slurmplan.control.codec import assignment_to_dict, cell_key
from slurmplan.control.stores.db import Store, Table
from slurmplan.domain import Allocation, Assignment

_DECISIONS = {
    "tick_id": int,
    "round_index": int,
    "time": float,
    "job_id": int,
    "reason": str,
    "cell": str,
    "plan": str,
    "nodes": str,
    "priority": float,
    "share": float,
    "throughput": float,
    "detail": str,
    "assignment": str,
}
_ROUNDS = {"round_index": int, "tick_id": int, "started_at": float, "policy": str, "status": str, "objective": float}


def decision_key(a: Assignment) -> tuple[str, str | None, str | None, str]:
    """What makes two decisions for a job the same: reason, Cell, plan and nodes."""
    return (a.reason.value, a.cell.short() if a.cell else None, a.plan.short() if a.plan else None, ",".join(a.nodes))


class DecisionStore(Store):
    TABLES = (
        Table("decisions", _DECISIONS, indexes=(["job_id"],)),
        Table("rounds", _ROUNDS, pk="round_index"),
        # ``explain`` reads one job's latest shares: without the (job_id, round_index) index that scans a table of
        # one row per job and Cell per round (a day's worth, see ``retention``), on every explain.
        Table(
            "allocations",
            {"round_index": int, "job_id": int, "cell": str, "share": float},
            indexes=(["round_index"], ["job_id", "round_index"]),
        ),
    )

    def record(
        self,
        tick_id: int,
        round_index: int,
        now: float,
        assignments: Sequence[Assignment],
        allocation: Allocation | None,
        new_round: bool,
        policy: str,
    ) -> None:
        """Journal what the tick decided and, on a new round, the allocation X it came from."""
        with self.transaction():
            if new_round:
                self._record_round(tick_id, round_index, now, allocation, policy)
            self.db["decisions"].insert_all(
                {
                    "tick_id": tick_id,
                    "round_index": round_index,
                    "time": now,
                    "job_id": a.job_id,
                    "reason": a.reason.value,
                    "cell": a.cell.short() if a.cell else None,
                    "plan": a.plan.short() if a.plan else None,
                    "nodes": ",".join(a.nodes),
                    "priority": a.priority,
                    "share": a.share,
                    "throughput": a.throughput,
                    "detail": a.detail,
                    "assignment": json.dumps(assignment_to_dict(a)),
                }
                for a in assignments
            )

    def _record_round(
        self, tick_id: int, round_index: int, now: float, allocation: Allocation | None, policy: str
    ) -> None:
        self.db["rounds"].upsert(
            {
                "round_index": round_index,
                "tick_id": tick_id,
                "started_at": now,
                "policy": allocation.policy if allocation else policy,
                "status": allocation.status if allocation else "none",
                "objective": float(allocation.objective) if allocation else None,
            },
            pk="round_index",
        )
        if allocation is not None:
            self.db["allocations"].insert_all(
                {"round_index": round_index, "job_id": job_id, "cell": cell_key(cell), "share": share}
                for job_id in allocation.job_ids
                for cell, share in allocation.share(job_id).items()
            )

    def changed(self, assignments: Sequence[Assignment]) -> list[Assignment]:
        """The assignments that differ from each job's last journaled decision (reason, cell, plan, nodes).

        Between rounds most ticks repeat the round's decisions; journaling only the changes keeps ``history``
        readable and the database small, while every new round is journaled in full.
        """
        if not assignments:
            return []
        ids = [a.job_id for a in assignments]
        marks = ",".join("?" * len(ids))
        last = {
            r[0]: (r[1], r[2], r[3], r[4])
            for r in self.db.execute(
                f"SELECT job_id, reason, cell, plan, nodes FROM decisions WHERE rowid IN "
                f"(SELECT MAX(rowid) FROM decisions WHERE job_id IN ({marks}) GROUP BY job_id)",
                ids,
            ).fetchall()
        }
        return [a for a in assignments if last.get(a.job_id) != decision_key(a)]

    def of(self, job_id: int | None = None, limit: int | None = 50) -> list[dict[str, Any]]:
        """The latest ``limit`` decisions (of one job, or all; None: every one), oldest first."""
        where, args = ("job_id = ?", [job_id]) if job_id is not None else (None, None)
        rows = self.db["decisions"].rows_where(where, args, order_by="rowid desc", limit=limit)
        return list(reversed(list(rows)))

    def count(self) -> int:
        return self.db["decisions"].count

    def allocation_of(self, job_id: int, round_index: int | None = None) -> list[dict[str, Any]]:
        """The job's shares X in ``round_index`` (default: the latest round that gave it any)."""
        if round_index is None:
            row = self.db.execute("SELECT MAX(round_index) FROM allocations WHERE job_id = ?", [job_id]).fetchone()
            round_index = row[0] if row else None
        if round_index is None:
            return []
        return list(self.db["allocations"].rows_where("job_id = ? AND round_index = ?", [job_id, round_index]))

    def rounds(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.db["rounds"].rows_where(order_by="round_index desc", limit=limit))

    def first_round_at(self) -> float | None:
        """When the daemon's first round opened (its tick's time), or None before any: the rounds' grid starts
        there (``mechanism.engine.on_round_grid``), so ``slurmplan replay`` predicts with the same phase."""
        if not self.db["rounds"].exists():
            return None
        rows = list(self.db["rounds"].rows_where(order_by="round_index", limit=1))
        return float(rows[0]["started_at"]) if rows else None
