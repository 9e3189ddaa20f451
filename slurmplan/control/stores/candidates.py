"""Each job's latest priced candidates (Cell, predicted throughput and where the figure came from)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from slurmplan.control.codec import candidate_to_dict
from slurmplan.control.stores.db import Store, Table
from slurmplan.domain import Candidate

_COLUMNS = {"job_id": int, "tick_id": int, "cell": str, "throughput": float, "source": str, "plan": str, "nodes": int}


class CandidateStore(Store):
    TABLES = (Table("candidates", _COLUMNS, indexes=(["job_id"],)),)

    def replace(self, tick_id: int, by_job: Mapping[int, Sequence[Candidate]]) -> None:
        """Keep each job's latest candidate list (what ``explain`` shows); older lists are replaced."""
        if not by_job:
            return
        ids = list(by_job)
        marks = ",".join("?" * len(ids))
        with self.transaction():
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

    def job_ids(self) -> set[int]:
        """Jobs that have a candidate list on record."""
        return {r[0] for r in self.db.execute("SELECT DISTINCT job_id FROM candidates").fetchall()}

    def of(self, job_id: int) -> list[dict[str, Any]]:
        """One job's candidates, fastest first."""
        return list(self.db["candidates"].rows_where("job_id = ?", [job_id], order_by="throughput desc"))
