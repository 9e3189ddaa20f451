"""Max-min fairness / least attained service (Gavel's LAS), weighted, heterogeneity-aware or agnostic."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy, positive
from slurmplan.policy.waterfill import max_min


def normalised_score(problem: AllocationProblem, aware: bool) -> tuple[lp.LpIndex, np.ndarray]:
    """Index and per-variable score ``T_mc / throughput(m, X^equal)``: Gavel's normalised effective throughput.

    The agnostic form replaces every usable throughput by 1 before normalising, so a job's score is its time
    share times its GPU count, whatever the GPU type (Gavel's ``max_min_fairness``).
    """
    thr = None if aware else lp.agnostic_throughput(problem)
    idx = lp.index(problem, thr)
    ref = lp.equal_share_throughput(problem, idx)
    score = idx.thr / np.maximum(ref[idx.rows], 1e-300)
    return idx, score


class MaxMinFairness(Policy):
    """Maximise the minimum over jobs of ``(1/w_m) * throughput(m, X) / throughput(m, X^equal)``.

    ``aware=False`` is the heterogeneity-agnostic baseline; ``water_filling`` keeps raising the jobs that are
    not bottlenecked (Gavel's single-level water filling); the efficiency pass hands leftover capacity to jobs
    that can use it without lowering anyone's level.
    """

    objective: ClassVar[str] = "max_min_fairness"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "water_filling": Param(bool, False, "true or false"),
        "efficiency_pass": Param(bool, True, "true or false"),
        "max_iterations": Param(int, 30, "a positive integer", positive),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx, score = normalised_score(problem, self.params["aware"])
        res = max_min(
            idx,
            score,
            problem.column("weights"),
            self.solver,
            water_filling=self.params["water_filling"],
            max_iterations=self.params["max_iterations"],
            efficiency_pass=self.params["efficiency_pass"],
        )
        if not res.ok:
            return self.empty(problem, "infeasible")
        return self.result(problem, idx.dense(res.x), res.t)
