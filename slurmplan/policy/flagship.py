"""The ``slurmplan`` policy: one LP family over job x Cell that unites Gavel, Rubick and Crius.

- plan-aware throughputs: the columns are Cells and ``throughput`` is each Cell's best plan (perf/), so
  choosing a column chooses GPU type, GPU count and plan together (Crius's Cells, Rubick's plan search);
- Rubick's SLA: a guaranteed job's effective throughput is at least ``sla_throughput`` (what its own request
  with its own plan would give), imposed as hard floors; if capacity cannot honour them all, every floor is
  scaled by the same largest feasible factor and the status says so;
- weighted fairness across Slurm accounts by water filling (Gavel's hierarchical policy) over Gavel's
  normalised effective throughput, fairness or FIFO inside an account;
- a final pass that hands out leftover capacity and pays ``change_penalty`` (in units of a one-GPU equal
  share) for each running job that stays in its current column. By default it may not lower any job's fair
  level (``level_slack: 0``), so the policy never does worse than LAS on max-min; a site may allow a few
  percent (e.g. 0.03, Rubick's 0.97 margin) to trade fairness for fewer reconfigurations.
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
    if problem.job_class is None:  # no class given: nobody is guaranteed
        return np.zeros(problem.num_jobs)
    guaranteed = np.array([c is JobClass.GUARANTEED for c in problem.job_class])
    return np.where(guaranteed, sla, 0.0)


def stay_bonus(problem: AllocationProblem, idx, levels: np.ndarray, penalty: float) -> np.ndarray:
    """Per-variable bonus: ``penalty * level_m`` on the variable of each running job's current column."""
    bonus = np.zeros(idx.size)
    if problem.current is None or penalty <= 0:
        return bonus
    cur = np.asarray(problem.current, dtype=int)
    on_current = cur[idx.rows] == idx.cols
    per_job = penalty * np.where(levels > 0, levels, 1.0)
    bonus[on_current] = per_job[idx.rows[on_current]]
    return bonus


class Slurmplan(Policy):
    objective: ClassVar[str] = "slurmplan"
    PARAMS: ClassVar = {
        "inner": Param(str, "fairness", "'fairness' or 'fifo' inside an account", one_of("fairness", "fifo")),
        "max_iterations": Param(int, 8, "a positive integer (water-filling levels)", positive),
        "min_gain": Param(
            float, 0.05, "a number in [0, 1): stop water filling below this relative gain", lambda v: 0 <= v < 1
        ),
        "change_penalty": Param(float, 0.05, "a number >= 0 (fraction of the job's fair level)", non_negative),
        "level_slack": Param(float, 0.0, "a number in [0, 1)", lambda v: 0 <= v < 1),
        "sla": Param(bool, True, "true (enforce guaranteed jobs' SLA) or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx, score = normalised_score(problem, aware=True)
        inner = self.params["inner"]
        weights = entity_weights(problem, inner, np.zeros(problem.num_jobs, dtype=bool))
        # The stickiness bonus is in units of a one-GPU equal share (score 1), see stay_bonus.
        bonus = stay_bonus(problem, idx, np.ones(problem.num_jobs), self.params["change_penalty"])
        floors = sla_floors(problem) if self.params["sla"] else np.zeros(problem.num_jobs)
        res = self._solve(problem, idx, score, weights, floors, bonus)
        status = "optimal"
        if not res.ok and floors.any():
            # Only now pay for the LP that finds how much of the SLAs capacity can honour.
            floors, phi = feasible_floors(idx, floors, self.solver)
            status = "optimal" if phi >= 1 - 1e-6 else f"sla-scaled:{phi:.3f}"
            res = self._solve(problem, idx, score, weights, floors, bonus)
        if not res.ok:
            return self.empty(problem, "infeasible")
        return self.result(problem, idx.dense(res.x), res.t, status)

    def _solve(self, problem, idx, score, weights, floors, bonus):
        inner = self.params["inner"]
        return max_min(
            idx,
            score,
            weights,
            self.solver,
            floor_thr=floors,
            water_filling=True,
            max_iterations=self.params["max_iterations"],
            reweight=lambda frozen: entity_weights(problem, inner, frozen),
            efficiency_pass=True,
            bonus=bonus,
            level_slack=self.params["level_slack"],
            min_gain=self.params["min_gain"],
        )
