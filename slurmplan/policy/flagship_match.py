"""The flagship's matching step: the chosen jobs, same sizes, re-placed where they are relatively fastest.

Gavel's heterogeneity lever (issue 17): a transportation LP over the chosen jobs maximises the sum of their speeds
relative to their fastest type, weighted so that short jobs (``short_bias_s``), long-stretched ones
(``stretch_weight``) and jobs at their stretch guard (first of all) get the fast GPUs; ``stay_bonus`` values a
running job's current column more. When the LP's shares do not round to whole columns (gang jobs), the jobs are
matched greedily by the same values instead.
"""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.mechanism.pricing import PRIOR_FLOOR_S
from slurmplan.policy import linprog_direct
from slurmplan.policy.greedy import Packing


def transport(rows: np.ndarray, cols: np.ndarray, value: np.ndarray, pack: Packing, chosen: np.ndarray):
    """max sum value*y  s.t. each chosen job's shares sum to 1, each type's GPUs within its free capacity."""
    job_pos = {j: i for i, j in enumerate(chosen.tolist())}
    pos = np.array([job_pos[j] for j in rows.tolist()], dtype=np.int64)
    types = pack.cell_type[cols]
    cap = pack.free.copy()
    held = pack.col[chosen]
    np.add.at(cap, pack.cell_type[held], pack.cell_gpus[held])  # each job's GPUs back, in the loop's order
    solve = _transport_direct if linprog_direct.available() else _transport_linprog
    return solve(types, pos, pack.cell_gpus[cols], -value, cap, chosen.size)


def _transport_linprog(
    types: np.ndarray, pos: np.ndarray, gpus: np.ndarray, c: np.ndarray, cap: np.ndarray, jobs: int
) -> np.ndarray | None:
    """``transport``'s LP through ``scipy.optimize.linprog`` (as before issue 27's direct path; its reference)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    nv = c.size
    a_eq = coo_matrix((np.ones(nv), (pos, np.arange(nv))), shape=(jobs, nv))
    a_ub = coo_matrix((gpus, (types, np.arange(nv))), shape=(cap.size, nv))
    res = linprog(c, A_ub=a_ub.tocsr(), b_ub=cap + 1e-9, A_eq=a_eq.tocsr(), b_eq=np.ones(jobs),
                  bounds=(0.0, 1.0), method="highs")  # fmt: skip
    return res.x if res.status == 0 else None


def _transport_direct(
    types: np.ndarray, pos: np.ndarray, gpus: np.ndarray, c: np.ndarray, cap: np.ndarray, jobs: int
) -> np.ndarray | None:
    """``transport``'s LP as linprog hands it to HiGHS (``linprog_direct``: linprog's answer, bit for bit, without
    its Python). Every variable has one entry in its type's ``<=`` row (its GPUs) and one in its job's ``==`` row
    (1), so each CSC column is those two, the type's row first, as ``csc_array`` of the stacked blocks has them."""
    nv = c.size
    indices = np.empty(2 * nv, dtype=np.int32)
    indices[0::2], indices[1::2] = types, cap.size + pos
    data = np.empty(2 * nv)
    data[0::2], data[1::2] = gpus, 1.0
    indptr = np.arange(0, 2 * nv + 1, 2, dtype=np.int32)
    return linprog_direct.solve_stacked(c, indptr, indices, data, cap + 1e-9, np.ones(jobs))


