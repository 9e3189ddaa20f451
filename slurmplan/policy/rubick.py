"""Rubick (rubick.md section 3): SLAs for guaranteed jobs, then the rest by resource-sensitivity slope.

At this level a column already is "resources + best plan for them" (perf/ chose the plan per Cell, which is
Rubick's sensitivity curve), so Algorithm 1 becomes:
1. privileged jobs (guaranteed, in submit order, while their account's quota lasts) get their minRes: the
   column with the fewest GPUs whose throughput reaches the SLA (the requested resources with the requested
   plan), else the requested column itself;
2. every job then grows greedily by the steepest slope (speedup gained per added GPU), best-effort jobs from
   nothing, guaranteed jobs from their minRes (never below it, so only best-effort jobs are preempted);
3. anti-starvation: a best-effort job that has waited ``starvation_s`` without service is served first, at its
   smallest configuration, as Tiresias-style promotion.
Quota per account is its weight's share of all GPUs when account weights are given, else unlimited. CPUs and
host memory: each column's needs come from its candidate (the plan perf/ chose, e.g. ZeRO-Offload needs more
CPUs); when the problem gives ``cpu_capacity`` / ``memory_capacity_mb`` per GPU type, no move may exceed them,
so a job whose best plan is CPU-hungry is held to a Cell whose plan fits (Rubick's GPU-then-CPU search).
"""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, JobClass
from slurmplan.policy.base import Param, Policy, non_negative
from slurmplan.policy.greedy import Packing, climb, reference_throughput

log = logging.getLogger(__name__)


def min_res_column(problem: AllocationProblem, j: int, pack: Packing, sla: float) -> int:
    """Fewest GPUs meeting ``sla`` that fit now (ties: higher throughput); the requested column as fallback."""
    row = problem.throughput[j]
    cols = [c for c in np.nonzero(row >= max(sla, 1e-12))[0] if pack.fits(j, int(c))]
    if cols:
        return int(min(cols, key=lambda c: (pack.cell_gpus[c], -row[c])))
    req = -1 if problem.requested is None else int(problem.requested[j])
    return req if req >= 0 and pack.fits(j, req) else -1


class Rubick(Policy):
    objective: ClassVar[str] = "rubick"
    PARAMS: ClassVar = {
        "starvation_s": Param(float, 3600.0, "seconds >= 0 a best-effort job may wait", non_negative),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        pack = Packing.empty(problem)
        classes = problem.job_class or (JobClass.BEST_EFFORT,) * problem.num_jobs
        guaranteed = np.array([c is JobClass.GUARANTEED for c in classes], dtype=bool)
        sla = problem.column("sla_throughput")
        quota = self._quotas(problem)
        used: dict[str, float] = {}
        order = np.argsort(problem.column("submit_time"), kind="stable")
        accounts = problem.accounts or ("",) * problem.num_jobs
        for j in order[guaranteed[order]]:
            c = min_res_column(problem, int(j), pack, sla[j])
            acct = accounts[j]
            if c < 0 or used.get(acct, 0.0) + pack.cell_gpus[c] > quota.get(acct, np.inf):
                log.debug("guaranteed job %s not privileged (no minRes fits its quota)", problem.job_ids[j])
                guaranteed[j] = False
                continue
            pack.assign(int(j), c)
            used[acct] = used.get(acct, 0.0) + pack.cell_gpus[c]
        self._starving(problem, pack, guaranteed)
        score = problem.throughput / reference_throughput(problem)[:, None]
        floor = pack.col.copy()

        def keep_min_res(col: np.ndarray, ok: np.ndarray) -> np.ndarray:
            # A privileged job may only move to columns at least as fast as its minRes.
            held = guaranteed & (floor >= 0)
            if held.any():
                rows = np.nonzero(held)[0]
                ok[rows] &= problem.throughput[rows] >= problem.throughput[rows, floor[rows]][:, None] - 1e-12
            return ok

        climb(pack, score, keep_min_res)
        return self.result(problem, pack.x(), pack.value(score))

    def _quotas(self, problem: AllocationProblem) -> dict[str, float]:
        if not problem.account_weights:
            return {}
        total = float(sum(problem.capacity.values()))
        wsum = sum(problem.account_weights.values()) or 1.0
        return {a: total * w / wsum for a, w in problem.account_weights.items()}

    def _starving(self, problem: AllocationProblem, pack: Packing, guaranteed: np.ndarray) -> None:
        waited = problem.column("time_since_start")
        served = problem.column("attained_time")
        starving = ~guaranteed & (waited >= self.params["starvation_s"]) & (served <= 0)
        for j in np.nonzero(starving)[0][np.argsort(-waited[starving], kind="stable")]:
            fit = [c for c in np.nonzero(problem.throughput[j] > 0)[0] if pack.fits(int(j), int(c))]
            if fit:
                pack.assign(int(j), int(min(fit, key=lambda c: (pack.cell_gpus[c], -problem.throughput[j, c]))))
