"""Minimise cost (Gavel ch. 6): the most work per dollar, optionally with SLOs (deadlines) met first.

The thesis maximises ``sum_m throughput(m, X) / cost(m, X)``. Work per dollar does not change when X is scaled
down, so on a fixed cluster that objective alone is maximised by running only the single most cost-efficient
job (or nothing). The usable reading, and what this class does: keep at least ``work_floor`` of the most work
the cluster can do (``N = sum_m throughput(m, X) / best_m``, "full-speed jobs", comparable across models) and
among those allocations take the cheapest, ``D = sum_c price(type_c) * gpus_c * sum_m X[m, c]`` dollars per
hour; at a fixed N that is the best N / D. Two LPs: max N, then min D subject to N >= work_floor * N_max.

With ``slo: true``, every job with a finite deadline must reach ``steps_remaining / deadline``; when the cluster
cannot meet them all, each is scaled down by the same factor (the largest feasible) and the status says so.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from slurmplan.domain import Allocation, AllocationProblem, ValidationError
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy
from slurmplan.policy.waterfill import feasible_floors


def slo_floors(problem: AllocationProblem) -> np.ndarray:
    """Throughput each job needs to finish by its deadline (0 without one)."""
    deadline = problem.column("deadline")
    steps = problem.column("steps_remaining")
    finite = np.isfinite(deadline) & (deadline > 0)
    return np.where(finite, steps / np.where(finite, deadline, 1.0), 0.0)


class MinCost(Policy):
    objective: ClassVar[str] = "min_cost"
    PARAMS: ClassVar = {
        "aware": Param(bool, True, "true (heterogeneity-aware) or false (agnostic)"),
        "slo": Param(bool, False, "true (meet deadlines first) or false"),
        "work_floor": Param(float, 0.9, "a number in (0, 1]", lambda v: 0 < v <= 1),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.cost_per_gpu_hour is None:
            raise ValidationError("cost_per_gpu_hour", None, "a price per GPU-hour for every GPU type", "problem")
        idx = lp.index_for(problem, self.params["aware"])
        if idx.size == 0:
            return self.empty(problem)
        prices = np.array([float(problem.cost_per_gpu_hour.get(t, np.inf)) for t in idx.types])
        if not np.isfinite(prices[idx.type_of]).all() or (prices[idx.type_of] <= 0).any():
            raise ValidationError("cost_per_gpu_hour", dict(problem.cost_per_gpu_hour), "a price > 0 per GPU type")
        work = idx.thr / np.maximum(lp.fastest_throughput(idx)[idx.rows], 1e-300)
        dollars = prices[idx.type_of] * idx.gpus
        floors, status = np.zeros(idx.num_jobs), "optimal"
        if self.params["slo"]:
            floors, phi = feasible_floors(idx, slo_floors(problem), self.solver)
            status = "optimal" if phi >= 1 - 1e-6 else f"slo-scaled:{phi:.3f}"
        n = idx.size
        a0, b0 = lp.base_constraints(idx)
        need = floors > 0
        a_floor, b_floor = -idx.per_job(idx.thr)[need], -floors[need]
        a = sp.vstack([a0, a_floor], format="csr")
        b = np.concatenate([b0, b_floor])
        bounds = (np.zeros(n), np.ones(n))
        most = lp.solve(-work, a, b, bounds, self.solver)
        if not most.ok:
            return self.empty(problem, most.status)
        target = self.params["work_floor"] * -most.objective * (1 - 1e-7)
        a2 = sp.vstack([a, sp.csr_matrix(-work[None, :])], format="csr")
        cheap = lp.solve(dollars, a2, np.concatenate([b, [-target]]), bounds, self.solver)
        if not cheap.ok:
            return self.empty(problem, cheap.status)
        ratio = float(work @ cheap.x) / max(float(dollars @ cheap.x), 1e-300)
        return self.result(problem, idx.dense(cheap.x), ratio, status)
