"""How the flagship sizes elastic jobs once it has chosen who runs: idle GPUs by marginal gain, shortest first.

Why (issue 17, LLM trace on the Crius cluster, sim/RESULTS.md section 5 "third pass"): with Crius's climb (idle
GPUs to the job gaining most *relative* speed per added GPU, whatever its length) most of the excess over the
elastic bound is time spent in a slower configuration than the job's best, and it sits in the longest jobs,
which are grown into idle GPUs, then shrunk or moved again a round later when new jobs arrive (restarts at 78 s
each, plus time off GPUs). For the *average* JCT a GPU is worth most on a job that will finish soon: it frees
its GPUs for everyone after it (SRPT; with sublinear speedups heSRPT gives short jobs the larger shares). So the
climb's gain per GPU is weighted by ``1 / max(expected remaining, floor)``: the same water filling over all
jobs at once, marginal speed per GPU, but a job with 10 min left outbids one with 10 h left at equal slopes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.policy.greedy import Packing, climb, reference_throughput


def climb_weights(est_s: np.ndarray, floor_s: float, by: str) -> np.ndarray:
    """Per job, the factor on its gains: ``short``: 1 / max(remaining, floor_s); ``time_saved``: max(remaining,
    floor_s) (a relative speed gain g saves about g x remaining seconds); normalised so the largest is 1.
    A job with unknown length (inf) counts as the longest known one."""
    finite = est_s[np.isfinite(est_s)]
    top = float(finite.max()) if finite.size else floor_s
    left = np.maximum(np.where(np.isfinite(est_s), est_s, top), floor_s)
    w = 1.0 / left if by == "short" else left
    return w / w.max() if w.size and w.max() > 0 else np.ones_like(w)


def weighted_climb(pack: Packing, score: np.ndarray, est_s: np.ndarray, floor_s: float, by: str) -> int:
    """Crius's climb (idle GPUs by best gain per added GPU) with each job's gains weighted by its remaining
    time (see ``climb_weights``). Returns the number of moves made."""
    return climb(pack, score * climb_weights(est_s, floor_s, by)[:, None])


def catch_up_floors(
    floors: np.ndarray,
    steps_left: np.ndarray,
    known: np.ndarray,
    waited_s: np.ndarray,
    running: np.ndarray,
    min_wait_s: float = 60.0,
    tolerance: float = 0.95,
) -> np.ndarray:
    """Guaranteed jobs not yet running: the rate that still meets the SLA after the time they waited.

    Rubick's SLA: a guaranteed job finishes within ``dedicated / tolerance``, dedicated being its work at its
    requested configuration's rate (the floor). A job that arrives between rounds waits up to a round before
    it can start; at the floor it then misses the SLA by that wait (on the LLM trace every SLA miss of the
    flagship was such a job: 2-5 minutes' wait, then exactly its dedicated time). Its floor is raised to
    ``work left / (work left / (tolerance x floor) - waited)`` so that the column chosen makes up the wait
    (with a larger or faster column); a job whose SLA can no longer be met, or whose length is unknown (the
    LLM trace gives durations, not steps) and that waited ``min_wait_s`` or more, gets an infinite floor, i.e.
    it takes the fastest column that has room. Running jobs and best-effort jobs keep their floors.
    """
    out = floors.copy()
    wait = ~running & (floors > 0)
    steps = np.where(known & (steps_left > 0), steps_left, np.nan)
    budget = steps / np.where(floors > 0, tolerance * floors, 1.0) - waited_s
    with np.errstate(invalid="ignore"):
        need = np.where(budget > 0, steps / np.maximum(budget, 1e-9), np.inf)
    need = np.where(np.isnan(steps), np.where(waited_s >= min_wait_s, np.inf, 0.0), need)
    out[wait] = np.maximum(floors[wait], need[wait])
    return out


def deadline_floors(
    floors: np.ndarray,
    steps_left: np.ndarray,
    known: np.ndarray,
    deadline_left_s: np.ndarray,
    current_rate: np.ndarray,
    running: np.ndarray,
    unknown_rate: np.ndarray,
) -> np.ndarray:
    """Jobs with a deadline still ahead get a floor, as guaranteed jobs do (served first, placed in a column
    that gives it, never shrunk by the search): the rate that finishes their known work by the deadline, or
    ``unknown_rate`` (its requested column's) when the length is unknown; a running one keeps at least its
    current rate. Why: on the LLM trace the deadline misses were best-effort jobs of unknown length started
    at half their size on a slow type by the placement search (one ran 8.5 h where its best is 0.5 h)."""
    out = floors.copy()
    ahead = np.isfinite(deadline_left_s) & (deadline_left_s > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(known & (steps_left > 0), steps_left / np.maximum(deadline_left_s, 1e-9), unknown_rate)
    need = np.where(running, np.minimum(need, current_rate), need)
    out[ahead] = np.maximum(out[ahead], need[ahead])
    return out


def catch_up(
    problem: AllocationProblem,
    pack: Packing,
    order: np.ndarray,
    floors: np.ndarray,
    catch: np.ndarray,
    choices: Callable[[int, float], list[int]],
) -> np.ndarray:
    """Guaranteed jobs that waited (``catch`` above their SLA floor), in order, move to the first column of
    ``choices`` for the raised floor that has room and is faster than where they are, once every
    guaranteed job has its SLA column (so one job's catch-up never costs another's SLA). Returns the
    floors with those jobs' new speed as their floor (the matching keeps them that fast)."""
    out = floors.copy()
    thr = problem.throughput
    for j in order.tolist():
        if catch[j] <= floors[j]:
            continue
        now = thr[j, pack.col[j]] if pack.col[j] >= 0 else 0.0
        for c in choices(j, catch[j]):
            if thr[j, c] > now and pack.fits(j, c):
                pack.assign(j, c)
                break
        if pack.col[j] >= 0:
            out[j] = max(out[j], thr[j, pack.col[j]])
    return out


def climb_idle(
    problem: AllocationProblem,
    pack: Packing,
    est: np.ndarray,
    by: str,
    floor_s: float,
    allowed: np.ndarray | None = None,
) -> None:
    """Idle GPUs by gain per added GPU, weighted as ``climb_by`` says; ``allowed`` (jobs x columns) leaves out
    the resizes of running jobs that do not pay their restart (``flagship_moves.paying_columns``)."""
    score = np.asarray(problem.throughput, dtype=float) / reference_throughput(problem)[:, None]
    if by != "speed":
        score = score * climb_weights(est, floor_s, by)[:, None]
    climb(pack, score, None if allowed is None else (lambda col, ok: ok & allowed))


def grow(problem: AllocationProblem, pack: Packing, order: np.ndarray, allowed: np.ndarray | None = None) -> None:
    """Leftover GPUs: in due order, move a placed job to a larger column of its type if that is faster (and,
    for a running job, if the resize pays its restart: ``allowed``)."""
    thr = problem.throughput
    for j in order.tolist():
        c = int(pack.col[j])
        if c < 0:
            continue
        t = problem.cells[c].gpu_type
        bigger = [
            k
            for k in np.nonzero(thr[j] > thr[j, c] * 1.05)[0].tolist()
            if problem.cells[k].gpu_type == t
            and problem.cells[k].gpus > problem.cells[c].gpus
            and (allowed is None or allowed[j, k])
        ]
        for k in sorted(bigger, key=lambda k: -thr[j, k]):
            if pack.fits(j, k):
                pack.assign(j, k)
                break
