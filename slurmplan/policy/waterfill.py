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

import numpy as np
import scipy.sparse as sp

from slurmplan.policy import lp

log = logging.getLogger(__name__)

_DUAL_TOL = 1e-9
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
    return floor * max(phi - 1e-6, 0.0), phi


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
    start_levels: np.ndarray | None = None,
) -> MaxMinResult:
    """Maximise ``min_m score_m(X) / w_m`` over jobs with ``w_m > 0`` (and, with water filling, the next minima).

    ``score`` holds one coefficient per variable (job m's score is ``sum score[v] x[v]`` over its variables);
    ``floor_thr`` are per-job lower bounds on effective throughput (already feasible, see feasible_floors);
    ``reweight(frozen)`` gives new weights once some jobs froze (the hierarchical policy's redistribution);
    ``efficiency_pass`` ends with one LP that maximises the weighted sum of scores keeping every level, so no
    capacity is left idle that a job could use (the max-min LP alone is indifferent to it). ``bonus`` (one
    value per variable) is added to that pass's objective and ``level_slack`` lets it lower every level by
    that fraction: the flagship uses both to keep running jobs where they are when it costs little fairness.
    """
    n, nj = idx.size, idx.num_jobs
    s_mat = idx.per_job(score)
    has_var = np.bincount(idx.rows, minlength=nj) > 0
    w = np.where(has_var, np.asarray(weights, dtype=float), 0.0)
    a0, b0 = lp.base_constraints(idx, extra_vars=1)
    fixed_rows, fixed_b = [a0], [b0]
    if floor_thr is not None and (floor_thr > 0).any():
        need = floor_thr > 0
        fixed_rows.append(sp.hstack([-idx.per_job(idx.thr)[need], sp.csr_matrix((need.sum(), 1))], format="csr"))
        fixed_b.append(-floor_thr[need])
    levels = np.zeros(nj) if start_levels is None else np.asarray(start_levels, dtype=float).copy()
    frozen = ~has_var
    """Bottlenecked jobs (or jobs that can use nothing); a job with weight 0 is inactive but not frozen."""
    x = np.zeros(n)
    first_t, it = float("nan"), 0
    while it < max_iterations:
        active = ~frozen & (w > 0)
        if not active.any():
            break
        it += 1
        res = _level_lp(s_mat, w, levels, active, fixed_rows, fixed_b, n, solver)
        if not res.ok:
            if it == 1:
                return MaxMinResult(False, x, levels, float("nan"), it, res.message)
            break
        x, t = res.x[:n], float(res.x[n])
        if it == 1:
            first_t = t
        levels = np.where(active, levels + w * t, levels)
        if not water_filling:
            break
        duals = res.duals_ub[-int(active.sum()) - nj : -nj] if res.duals_ub is not None else None
        tight = np.zeros(nj, dtype=bool)
        if duals is not None:
            tight[np.nonzero(active)[0]] = np.abs(duals) > _DUAL_TOL
        if not tight.any():
            log.debug("water filling: no dual identified a bottleneck; stopping after %d levels", it)
            break
        frozen |= tight
        if reweight is not None:
            w = np.where(has_var & ~frozen, reweight(frozen), 0.0)
    if efficiency_pass:
        inv_w = w_sum_weights(weights, has_var)
        better = _efficiency(s_mat, inv_w, levels * (1 - level_slack), fixed_rows, fixed_b, n, solver, bonus)
        if better is not None:
            x = better
        elif it == 0:
            return MaxMinResult(False, x, levels, first_t, it, "efficiency pass failed")
    return MaxMinResult(True, x, levels, first_t, it)


def w_sum_weights(weights: np.ndarray, has_var: np.ndarray) -> np.ndarray:
    """Weights for the efficiency pass: each job's score counted once, scaled by 1/w like the max-min."""
    w = np.asarray(weights, dtype=float)
    return np.where(has_var & (w > 0), 1.0 / np.maximum(w, 1e-12), 1.0)


def _level_lp(s_mat, w, levels, active, fixed_rows, fixed_b, n, solver) -> lp.LpResult:
    """max t s.t. score_m >= level_m + w_m t (active m), score_m >= level_m (all m), fixed rows."""
    act = np.nonzero(active)[0]
    t_rows = sp.hstack([-s_mat[act], sp.csr_matrix(w[act][:, None])], format="csr")
    keep = sp.hstack([-s_mat, sp.csr_matrix((s_mat.shape[0], 1))], format="csr")
    a = sp.vstack([*fixed_rows, t_rows, keep], format="csr")
    b = np.concatenate([*fixed_b, -levels[act], -levels * (1 - _LEVEL_SLACK)])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    lo = np.zeros(n + 1)
    hi = np.concatenate([np.ones(n), [np.inf]])
    return lp.solve(c, a, b, (lo, hi), solver)


def _efficiency(s_mat, inv_w, levels, fixed_rows, fixed_b, n, solver, bonus=None) -> np.ndarray | None:
    """max sum_m score_m / w_m (+ bonus) keeping every job at or above its level (None if the LP fails)."""
    keep = sp.hstack([-s_mat, sp.csr_matrix((s_mat.shape[0], 1))], format="csr")
    a = sp.vstack([*fixed_rows, keep], format="csr")
    b = np.concatenate([*fixed_b, -levels * (1 - _LEVEL_SLACK)])
    gain = s_mat.T @ inv_w if bonus is None else s_mat.T @ inv_w + bonus
    c = np.concatenate([-gain, [0.0]])
    lo = np.zeros(n + 1)
    hi = np.concatenate([np.ones(n), [0.0]])
    res = lp.solve(c, a, b, (lo, hi), solver)
    return res.x[:n] if res.ok else None
