"""Weighted max-min fairness as LPs, single level or with water filling (progressive filling).

The core of LAS, makespan, the hierarchical policy and the flagship: maximise ``t`` such that every active job's
score (a linear function of its shares, e.g. normalised effective throughput) reaches ``base_m + w_m * t``.

Water filling repeats that LP: jobs that cannot rise any further are frozen at their level and the rest keep
rising. Gavel finds the frozen ("bottlenecked") jobs with a MILP per iteration; here a job is frozen when its
``t`` row has a non-zero dual, which by complementary slackness proves that row is tight in *every* optimal
solution, i.e. the job cannot exceed this level. Each iteration freezes at least one job (the duals of the
``t`` rows sum to 1), so it terminates, with one LP per level instead of an LP plus a MILP.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from slurmplan.policy import lp

log = logging.getLogger(__name__)

_DUAL_TOL = {"highs": 1e-9}
"""A dual above this proves a bottleneck. Simplex duals of slack rows are exact zeros; interior-point solvers
(the cvxpy path) leave ~1e-8 on them, so they get 1e-6 (default)."""
_LEVEL_SLACK = 1e-7
"""Relative slack on frozen levels so round-off in one LP never makes the next one infeasible."""


@dataclass(frozen=True, eq=False)
class MaxMinResult:
    ok: bool
    x: np.ndarray
    """Variable vector over ``idx`` (length ``idx.size``)."""
    levels: np.ndarray
    """Score each job is guaranteed at the end (0 for jobs outside the min)."""
    t: float
    """Optimum of the first (single-level) LP: the max-min value."""
    iterations: int
    message: str = ""


def feasible_floors(idx: lp.LpIndex, floor: np.ndarray, solver: str) -> tuple[np.ndarray, float]:
    """Scale throughput floors (SLAs, SLOs) down to what capacity allows: ``phi * floor`` with the largest phi <= 1.

    Returns the floors to impose and phi; phi < 1 means some floors cannot all be met (reported by callers).
    """
    need = floor > 0
    if not need.any():
        return floor, 1.0
    a0, b0 = lp.base_constraints(idx, extra_vars=1)
    thr_rows = idx.per_job(idx.thr)[need]
    rows = sp.hstack([-thr_rows, sp.csr_matrix(floor[need][:, None])], format="csr")
    a = sp.vstack([a0, rows], format="csr")
    b = np.concatenate([b0, np.zeros(rows.shape[0])])
    c = np.zeros(idx.size + 1)
    c[-1] = -1.0
    lo = np.zeros(idx.size + 1)
    hi = np.concatenate([np.ones(idx.size), [1.0]])
    res = lp.solve(c, a, b, (lo, hi), solver)
    phi = float(res.x[-1]) if res.ok else 0.0
    if phi < 1.0 - 1e-6:
        log.warning("throughput floors cannot all be met: scaled to %.3f of what was asked", phi)
    # Back off a hair below the solver's phi so the later LPs, with more rows, stay feasible.
    return floor * (1.0 if phi >= 1 - 1e-9 else max(phi - 1e-6, 0.0)), phi


class _RebuildModel:
    """HighsModel's interface over ``lp.solve`` (rebuilds each run): for the cvxpy solvers and cross-checks."""

    def __init__(self, c, a_ub, b_ub, lo, hi, solver: str) -> None:
        self.c, self.a, self.b = np.array(c, dtype=float), sp.lil_matrix(a_ub), np.array(b_ub, dtype=float)
        self.lo, self.hi, self.solver = np.array(lo, dtype=float), np.array(hi, dtype=float), solver

    def set_cost(self, c) -> None:
        self.c = np.array(c, dtype=float)

    def set_col_bounds(self, col: int, lo: float, hi: float) -> None:
        self.lo[col], self.hi[col] = lo, hi

    def set_row_upper(self, rows, upper) -> None:
        self.b[rows] = upper

    def set_coeffs(self, rows, col: int, values) -> None:
        for r, v in zip(rows.tolist(), np.asarray(values).tolist(), strict=True):
            self.a[r, col] = v

    def add_rows(self, a_rows, upper) -> None:
        self.a = sp.lil_matrix(sp.vstack([sp.csr_matrix(self.a), sp.csr_matrix(a_rows)]))
        self.b = np.concatenate([self.b, upper])

    def run(self) -> lp.LpResult:
        return lp.solve(self.c, sp.csr_matrix(self.a), self.b, (self.lo, self.hi), self.solver)


