"""Minimise makespan: ``min_X max_m steps_m / throughput(m, X)`` (Gavel; Gandiva's AutoML batches)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy
from slurmplan.policy.waterfill import max_min


class MinMakespan(Policy):
    """Equivalent LP: maximise ``min_m throughput(m, X) / steps_m``; the makespan is the inverse of that minimum.

    Jobs with no steps left are ignored. The efficiency pass then speeds up the jobs that do not set the
    makespan, which changes nothing for the objective but finishes them sooner.
    """

    objective: ClassVar[str] = "min_makespan"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "efficiency_pass": Param(bool, True, "true or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        steps = problem.column("steps_remaining")
        if problem.num_jobs == 0 or not (steps > 0).any():
            return self.empty(problem)
        idx = lp.index_for(problem, self.params["aware"])
        score = idx.thr / np.maximum(steps[idx.rows], 1e-300)
        weights = (steps > 0).astype(float)
        res = max_min(idx, score, weights, self.solver, efficiency_pass=self.params["efficiency_pass"])
        if not res.ok:
            return self.empty(problem, "infeasible")
        makespan = 1.0 / res.t if res.t > 0 else float("inf")
        return self.result(problem, idx.dense(res.x), makespan)
