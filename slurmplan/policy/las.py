"""Max-min fairness / least attained service (Gavel's LAS), weighted, heterogeneity-aware or agnostic."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy import lp
from slurmplan.policy.base import Param, Policy, positive
from slurmplan.policy.waterfill import max_min

if TYPE_CHECKING:
    from slurmplan.policy.las_warm import WarmStart


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


_UNIQUE_GAP = 1e-6
"""Relative margin by which a job's best score must beat its second best for the fast path: well above HiGHS's
optimality tolerance (1e-7), so the LP could not have stopped on the other column either."""


def uncontended(idx: lp.LpIndex, score: np.ndarray) -> np.ndarray | None:
    """Each job's best-scoring variable (one per job, in job order), when every job at 1 there is the LP's only
    optimum.

    When every job can have its best column at once (GPUs, and CPUs and memory where given, fit every type's
    capacity) and each job's best beats its second best by ``_UNIQUE_GAP``, the efficiency pass (maximise the
    total score, every job at least at its max-min level) has exactly one optimum: every job's score at its
    ceiling, which a unique best column reaches only with a full share there (and the max-min value is the
    smallest ceiling over weight), so no LP is needed. None when the capacity binds or a job has a tie: solve the LPs.
    On the simulator's 1,280-GPU trace a third to a half of the rounds are like this.
    """
    nj = idx.num_jobs
    if idx.size == 0:
        return None
    order = np.lexsort((-score, idx.rows))  # by job, best score first
    rows = idx.rows[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    best = order[first]
    if len(best) != nj:
        return None  # a job with no usable column: let the LP path handle it
    nxt = np.flatnonzero(first) + 1  # the position after each job's best: its second best, if it has one
    same = nxt < len(order)
    same[same] = ~first[nxt[same]]
    runner_up = np.full(nj, -np.inf)
    runner_up[same] = score[order[nxt[same]]]
    if (runner_up >= score[best] * (1 - _UNIQUE_GAP)).any():
        return None
    ntypes = len(idx.types)
    if (np.bincount(idx.type_of[best], weights=idx.gpus[best], minlength=ntypes) > idx.capacity).any():
        return None
    for need, cap in idx.host:
        if (np.bincount(idx.type_of[best], weights=need[best], minlength=ntypes) > cap).any():
            return None
    return best


def undominated(idx: lp.LpIndex, score: np.ndarray) -> np.ndarray:
    """Mask of the variables that no other variable of the same job strictly dominates: one on the same GPU type,
    with at most as many GPUs and a strictly higher score.

    Moving a dominated variable's share to its dominator keeps the job's share row, uses no more GPUs of that type
    and raises the job's score, so (a) the max-min value is the same without it and (b) every optimum of the
    efficiency pass (maximise the total score) leaves it at 0. Dropping these variables therefore leaves the
    efficiency pass's set of optima unchanged; only the path HiGHS takes, and so the vertex where that set has
    more than one, can differ. On ``bench_sim``'s trace they are 56 % of the variables (the larger Cells of a job
    that scale worse than its smaller ones on the same type), and the LPs solve about a fifth faster without them.
    With host limits (CPUs, memory) a dominator must also need no more of those; that case is not pruned (all
    True). Vectorised: within each (job, type) group in ascending GPUs, highest score first, a variable is
    dominated when the best score before it in the group is higher; scores are compared by their exact ranks
    so that the running maximum over all groups at once stays exact.
    """
    n = idx.size
    if n == 0 or idx.host:
        return np.ones(n, dtype=bool)
    group = idx.rows.astype(np.int64) * max(len(idx.types), 1) + idx.type_of
    _, rank = np.unique(score, return_inverse=True)
    _, size = np.unique(idx.gpus, return_inverse=True)
    # One integer key instead of lexsort's three: (group, GPUs ascending, score descending); equal keys are equal
    # in all three, and neither of two such variables dominates the other, so their order does not matter.
    top = int(rank.max()) + 1
    order = np.argsort((group * (int(size.max()) + 1) + size) * top + (top - 1 - rank))
    base = group[order] * (n + 1)  # every group's values above every earlier group's
    seen = np.maximum.accumulate(base + rank[order])
    before = np.empty(n, dtype=np.int64)
    before[0] = -1
    before[1:] = seen[:-1]
    keep = np.empty(n, dtype=bool)
    keep[order] = before - base <= rank[order]  # negative: nothing earlier in the group
    return keep


def without(idx: lp.LpIndex, keep: np.ndarray) -> lp.LpIndex:
    """The index over the variables in ``keep`` only (the jobs, columns and capacities unchanged)."""
    return replace(
        idx,
        rows=idx.rows[keep],
        cols=idx.cols[keep],
        thr=idx.thr[keep],
        gpus=idx.gpus[keep],
        type_of=idx.type_of[keep],
        host=tuple((need[keep], cap) for need, cap in idx.host),
    )


def lp_key(idx: lp.LpIndex, score: np.ndarray, weights: np.ndarray, settings: tuple) -> bytes:
    """Everything ``MaxMinFairness.solve``'s LPs are built from, as bytes: two rounds with equal keys solve the
    same LPs (the same variables in the same order, the same coefficients and capacities, the same solver
    settings), so the second may reuse the first's answer. The arrays' dtypes and lengths are part of it, so
    two arrays whose bytes happen to run together differently cannot give the same key."""
    parts = [repr((idx.num_jobs, idx.num_cells, idx.types, settings)).encode()]
    arrays = [idx.rows, idx.cols, idx.thr, idx.gpus, idx.type_of, idx.capacity, score, weights]
    for need, cap in idx.host:
        arrays += [need, cap]
    for a in arrays:
        a = np.ascontiguousarray(a)
        parts.append(f"{a.dtype.str}{a.shape}".encode())
        parts.append(a.tobytes())
    return b"|".join(parts)


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

    _last_lp: tuple[bytes, np.ndarray, float] | None = None
    """The last LP ``solve`` solved (``lp_key``), its variables' values and its max-min value: a round whose LP
    is byte for byte the same (5 % of ``bench_sim``'s LPs: no job came, left or changed since) reuses the answer,
    which HiGHS, deterministic on the same input, would give again."""

    _warm: WarmStart | None = None
    """Where the next LP starts: the last one's final bases (``las_warm``; only where ``prune`` holds)."""

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        idx, score = normalised_score(problem, self.params["aware"])
        fast = self.uncontended(problem, idx, score)
        return fast if fast is not None else self.solve(problem, idx, score)

    def uncontended(self, problem: AllocationProblem, idx: lp.LpIndex, score: np.ndarray) -> Allocation | None:
        """The allocation without an LP when every job can have its best column at once (see ``uncontended``).

        Only with the efficiency pass (without it the LP's X is whichever max-min optimum the solver stops on)
        and positive weights (a zero-weight job's level is not raised, so the argument above does not apply).
        """
        weights = problem.column("weights")
        if not self.params["efficiency_pass"] or not (weights > 0).all():
            return None
        best = uncontended(idx, score)
        if best is None:
            return None
        x = np.zeros(idx.size)
        x[best] = 1.0
        return self.result(problem, idx.dense(x), float((score[best] / weights).min()))  # each job at its ceiling

    def solve(self, problem: AllocationProblem, idx: lp.LpIndex, score: np.ndarray) -> Allocation:
        """The max-min LP (and, as configured, water filling and the efficiency pass) through the solver.

        With the efficiency pass and without water filling (which reads the duals, so its levels depend on the
        vertex), the LP leaves out the dominated variables (``undominated``), except under
        ``highs.reference_solves`` (every solve as before issue 27's item 5).
        """
        full = idx
        prune = self.prune()
        key = lp_key(idx, score, problem.column("weights"), (self.solver, prune, tuple(self.params.items())))
        last = self._last_lp
        if last is not None and last[0] == key:
            return self.result(problem, full.dense(last[1]), last[2])  # the same LP as last round: its answer
        keep = None
        if prune:
            keep = undominated(idx, score)
            if keep.all():
                keep = None
            else:
                idx, score = without(idx, keep), score[keep]
        start = None
        if prune:
            if self._warm is None:
                from slurmplan.policy.las_warm import WarmStart  # highspy: only where an LP is solved

                self._warm = WarmStart()
            start = self._warm.bind(problem, idx)
        res = max_min(
            idx,
            score,
            problem.column("weights"),
            self.solver,
            water_filling=self.params["water_filling"],
            max_iterations=self.params["max_iterations"],
            efficiency_pass=self.params["efficiency_pass"],
            start=start,
        )
        if not res.ok:
            self._last_lp = None
            if self._warm is not None:
                self._warm.forget()
            return self.empty(problem, "infeasible")
        x = res.x
        if keep is not None:
            x = np.zeros(full.size)
            x[keep] = res.x
        self._last_lp = (key, x, res.t)
        return self.result(problem, full.dense(x), res.t)

    def prune(self) -> bool:
        """Whether ``solve`` leaves out the dominated variables (see its docstring)."""
        from slurmplan.policy import highs  # highspy: only where an LP is solved

        return (
            self.solver == "highs"
            and self.params["efficiency_pass"]
            and not self.params["water_filling"]
            and highs.fast_solves()
        )