class _FloorRows:
    """Throughput floors (SLAs) added lazily: most of the time the max-min optimum already meets them.

    The first level is solved without them; only if its solution violates a floor are the rows added and the
    LP re-solved (warm). They are added before any later solve, which must keep them. Floor rows on a few
    hundred jobs nearly double the cold interior-point solve at 2,048 jobs; added to a warm model they cost
    a few simplex iterations.
    """

    def __init__(self, idx: lp.LpIndex, floor_thr: np.ndarray | None) -> None:
        need = np.zeros(idx.num_jobs, dtype=bool) if floor_thr is None else floor_thr > 0
        self.added = not need.any()
        # Without floors (LAS, every round) the (jobs x variables) matrix is not built just to be emptied.
        self.thr_rows = idx.per_job(idx.thr)[need] if not self.added else sp.csr_matrix((0, idx.size))
        self.floor = floor_thr[need] if floor_thr is not None else np.zeros(0)

    def add(self, model) -> None:
        if not self.added:
            rows = sp.hstack([-self.thr_rows, sp.csr_matrix((self.thr_rows.shape[0], 1))], format="csr")
            model.add_rows(rows, -self.floor)
            self.added = True

    def run(self, model) -> lp.LpResult:
        if self.added:
            return model.run()
        res = model.run()
        self.add(model)
        if res.ok and (self.thr_rows @ res.x[: self.thr_rows.shape[1]] >= self.floor * (1 - 1e-9)).all():
            return res
        return model.run()


def _model(c, a, b, lo, hi, solver: str, water_filling: bool = False):
    """The LP in HiGHS (warm re-solves), else rebuilt per solve. Water filling reads the duals to freeze jobs;
    a different optimal vertex can give different duals, hence different levels, so it keeps HiGHS's default
    options (``highs.REFERENCE``); otherwise only the vertex among equal optima may change (``highs.FAST``)."""
    if solver == "highs":
        from slurmplan.policy.highs import REFERENCE, HighsModel

        return HighsModel(c, a, b, lo, hi, REFERENCE if water_filling else None)
    return _RebuildModel(c, a, b, lo, hi, solver)


def max_min_rows(idx: lp.LpIndex, score: np.ndarray, w: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray, int]:
    """The max-min LP's rows over the variables and ``t`` (last column): ``lp.base_constraints``, then one row
    per job, ``w_m t - score_m(X) <= 0``; with the right-hand sides and the first job row's index.

    Without host limits (CPUs, memory) every variable's column holds exactly three entries, in row order: its
    job's share row (1), its GPU type's capacity row (its GPUs) and its job's score row (-score), and ``t``'s
    column holds each non-zero weight. So the CSC arrays HiGHS reads are written directly, the very arrays
    stacking the sparse blocks (the general path, kept for host limits) gives, in a tenth of the time: this
    runs every contested LAS round. ``tests/policy/test_max_min_rows.py`` checks that both are identical.
    """
    nj, ntypes = idx.num_jobs, len(idx.types)
    first_job_row = nj + ntypes + sum(int(np.isfinite(cap).sum()) for _, cap in idx.host)
    b = np.concatenate([np.ones(nj), idx.capacity, *(cap[np.isfinite(cap)] for _, cap in idx.host), np.zeros(nj)])
    if idx.host:
        a0, _ = lp.base_constraints(idx, extra_vars=1)
        s_mat = idx.per_job(score)
        rows = sp.hstack([-s_mat, sp.csr_matrix(w[:, None])], format="csr")
        return sp.csc_matrix(sp.vstack([a0, rows], format="csr")), b, first_job_row
    n = idx.size
    weighted = np.flatnonzero(w)
    index = np.empty(3 * n + len(weighted), dtype=np.int32)
    value = np.empty(3 * n + len(weighted))
    index[0 : 3 * n : 3] = idx.rows
    index[1 : 3 * n : 3] = nj + idx.type_of
    index[2 : 3 * n : 3] = first_job_row + idx.rows
    value[0 : 3 * n : 3] = 1.0
    value[1 : 3 * n : 3] = idx.gpus
    value[2 : 3 * n : 3] = -np.asarray(score, dtype=float)
    index[3 * n :] = first_job_row + weighted
    value[3 * n :] = w[weighted]
    start = np.empty(n + 2, dtype=np.int32)
    start[: n + 1] = np.arange(0, 3 * n + 1, 3)
    start[n + 1] = len(index)
    shape = (first_job_row + nj, n + 1)
    return sp.csc_matrix((value, index, start), shape=shape), b, first_job_row


class WarmStart(Protocol):
    """Where ``max_min``'s solves start (``before``) and what they ended on (``after``): phase 0 is the first
    max-min solve, phase 1 the efficiency pass. ``las_warm.WarmStart`` carries them from one round's LP to the next."""

    def before(self, model, phase: int) -> None: ...

    def after(self, model, phase: int, x: np.ndarray) -> None: ...


