"""The ``slurmplan`` policy: one LP family over job x Cell that unites Gavel, Rubick and Crius.

- plan-aware throughputs: the columns are Cells and ``throughput`` is each Cell's best plan (perf/), so
  choosing a column chooses GPU type, GPU count and plan together (Crius's Cells, Rubick's plan search);
- Rubick's SLA: a guaranteed job's effective throughput is at least ``sla_throughput`` (what its own request
  with its own plan would give), imposed as hard floors; if capacity cannot honour them all, every floor is
  scaled by the same largest feasible factor and the status says so;
- weighted fairness across Slurm accounts by water filling (Gavel's hierarchical policy) over Gavel's
  normalised effective throughput, fairness or FIFO inside an account;
- a final pass that hands out leftover capacity and pays ``change_penalty`` (a fraction of the job's fair
  level) for each running job that stays in its current column, allowed to lower any level by at most
  ``level_slack`` (default 3%, the same margin as Rubick's 0.97 reconfiguration rule).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, JobClass
from slurmplan.policy.base import Param, Policy, non_negative, one_of, positive
from slurmplan.policy.hierarchical import entity_weights
from slurmplan.policy.las import normalised_score
from slurmplan.policy.waterfill import feasible_floors, max_min


def sla_floors(problem: AllocationProblem) -> np.ndarray:
    """Throughput floors of guaranteed jobs (0 for best-effort jobs or when no SLA is given)."""
    sla = problem.column("sla_throughput")
    if problem.job_class is None:
        return sla
    guaranteed = np.array([c is JobClass.GUARANTEED for c in problem.job_class])
    return np.where(guaranteed, sla, 0.0)


def stay_bonus(problem: AllocationProblem, idx, levels: np.ndarray, weights: np.ndarray, penalty: float):
    """Per-variable bonus: ``penalty * level_m / w_m`` on the variable of each running job's current column."""
    bonus = np.zeros(idx.size)
    if problem.current is None or penalty <= 0:
        return bonus
    cur = np.asarray(problem.current, dtype=int)
    on_current = cur[idx.rows] == idx.cols
    w = np.maximum(weights, 1e-12)
    per_job = penalty * np.where(levels > 0, levels, 1.0) / w
    bonus[on_current] = per_job[idx.rows[on_current]]
    return bonus


class Slurmplan(Policy):
    objective: ClassVar[str] = "slurmplan"
    PARAMS: ClassVar = {
        "inner": Param(str, "fairness", "'fairness' or 'fifo' inside an account", one_of("fairness", "fifo")),
        "max_iterations": Param(int, 8, "a positive integer (water-filling levels)", positive),
        "change_penalty": Param(float, 0.05, "a number >= 0 (fraction of the job's fair level)", non_negative),
        "level_slack": Param(float, 0.03, "a number in [0, 1)", lambda v: 0 <= v < 1),
        "sla": Param(bool, True, "true (enforce guaranteed jobs' SLA) or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx, score = normalised_score(problem, aware=True)
        inner = self.params["inner"]
        weights = entity_weights(problem, inner, np.zeros(problem.num_jobs, dtype=bool))
        floors, phi, status = np.zeros(problem.num_jobs), 1.0, "optimal"
        if self.params["sla"]:
            floors, phi = feasible_floors(idx, sla_floors(problem), self.solver)
            status = "optimal" if phi >= 1 - 1e-6 else f"sla-scaled:{phi:.3f}"
        first = max_min(
            idx,
            score,
            weights,
            self.solver,
            floor_thr=floors,
            water_filling=True,
            max_iterations=self.params["max_iterations"],
            reweight=lambda frozen: entity_weights(problem, inner, frozen),
            efficiency_pass=False,
        )
        if not first.ok:
            return self.empty(problem, "infeasible")
        bonus = stay_bonus(
            problem, idx, first.levels, np.where(weights > 0, weights, 1.0), self.params["change_penalty"]
        )
        final = _final_pass(idx, score, weights, first.levels, floors, bonus, self.params["level_slack"], self.solver)
        x = final if final is not None else first.x
        return self.result(problem, idx.dense(x), first.t, status)


def _final_pass(idx, score, weights, levels, floors, bonus, slack, solver) -> np.ndarray | None:
    """Efficiency plus stickiness at fixed levels (one LP through waterfill's machinery, zero iterations)."""
    res = max_min(
        idx,
        score,
        weights,
        solver,
        floor_thr=floors,
        max_iterations=0,
        efficiency_pass=True,
        bonus=bonus,
        level_slack=slack,
        start_levels=levels,
    )
    return res.x if res.ok else None