def match_types(
    problem: AllocationProblem,
    pack: Packing,
    floors: np.ndarray,
    est: np.ndarray,
    guard: np.ndarray,
    blocked: np.ndarray,
    params: dict,
    allowed: np.ndarray | None = None,
) -> None:
    """Re-place the chosen jobs, same sizes, so that the sum of their speeds relative to their fastest
    type is largest (Gavel's heterogeneity lever: a Recommendation job is 2.3x faster on a P100 than on a
    V100, a ResNet-50 1.6x slower, so the P100 goes to the first). A transportation LP over the chosen jobs
    (integral for one-GPU jobs); a fractional answer is rounded greedily and kept only if it fits."""
    chosen = np.flatnonzero(pack.col >= 0)
    if chosen.size < 2:
        return
    rows_a, cols_a, vals = _match_values(problem, pack, chosen, floors, est, guard, blocked, params, allowed)
    if cols_a.size == 0 or (cols_a == cols_a[0]).all():  # fewer than two columns: nothing to match
        return
    if _stays(pack, chosen, rows_a, cols_a):
        return
    x = transport(rows_a, cols_a, vals, pack, chosen)
    if x is None:
        return
    trial = _released(pack, chosen)
    # biggest shares first; a job whose share does not fit keeps trying its other columns, then its old one
    order = np.argsort(-x, kind="stable")
    placed = [False] * problem.num_jobs
    share, jobs, columns = x.tolist(), rows_a.tolist(), cols_a.tolist()  # read as Python values once
    for k in order.tolist():
        j, c = jobs[k], columns[k]
        if not placed[j] and share[k] > 1e-6 and trial.fits(j, c):
            trial.assign(j, c)
            placed[j] = True
    for j in chosen.tolist():
        if not placed[j]:
            if not trial.fits(j, int(pack.col[j])):
                trial = greedy_match(pack, chosen, rows_a, cols_a, vals)
                if trial is None:
                    return  # no room either way: keep the selection's placement
                break
            trial.assign(j, int(pack.col[j]))
    pack.col[:], pack.free[:] = trial.col, trial.free
    for (_, free), (_, tfree) in zip(pack.host, trial.host, strict=True):
        free[:] = tfree


def _released(pack: Packing, chosen: np.ndarray) -> Packing:
    """A copy of ``pack`` with the chosen (placed) jobs released: ``Packing.release`` job by job, as arrays. The GPUs
    (and CPUs and memory) each job gives back are added to its type's free ones one at a time in the jobs' order
    (``np.add.at`` is unbuffered), so the sums are those of the loop, bit for bit."""
    trial = pack.copy()
    held = trial.col[chosen]
    t = trial.cell_type[held]
    np.add.at(trial.free, t, trial.cell_gpus[held])
    for need, free in trial.host:
        np.add.at(free, t, need[chosen, held])
    trial.col[chosen] = -1
    return trial