def max_min(
    idx: lp.LpIndex,
    score: np.ndarray,
    weights: np.ndarray,
    solver: str = "highs",
    *,
    floor_thr: np.ndarray | None = None,
    water_filling: bool = False,
    max_iterations: int = 50,
    reweight: Callable[[np.ndarray], np.ndarray] | None = None,
    efficiency_pass: bool = True,
    bonus: np.ndarray | None = None,
    level_slack: float = 0.0,
    min_gain: float = 0.0,
    start: WarmStart | None = None,
) -> MaxMinResult:
    """Maximise ``min_m score_m(X) / w_m`` over jobs with ``w_m > 0`` (and, with water filling, the next minima).

    ``score`` holds one coefficient per variable (job m's score is ``sum score[v] x[v]`` over its variables);
    ``floor_thr`` are per-job lower bounds on effective throughput, added lazily (see _FloorRows); if they
    cannot all be met the result is not ok and the caller may scale them with feasible_floors;
    ``reweight(frozen)`` gives new weights once some jobs froze (the hierarchical policy's redistribution);
    ``efficiency_pass`` ends with one LP that maximises the total score keeping every level, so no
    capacity is left idle that a job could use (the max-min LP alone is indifferent to it). ``bonus`` (one
    value per variable) is added to that pass's objective and ``level_slack`` lets it lower every level by
    that fraction: the flagship uses both to keep running jobs where they are when it costs little fairness.
    ``min_gain`` stops water filling once a level raises the active jobs by less than that fraction of the
    highest level reached (each such level typically freezes a single job whose SLA floor already lifts it
    above the water); the efficiency pass still hands out whatever capacity is left. ``start`` (HiGHS only)
    starts the first solve and the efficiency pass from statuses it gives, and is shown their final ones
    (with the solution).

    One LP model is built once and edited between levels (t's coefficients, the level bounds, then the
    objective), so with HiGHS every solve after the first is a warm-started simplex.
    """
    n, nj = idx.size, idx.num_jobs
    has_var = np.bincount(idx.rows, minlength=nj) > 0
    w = np.where(has_var, np.asarray(weights, dtype=float), 0.0)
    a, b, first_job_row = max_min_rows(idx, score, w)
    floors = _FloorRows(idx, floor_thr)
    job_rows = np.arange(first_job_row, first_job_row + nj)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    lo, hi = np.zeros(n + 1), np.concatenate([np.ones(n), [np.inf]])
    model = _model(c, a, b, lo, hi, solver, water_filling)

    ceiling = np.zeros(nj)
    if water_filling:  # read only when freezing jobs between levels
        np.maximum.at(ceiling, idx.rows, score)
    levels = np.zeros(nj)
    frozen = ~has_var  # bottlenecked jobs (or jobs that can use nothing); weight 0 is inactive, not frozen
    x = np.zeros(n)
    first_t, it = float("nan"), 0
    while it < max_iterations:
        active = ~frozen & (w > 0)
        if not active.any():
            break
        if it > 0:
            model.set_coeffs(job_rows, n, np.where(active, w, 0.0))
            model.set_row_upper(job_rows, -np.where(active, levels, levels * (1 - _LEVEL_SLACK)))
        it += 1
        if start is not None and it == 1:
            start.before(model, 0)
        res = floors.run(model)
        if start is not None and it == 1 and res.ok:
            start.after(model, 0, res.x)
        if not res.ok:
            if it == 1:
                return MaxMinResult(False, x, levels, float("nan"), it, res.message)
            break
        x, t = res.x[:n], max(float(res.x[n]), 0.0)
        if it == 1:
            first_t = t
        gain = float((w[active] * t).max())
        levels = np.where(active, levels + w * t, levels)
        if not water_filling or (it > 1 and gain < min_gain * max(levels.max(), 1e-300)):
            break
        duals = res.duals_ub[job_rows] if res.duals_ub is not None else np.zeros(nj)
        # A positive dual proves a job cannot rise; so does having reached its own ceiling (a full row in its
        # best-scoring column), which degenerate simplex duals often fail to show.
        tol = _DUAL_TOL.get(solver, 1e-6)
        tight = active & ((np.abs(duals) > tol) | (levels >= ceiling * (1 - 1e-9)))
        if not tight.any():
            log.debug("water filling: no dual identified a bottleneck; stopping after %d levels", it)
            break
        frozen |= tight
        if reweight is not None:
            w = np.where(has_var & ~frozen, reweight(frozen), 0.0)
    if efficiency_pass:
        floors.add(model)
        # Unweighted total score: weights already shaped the levels; favouring low-weight jobs here would undo it.
        # Each variable's total score over the jobs: its own score (a variable belongs to one job).
        gain_coef = np.asarray(score, dtype=float) + (0.0 if bonus is None else bonus)
        model.set_coeffs(job_rows, n, np.zeros(nj))
        model.set_row_upper(job_rows, -levels * (1 - level_slack) * (1 - _LEVEL_SLACK))
        model.set_col_bounds(n, 0.0, 0.0)
        model.set_cost(np.concatenate([-gain_coef, [0.0]]))
        if start is not None:
            start.before(model, 1)
        res = model.run()
        if start is not None and res.ok:
            start.after(model, 1, res.x)
        if res.ok:
            x = res.x[:n]
        elif it == 0:
            return MaxMinResult(False, x, levels, first_t, it, "efficiency pass failed")
    return MaxMinResult(True, x, levels, first_t, it)
