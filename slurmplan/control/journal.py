"""The daemon's journal: one SQLite file (WAL), written through sqlite-utils.

It is both the audit trail (``slurmplan explain`` / ``history`` read it) and the daemon's memory between
ticks. Actions go in as *intents* before anything touches Slurm, in the same transaction as the scheduler state
they belong to; the applier then marks each ``applied`` (or ``failed``), and the next observation marks it
``confirmed``. A tick killed anywhere therefore leaves either nothing (decision not written) or intents that the
next tick re-applies: nothing is lost and nothing is done twice that is not idempotent.

The Slurm prolog/epilog hook writes ``job events`` here through ``Journal(path).record_event(...)``; WAL plus a
busy timeout lets it do so while a tick holds the database.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time as _time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from slurmplan.control.codec import (
    action_from_dict,
    action_to_dict,
    assignment_to_dict,
    candidate_to_dict,
    cell_key,
)
from slurmplan.domain import Action, Allocation, Assignment, Candidate

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 15_000


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


_SCHEMA: dict[str, tuple[dict[str, type], str | None]] = {
    "jobs": (
        {
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
        },
        "job_id",
    ),
    "ticks": (
        {
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
        },
        "id",
    ),
    "rounds": (
        {"round_index": int, "tick_id": int, "started_at": float, "policy": str, "status": str, "objective": float},
        "round_index",
    ),
    "allocations": ({"round_index": int, "job_id": int, "cell": str, "share": float}, None),
    "decisions": (
        {
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
        },
        None,
    ),
    "candidates": (
        {
            "job_id": int,
            "tick_id": int,
            "cell": str,
            "throughput": float,
            "source": str,
            "plan": str,
            "nodes": int,
        },
        None,
    ),
    "actions": (
        {
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
        },
        "id",
    ),
    "measurements": (
        {
            "job_id": int,
            "model": str,
            "gpu_type": str,
            "gpus": int,
            "nodes": int,
            "plan": str,
            "samples_per_s": float,
            "memory_gb": float,
            "time": float,
        },
        None,
    ),
    "report_offsets": ({"file": str, "offset": int}, "file"),
    "events": ({"job_id": int, "event": str, "time": float, "detail": str}, None),
    "state": ({"key": str, "value": str}, "key"),
    "job_state": ({"job_id": int, "value": str}, "job_id"),
}

_INDEXES = (
    ("decisions", ["job_id"]),
    ("actions", ["status"]),
    ("actions", ["job_id"]),
    ("events", ["job_id"]),
    ("candidates", ["job_id"]),
    ("allocations", ["round_index"]),
    ("measurements", ["model", "gpu_type"]),
)


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


def _decision_key(a: Assignment) -> tuple[str, str | None, str | None, str]:
    return (a.reason.value, a.cell.short() if a.cell else None, a.plan.short() if a.plan else None, ",".join(a.nodes))


class Journal:
    """The SQLite journal at ``path`` (created with its schema on first use)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.db = sqlite_utils.Database(conn)
        if str(self.path) != ":memory:":
            self.db.enable_wal()
        conn.execute("PRAGMA synchronous=NORMAL")
        self._create_schema()

    def _create_schema(self) -> None:
        with self.transaction():
            for name, (columns, pk) in _SCHEMA.items():
                self.db[name].create(columns, pk=pk, if_not_exists=True)  # type: ignore[union-attr]
            for table, cols in _INDEXES:
                self.db[table].create_index(cols, if_not_exists=True)  # type: ignore[union-attr]

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic write (``BEGIN IMMEDIATE`` so a concurrent hook waits instead of failing midway)."""
        conn = self.db.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------------------------------------ job events

    def record_event(self, job_id: int, event: str, time: float, detail: str = "") -> None:
        """Journal one job event (prolog/epilog start and end, requeue, ...); called by the Slurm hook."""
        if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id <= 0:
            from slurmplan.domain import ValidationError

            raise ValidationError("job_id", job_id, "a positive integer", "record_event")
        with self.transaction():
            self.db["events"].insert({"job_id": job_id, "event": str(event), "time": float(time), "detail": detail})

    def events(self, job_id: int | None = None) -> list[dict[str, Any]]:
        where, args = ("job_id = ?", [job_id]) if job_id is not None else (None, None)
        return list(self.db["events"].rows_where(where, args, order_by="time, rowid"))

    # ------------------------------------------------------------------------------------------------ jobs

    def upsert_jobs(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or update job rows, keeping ``first_seen`` from the first time a job was seen."""
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

    def job(self, job_id: int) -> dict[str, Any] | None:
        rows = list(self.db["jobs"].rows_where("job_id = ?", [job_id]))
        return rows[0] if rows else None

    def jobs(self, *, unfinished_only: bool = False) -> list[dict[str, Any]]:
        where = "finished_at IS NULL" if unfinished_only else None
        return list(self.db["jobs"].rows_where(where, order_by="job_id"))

    # ----------------------------------------------------------------------------------------------- ticks

    def begin_tick(self, mode: str, started_at: float) -> int:
        with self.transaction():
            return int(self.db["ticks"].insert({"started_at": started_at, "mode": mode}).last_pk)

    def finish_tick(self, tick_id: int, **fields: Any) -> None:
        fields.setdefault("finished_at", _time.time())
        with self.transaction():
            self.db["ticks"].update(tick_id, fields)

    def ticks(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.db["ticks"].rows_where(order_by="id desc", limit=limit))

    # ------------------------------------------------------------------------------------ decisions, rounds

    def record_decision(
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
        if new_round:
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

    def changed_decisions(self, assignments: Sequence[Assignment]) -> list[Assignment]:
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
        return [a for a in assignments if last.get(a.job_id) != _decision_key(a)]

    def record_candidates(self, tick_id: int, by_job: dict[int, Sequence[Candidate]]) -> None:
        """Keep each job's latest candidate list (what ``explain`` shows); older lists are replaced."""
        if not by_job:
            return
        ids = list(by_job)
        marks = ",".join("?" * len(ids))
        self.db.execute(f"DELETE FROM candidates WHERE job_id IN ({marks})", ids)
        self.db["candidates"].insert_all(
            {
                "job_id": job_id,
                "tick_id": tick_id,
                "cell": c.cell.short(),
                "throughput": c.throughput,
                "source": c.source.value,
                "plan": json.dumps(candidate_to_dict(c)),
                "nodes": c.nodes,
            }
            for job_id, cands in by_job.items()
            for c in cands
        )

    def decisions(self, job_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
        where, args = ("job_id = ?", [job_id]) if job_id is not None else (None, None)
        rows = self.db["decisions"].rows_where(where, args, order_by="rowid desc", limit=limit)
        return list(reversed(list(rows)))

    def candidates(self, job_id: int) -> list[dict[str, Any]]:
        return list(self.db["candidates"].rows_where("job_id = ?", [job_id], order_by="throughput desc"))

    def allocation_of(self, job_id: int, round_index: int | None = None) -> list[dict[str, Any]]:
        if round_index is None:
            row = self.db.execute("SELECT MAX(round_index) FROM allocations WHERE job_id = ?", [job_id]).fetchone()
            round_index = row[0] if row else None
        if round_index is None:
            return []
        return list(self.db["allocations"].rows_where("job_id = ? AND round_index = ?", [job_id, round_index]))

    def rounds(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.db["rounds"].rows_where(order_by="round_index desc", limit=limit))

    # --------------------------------------------------------------------------------------------- actions

    def add_intents(self, tick_id: int, round_index: int, actions: Sequence[Action], now: float) -> list[int]:
        """Write actions as intents (call inside the transaction that also saves the scheduler state)."""
        ids = []
        table = self.db["actions"]
        for a in actions:
            row = {
                "tick_id": tick_id,
                "round_index": round_index,
                "job_id": a.job_id,
                "kind": a.kind.value,
                "payload": json.dumps(action_to_dict(a)),
                "status": ActionStatus.INTENT,
                "created_at": now,
                "attempts": 0,
                "message": "",
            }
            ids.append(int(table.insert(row).last_pk))
        return ids

    def mark_action(self, action_id: int, status: str, now: float, message: str = "") -> None:
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

    def actions(
        self, *, status: str | Sequence[str] | None = None, job_id: int | None = None, limit: int | None = None
    ) -> list[ActionRow]:
        clauses, args = [], []
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            clauses.append(f"status IN ({','.join('?' * len(statuses))})")
            args += statuses
        if job_id is not None:
            clauses.append("job_id = ?")
            args.append(job_id)
        rows = self.db["actions"].rows_where(" AND ".join(clauses) or None, args or None, order_by="id", limit=limit)
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
            for r in rows
        ]

    def restart_timeline(self) -> list[dict[str, Any]]:
        """Applied checkpoint signals and GPU updates plus job start/end events, in time order: the raw rows
        ``control.calibration`` measures restarts from (``what`` is the action kind or the event name)."""
        sql = (
            "SELECT job_id, applied_at AS time, kind AS what, payload AS detail FROM actions "
            "WHERE kind IN ('signal', 'update') AND status IN ('applied', 'confirmed') AND applied_at IS NOT NULL "
            "UNION ALL SELECT job_id, time, event AS what, detail FROM events WHERE event IN ('job-start', 'job-end') "
            "ORDER BY job_id, time"
        )
        return [dict(zip(("job_id", "time", "what", "detail"), r, strict=True)) for r in self.db.execute(sql)]

    # ---------------------------------------------------------------------------------------- key / value

    def get_value(self, key: str, default: Any = None) -> Any:
        rows = list(self.db["state"].rows_where("key = ?", [key]))
        return json.loads(rows[0]["value"]) if rows else default

    def set_value(self, key: str, value: Any) -> None:
        self.db["state"].upsert({"key": key, "value": json.dumps(value)}, pk="key")