def _stays(pack: Packing, chosen: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> bool:
    """True when matching can only leave every chosen job where it is, so the LP need not be solved (issue 27,
    twenty-second session: a ninth of the site day's matching LPs): each chosen job has one variable, its own
    column. The LP's only answer is then all ones (each job's row sums to 1) or none (a refusal: nothing changes),
    and with all ones the re-placement seats the same columns again. They all fit in any order when no type is
    over its GPUs now (each seat leaves at least what the last leaves) and there are no host limits (GPU counts
    are whole numbers, so the free GPUs come out the same in any order; CPUs and memory need not).
    ``tests/policy/test_flagship_match_stays.py`` solves these LPs anyway on a busy run and compares."""
    if pack.host or rows.size != chosen.size or not (rows == chosen).all() or not (cols == pack.col[chosen]).all():
        return False
    return bool((pack.free >= -1e-9).all())


def _match_values(problem, pack, chosen, floors, est, guard, blocked, params, allowed):
    """The LP's variables: (job, column of its size, value) for every chosen job and column it may take, in the
    order the per-job walk over ``Slurmplan._choices`` gave them (the job order of ``chosen``; within a job its
    choices' order). Found for all chosen jobs at once (issue 27, twenty-second session: the walk was 1.1 million
    Python steps a site day, the largest loop of the flagship's own code): a column qualifies where the job can run
    (throughput above 0, which is what its choices hold), the move is ``allowed`` (it pays its restart), its type is
    not reserved for another job (``blocked``, unless the job is on that type), it has the job's chosen GPU count
    and a type, and the job's speed there is at least its floor (its SLA, kept only where its own column gives it).
    Among one job's columns of one size the choices' order is fastest first, ties by column (their sort is stable
    over ascending columns): their other keys say nothing more here, as the requested-size key is the same for
    every column of one size, and "below the floor" (speed under the floor less 1e-12, sorted last) holds exactly
    for the slowest columns. ``tests/policy/test_flagship_match_values.py`` compares this with the plain walk on
    every round of a busy run, also with each GPU type reserved and with floors on half the jobs."""
    thr = np.asarray(problem.throughput, dtype=float)
    best = thr.max(axis=1)
    # Fast GPUs go first to jobs already stretched the most: time in the system against time left (a job
    # 10 h in with 5 h to go weighs 1 + 2 x stretch_weight); this keeps the worst finish-time ratio low.
    age = problem.column("time_since_start")
    left = np.maximum(np.minimum(est, 1e12), PRIOR_FLOOR_S)
    weight = 1.0 + (params["stretch_weight"] * age + params["short_bias_s"]) / left
    # A job at its stretch guard outweighs every unguarded one: it gets its fastest type; among guarded jobs the
    # same weights decide (shorter first: a short job on a slow GPU passes the guard within a round or two).
    weight = np.where(guard > 0, 1e3 * weight.max(initial=1.0) * weight, weight)
    gpus, types = pack.cell_gpus, pack.cell_type
    col = pack.col[chosen]
    speed = thr[chosen]
    floor = np.asarray(floors, dtype=float)[chosen]
    own = speed[np.arange(chosen.size), col]
    kept = np.where(own >= floor, floor, 0.0)  # never re-placed below its SLA
    typed = types >= 0
    reserved = typed & np.asarray(blocked, dtype=bool)[np.where(typed, types, 0)]
    ok = (speed > 0) & (gpus[None, :] == gpus[col][:, None]) & typed[None, :] & (speed >= kept[:, None])
    ok &= ~(reserved[None, :] & (types[None, :] != types[col][:, None]))
    if allowed is not None:
        ok &= np.asarray(allowed, dtype=bool)[chosen]
    pos, cols = np.nonzero(ok)  # row by row, columns ascending
    order = np.lexsort((-speed[pos, cols], pos))  # stable: ties keep the ascending columns
    rows, cols = chosen[pos[order]], cols[order]
    return rows, cols, _values(problem, thr, best, weight, rows, cols, params["stay_bonus"])


def _values(problem, thr, best, weight, rows: np.ndarray, cols: np.ndarray, stay_bonus: float) -> np.ndarray:
    """Each (job, column)'s value, all at once (the same float operations, element by element, as one at a time):
    its speed there relative to its fastest, plus ``stay_bonus`` where it runs now (a move costs a restart:
    staying is worth that share of a round at full speed), times its weight; 1e-3 more where it runs (ties: stay)."""
    r, c = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    on = problem.current[r] == c if problem.current is not None else np.zeros(r.size, dtype=bool)
    vals = (thr[r, c] / best[r] + np.where(on, stay_bonus, 0.0)) * weight[r]
    return vals + np.where(on, 1e-3, 0.0)


def greedy_match(pack: Packing, chosen: np.ndarray, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
    """When the LP's shares do not round (gang jobs of several sizes): jobs by their best value (the guarded
    first), each to its best-valued column with room, else its old one; None if some job fits nowhere."""
    trial = _released(pack, chosen)
    best = {}
    for k in np.argsort(-vals, kind="stable").tolist():
        best.setdefault(int(rows[k]), []).append(int(cols[k]))
    for j in sorted(best, key=lambda j: -vals[rows == j].max()):
        c = next((c for c in best[j] if trial.fits(j, c)), int(pack.col[j]))
        if not trial.fits(j, c):
            return None
        trial.assign(j, c)
    for j in chosen.tolist():
        if j not in best:
            if not trial.fits(j, int(pack.col[j])):
                return None
            trial.assign(j, int(pack.col[j]))
    return trial
