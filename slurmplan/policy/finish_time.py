"""Finish-time fairness (Themis, in Gavel's form): minimise the largest ``rho`` over jobs.

``rho_m(X) = (t_m + steps_m / throughput(m, X)) / (t_m + steps_m / throughput(m, X^isolated))``: how much
longer job m takes under X than with its own 1/n of the cluster. Not an LP (``1/throughput`` is convex), so
this one is solved as Gavel does, through cvxpy with ``inv_pos`` (an exponential-cone-free SOCP that CLARABEL
solves); ``solver: highs`` in the YAML means the default cvxpy solver CLARABEL here.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy

log = logging.getLogger(__name__)


def isolated_throughput(problem: AllocationProblem, idx: lp.LpIndex) -> np.ndarray:
    """Throughput with 1/n of the cluster's GPU time spread over types by size, capped at the job's best."""
    n = max(int((np.bincount(idx.rows, minlength=idx.num_jobs) > 0).sum()), 1)
    per_gpu = lp.equal_share_throughput(problem, idx)
    return np.minimum(per_gpu * idx.capacity.sum() / n, lp.fastest_throughput(idx))


class FinishTimeFairness(Policy):
    """Minimise ``max_m rho_m``; ``t_m`` is the time since the job started (also used for ``t_m^isolated``)."""

    objective: ClassVar[str] = "finish_time_fairness"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        import cvxpy as cp  # here, not at the top: ~0.4 s that every `slurmplan` start paid through the registry

        idx = lp.index_for(problem, self.params["aware"])
        steps = problem.column("steps_remaining")
        has = (np.bincount(idx.rows, minlength=idx.num_jobs) > 0) & (steps > 0)
        if idx.size == 0 or not has.any():
            return self.empty(problem)
        t = problem.column("time_since_start")
        iso = isolated_throughput(problem, idx)
        denom = t + steps / np.maximum(iso, 1e-300)
        jobs = np.nonzero(has)[0]
        best = lp.fastest_throughput(idx)
        x = cp.Variable(idx.size, nonneg=True)
        # Throughput as a fraction of the job's best keeps every coefficient near 1 for the conic solver.
        frac = idx.per_job(idx.thr / best[idx.rows])[jobs] @ x
        rho = t[jobs] / denom[jobs] + cp.multiply(steps[jobs] / (denom[jobs] * best[jobs]), cp.inv_pos(frac))
        a, b = lp.base_constraints(idx)
        prob = cp.Problem(cp.Minimize(cp.max(rho)), [a @ x <= b, x <= 1])
        solver = "CLARABEL" if self.solver == "highs" else self.solver
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError as exc:
            log.warning("finish-time fairness: %s", exc)
            return self.empty(problem, "error")
        if x.value is None or prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            return self.empty(problem, str(prob.status))
        status = "optimal" if prob.status == cp.OPTIMAL else "optimal_inaccurate"
        return self.result(problem, idx.dense(lp.within(a, b, x.value)), float(prob.value), status)
