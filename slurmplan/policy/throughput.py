"""Maximise total effective throughput (Gavel ch. 6's baseline): ``max_X sum_m throughput(m, X)``."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy


class MaxTotalThroughput(Policy):
    """The thesis sums raw throughputs, which favours models with large samples/s; ``normalise`` divides each
    job's throughput by its best one first, so the sum counts "fraction of full speed" and mixes models fairly.
    """

    objective: ClassVar[str] = "max_total_throughput"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "normalise": Param(bool, False, "true or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx = lp.index_for(problem, self.params["aware"])
        coef = idx.thr * problem.column("weights")[idx.rows]
        if self.params["normalise"]:
            coef = coef / np.maximum(lp.fastest_throughput(idx)[idx.rows], 1e-300)
        a, b = lp.base_constraints(idx)
        res = lp.solve(-coef, a, b, (np.zeros(idx.size), np.ones(idx.size)), self.solver)
        if not res.ok:
            return self.empty(problem, res.status)
        return self.result(problem, idx.dense(res.x), -res.objective)
