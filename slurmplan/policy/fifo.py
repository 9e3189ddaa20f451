"""FIFO: Gavel's LP form (fastest available type in arrival order) and plain Slurm's fixed-request baseline."""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy, one_of
from slurmplan.policy.greedy import Packing

log = logging.getLogger(__name__)


def arrival_order(problem: AllocationProblem) -> np.ndarray:
    """Job positions sorted by submit time, ties broken by position (stable)."""
    return np.argsort(problem.column("submit_time"), kind="stable")


class Fifo(Policy):
    """First come, first served, in three forms.

    ``mode="greedy"`` (default, what Gavel's ``fifo_perf`` does): in arrival order each job gets, whole, its
    fastest column that still has room (the agnostic form: its first usable column). ``mode="lp"``: the thesis'
    LP, maximise ``sum_m throughput(m,X)/throughput(m,X^fastest) * (M - rank_m)``; its linear weights let a
    later job outbid an earlier one when the earlier one loses little, so it is not strict FIFO.
    ``fixed_request=True`` is what plain Slurm does: each job's own requested column or nothing. With
    ``backfill`` a later job may start when an earlier one does not fit; without it the queue stops there.
    """

    objective: ClassVar[str] = "fifo"
    TYPE_BLIND: ClassVar[bool] = False  # its agnostic form already picks a type blindly, whole
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "fixed_request": Param(bool, False, "true (the user's request only) or false"),
        "backfill": Param(bool, True, "true or false"),
        "mode": Param(str, "greedy", "'greedy' or 'lp'", one_of("greedy", "lp")),
    }

    @property
    def decides_on_events(self) -> bool:
        """The fixed-request form is plain Slurm (``slurm_fifo``), which schedules on events, not in rounds."""
        return bool(self.params["fixed_request"])

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        if self.params["fixed_request"] or self.params["mode"] == "greedy":
            return self._greedy(problem)
        thr = None if self.params["aware"] else lp.agnostic_throughput(problem)
        idx = lp.index(problem, thr)
        rank = np.empty(problem.num_jobs)
        rank[self.order(problem)] = np.arange(problem.num_jobs)
        best = lp.fastest_throughput(idx)
        coef = idx.thr / np.maximum(best[idx.rows], 1e-300) * (problem.num_jobs - rank[idx.rows])
        a, b = lp.base_constraints(idx)
        res = lp.solve(-coef, a, b, (np.zeros(idx.size), np.ones(idx.size)), self.solver)
        if not res.ok:
            return self.empty(problem, res.status)
        return self.result(problem, idx.dense(res.x), -res.objective)

    def order(self, problem: AllocationProblem) -> np.ndarray:
        """Job positions, first served first."""
        return arrival_order(problem)

    def _choices(self, problem: AllocationProblem, view: np.ndarray, j: int) -> list[int]:
        """Columns job j may take, best first: its request only, or all usable ones by throughput."""
        if self.params["fixed_request"]:
            c = -1 if problem.requested is None else int(problem.requested[j])
            return [c] if c >= 0 and problem.throughput[j, c] > 0 else []
        # The agnostic form sees only Cell sizes (types averaged), so among same-size Cells it takes the first
        # type with room; Gavel's intended random type would make the policy non-deterministic.
        row = view[j]
        usable = np.nonzero(row > 0)[0]
        return usable[np.argsort(-row[usable], kind="stable")].tolist()

    def _greedy(self, problem: AllocationProblem) -> Allocation:
        pack = Packing.empty(problem)
        view = problem.throughput if self.params["aware"] else lp.agnostic_throughput(problem)
        order = self.order(problem)
        if self.params["fixed_request"] and problem.current is not None:
            # Plain Slurm (no preemption configured) never stops a running job for an earlier one that did not
            # fit when the later one was backfilled: running jobs keep their GPUs, the queue gets what is left.
            running = np.asarray(problem.current)[order] >= 0
            order = np.concatenate([order[running], order[~running]])
        for j in order:
            choices = self._choices(problem, view, j)
            fit = [c for c in choices if pack.fits(int(j), c)]
            if fit:
                pack.assign(int(j), fit[0])
            elif not choices:
                log.debug("job %s has no usable column", problem.job_ids[j])
            elif not self.params["backfill"]:
                break
        return self.result(problem, pack.x(), float((pack.col >= 0).sum()))


class ShortestJobFirst(Fifo):
    """FIFO's machinery with the queue ordered by remaining time (steps left / best throughput), shortest first.

    The thesis prints SJF as "minimise min_m steps_m / throughput(m, X)", which is not convex; serving the
    shortest remaining job first is the standard reading and what its greedy and LP forms here do.
    """

    objective: ClassVar[str] = "sjf"

    def order(self, problem: AllocationProblem) -> np.ndarray:
        thr = problem.throughput if self.params["aware"] else lp.agnostic_throughput(problem)
        best = np.asarray(thr).max(axis=1, initial=0.0)
        remaining = problem.column("steps_remaining") / np.where(best > 0, best, np.nan)
        return np.argsort(np.nan_to_num(remaining, nan=np.inf), kind="stable")
