"""Hierarchical fairness with water filling (Gavel A3 (10)): Slurm accounts share by weight, jobs inside each.

Entity s (an account) has weight w_s; its jobs split it by the entity's own policy: ``fairness`` in
proportion to the jobs' weights, ``fifo`` all of it to the oldest job not yet bottlenecked. Each water-filling
level raises every job's normalised throughput by ``w_m * t``; jobs that cannot rise further are frozen and
their weight moves to the rest of their entity (``reweight``), until every job is frozen. Gavel finds the
frozen jobs with a MILP; here the duals do it (see waterfill.py).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy.base import Param, Policy, one_of, positive
from slurmplan.policy.las import normalised_score
from slurmplan.policy.waterfill import max_min


def entity_weights(problem: AllocationProblem, inner: str, frozen: np.ndarray) -> np.ndarray:
    """Per-job weights: each account's weight split over its unfrozen jobs by the inner policy."""
    accounts = problem.accounts or ("",) * problem.num_jobs
    acct_w = problem.account_weights or {}
    job_w = problem.column("weights")
    submit = problem.column("submit_time")
    out = np.zeros(problem.num_jobs)
    for acct in set(accounts):
        members = np.array([i for i, a in enumerate(accounts) if a == acct and not frozen[i]], dtype=int)
        if len(members) == 0:
            continue
        w_s = float(acct_w.get(acct, 1.0))
        if inner == "fifo":
            first = members[np.argsort(submit[members], kind="stable")[0]]
            out[first] = w_s
        else:
            share = job_w[members] / max(job_w[members].sum(), 1e-300)
            out[members] = w_s * share
    # Max-min is invariant to scaling all weights; a mean of 1 keeps t and the levels O(1) whatever the job
    # count (raw account shares are ~1/jobs), which keeps the LP's coefficients in a comfortable range.
    positive = out > 0
    return out / out[positive].mean() if positive.any() else out


class Hierarchical(Policy):
    objective: ClassVar[str] = "hierarchical"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "inner": Param(str, "fairness", "'fairness' or 'fifo'", one_of("fairness", "fifo")),
        "max_iterations": Param(int, 100, "a positive integer", positive),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx, score = normalised_score(problem, self.params["aware"])
        inner = self.params["inner"]
        res = max_min(
            idx,
            score,
            entity_weights(problem, inner, np.zeros(problem.num_jobs, dtype=bool)),
            self.solver,
            water_filling=True,
            max_iterations=self.params["max_iterations"],
            reweight=lambda frozen: entity_weights(problem, inner, frozen),
            efficiency_pass=True,
        )
        if not res.ok:
            return self.empty(problem, "infeasible")
        return self.result(problem, idx.dense(res.x), res.t)
