"""The flagship's "do no harm" step: a change to a running job stays in the round only if it pays.

The selection, sizing and matching steps decide from scratch every round; each running job they move, resize or
stop is then priced here (``mechanism.pricing``, issue 23). The gain is the completion time the job saves over its
expected remaining time, plus the waiting time of the jobs that take its GPUs (each would otherwise wait for it to
finish); a stopped job loses the time until it runs again: until the jobs that took its GPUs end, and behind every
waiting job due before it (tenth session, ``_queue_ahead_s``); the cost is its full measured restart cost
(``AllocationProblem.restart_cost_s``, doubled within the hold time after its last move: hysteresis). A change that
does not pay ``move_pay x cost`` is undone: the job keeps its column, the jobs that needed its GPUs go elsewhere if
they fit there, else they wait, as under plain Slurm.

With zero restart cost (Gavel's rules, ``--zero-cost``) nothing is priced: every change is free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.mechanism.pricing import price_change, remaining_prior
from slurmplan.policy.greedy import Packing

INF = float("inf")


@dataclass(frozen=True)
class Guarded:
    """What the guard did, per job, for the notes: the change it kept or undid and why, and the changes it could
    not price (issue 23, ninth session: on the 1,000-job LLM trace 256 of the 384 restarts onto a slower
    configuration were of this kind; ``explain`` now says so instead of nothing)."""

    undone: dict[int, str]
    kept: dict[int, str]
    unpriced: dict[int, str] = field(default_factory=dict)


def remaining_where_running(problem: AllocationProblem, floor_s: float | np.ndarray) -> np.ndarray:
    """Each running job's expected seconds left in its current column (``pricing.remaining_prior``)."""
    n = problem.num_jobs
    cur = np.asarray(problem.current if problem.current is not None else np.full(n, -1), dtype=int)
    thr = np.asarray(problem.throughput, dtype=float)
    rate = np.where(cur >= 0, thr[np.arange(n), np.maximum(cur, 0)], 0.0) if n else np.zeros(0)
    known = np.ones(n, bool) if problem.steps_known is None else np.asarray(problem.steps_known, bool)
    est, _ = remaining_prior(
        problem.column("steps_remaining"), rate, known, problem.column("attained_time"), problem.time_limit_left,
        floor_s,
    )  # fmt: skip
    return est


def paying_columns(
    problem: AllocationProblem, factor: float, floor_s: float | np.ndarray, exempt: np.ndarray | None = None
) -> np.ndarray | None:
    """Jobs x columns: where each job may be placed without a change that does not pay for itself. A running
    job with a restart cost may stay, or go where ``remaining x (1 - thr_cur / thr_new) > factor x cost`` (its own
    gain over its expected remaining time); every other job anywhere. None when nothing is priced (no costs)."""
    if problem.current is None or problem.restart_cost_s is None or problem.num_jobs == 0:
        return None
    cost = np.asarray(problem.restart_cost_s, dtype=float)
    cur = np.asarray(problem.current, dtype=int)
    priced = (cur >= 0) & (cost > 0)
    if exempt is not None:  # guaranteed jobs: their SLA is a promise, not a bet on their remaining time
        priced &= ~np.asarray(exempt, dtype=bool)
    if not priced.any():
        return None
    thr = np.asarray(problem.throughput, dtype=float)
    left = remaining_where_running(problem, floor_s)
    rate = thr[np.arange(problem.num_jobs), np.maximum(cur, 0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = left[:, None] * (1.0 - rate[:, None] / thr)
    ok = ~priced[:, None] | (gain > factor * cost[:, None])
    ok[np.flatnonzero(priced), cur[priced]] = True
    return ok


def guard_moves(
    problem: AllocationProblem,
    pack: Packing,
    queue,
    est: np.ndarray,
    urgent: np.ndarray,
    factor: float,
    floor_s: float | np.ndarray,
    choices: Callable[[int, float], list[int]],
    gang: bool = False,
    shielded: np.ndarray | None = None,
) -> Guarded:
    """Undo, in ``pack``, every change to a running job that does not pay (see the module docstring).

    ``queue``: the ordering step's result (changes are priced in its order, and the waiting jobs that a kept job
    pushes out are tried elsewhere, in its order, on their ``choices`` with room); ``est``: expected seconds left
    per job on its fastest column; ``urgent``: jobs whose start cannot wait (guaranteed, overdue, deadline):
    making room for one always pays; ``gang`` (``stop_gang``): a stopped job's own delay runs until enough of the
    jobs that took its GPUs end for it to fit again (``_gpus_back_s``), not until the first of them ends;
    ``shielded`` (``protect_pushed``): running jobs another job's change pushed off their GPUs within the hold time;
    a change that pushes one off again must pay for its restart too, and undone they go back (``_shield``).
    """
    undone: dict[int, str] = {}
    kept: dict[int, str] = {}
    unpriced: dict[int, str] = {}
    if problem.current is None or problem.restart_cost_s is None or problem.num_jobs == 0:
        return Guarded(undone, kept, unpriced)
    cur = np.asarray(problem.current, dtype=int)
    cost = np.asarray(problem.restart_cost_s, dtype=float)
    thr = np.asarray(problem.throughput, dtype=float)
    left = remaining_where_running(problem, floor_s)
    order = queue.order
    for j in order.tolist():
        c0 = int(cur[j])
        if c0 < 0 or pack.col[j] == c0 or cost[j] <= 0 or urgent[j]:
            continue
        trial = pack.copy()
        trial.release(j)
        room = _make_room(trial, j, c0, order, cur)
        if room is None:  # its GPUs went to jobs that keep running there: nothing simple to undo
            new = int(pack.col[j])
            if new < 0 or thr[j, new] < thr[j, c0]:
                unpriced[j] = "slower, not priced: running jobs that took its GPUs cannot simply go back"
            continue
        pushed, back = room
        if any(urgent[k] for k in pushed):
            kept[j] = "makes room for a job that cannot wait"
            new = int(pack.col[j])
            wait = min((est[k] for k in pushed), default=0.0)
            if new >= 0 and thr[j, new] < thr[j, c0] and left[j] * (thr[j, c0] / thr[j, new] - 1.0) > wait:
                pack.release(j)  # slower there than stopped until they finish: it waits for its GPUs instead
                kept[j] += ", and waits for its GPUs rather than run slower elsewhere"
            continue
        # each job it makes room for would otherwise wait until GPUs of that type free up: when it, or the
        # soonest other job running there, finishes
        others = _wait_saved(pack, j, c0, cur, left) * len(pushed)
        # running jobs that moved onto its GPUs go back where they ran: their moves' own gains are lost too
        others += sum(max(0.0, left[k] * (1.0 - thr[k, cur[k]] / thr[k, pack.col[k]])) for k in back)
        new = int(pack.col[j])
        # stopped: it restarts when they finish (the first, or with gang enough to fit), behind the jobs due before it
        delay = (
            _gpus_back_s(trial, pack, j, c0, pushed, est)
            if gang and pushed
            else min((est[k] for k in pushed), default=left[j])
        )
        delay += _queue_ahead_s(problem, pack, cur, thr, queue.due, j, est, pushed) if new < 0 else 0.0
        restored, both = (
            (trial, 0.0) if shielded is None else _shield(trial, pack, j, c0, new, order, cur, cost, shielded)
        )
        thr_new = thr[j, new] if new >= 0 else 0.0
        price = price_change(left[j], thr[j, c0], thr_new, cost[j] + both, others, delay, factor)
        detail = price.detail + (", its own and those of jobs pushed off within the hold time" if both else "")
        if price.pays:
            kept[j] = detail
            continue
        trial = restored
        if trial.col[j] != c0:
            trial.assign(j, c0)
        _place_elsewhere(trial, pushed, order, choices)
        _adopt(pack, trial)
        undone[j] = detail
    return Guarded(undone, kept, unpriced)


def _shield(
    trial: Packing,
    pack: Packing,
    j: int,
    c0: int,
    new: int,
    order: np.ndarray,
    cur: np.ndarray,
    cost: np.ndarray,
    shielded: np.ndarray,
) -> tuple[Packing, float]:
    """The restart costs of the shielded jobs that ``j``'s change pushes off their GPUs again, and the packing with
    ``j`` back in ``c0`` and them back where they ran (``protect_pushed``, fifteenth session, issue 23's "a job
    moved for another job is not moved back within a hold time unless the gain pays for both moves").

    On held-out LLM traces the restart flags are cascades: a running job's move takes the GPUs of others, which the
    guard cannot price (the GPUs they left went to a running job), and the next move pushes them again (48 of 123
    restarts on u-llm-wide 20/401). A job pushed off by another's change within the hold time is shielded: a change
    to ``j`` that moves or stops it again this round, where it fits back once ``j`` is undone, must pay its restart
    as well as ``j``'s. Only the restart is counted, not its slowdown (``price_displaced`` counted that and lost on
    the Crius cluster, where the growing jobs are the long ones). ``trial``: the guard's packing with ``j`` released
    and room made in ``c0``."""
    back = trial.copy()
    back.assign(j, c0)
    if new < 0:
        return back, 0.0
    t = pack.cell_type[new]
    both = 0.0
    for k in order.tolist():
        ck, now = int(cur[k]), int(back.col[k])
        if k == j or not shielded[k] or ck < 0 or now == ck or pack.cell_type[ck] != t:
            continue
        if now >= 0:
            back.release(k)
        if not back.fits(k, ck):
            if now >= 0:
                back.assign(k, now)
            continue
        back.assign(k, ck)
        both += cost[k]
    return back, both


def _gpus_back_s(trial: Packing, pack: Packing, j: int, c0: int, pushed: list[int], est: np.ndarray) -> float:
    """When a stopped job ``j`` has its old column's GPUs back (``stop_gang``, thirteenth session): the jobs that
    took them end soonest first, and ``j`` needs all of its GPUs at once (a gang job cannot restart on one freed
    GPU), so the wait runs until enough of them have ended for it to fit again: all of them for a 4-GPU job that
    three newcomers split, the first for a one-GPU job. ``trial``: the packing with ``j`` and ``pushed`` released;
    ``pack``: where the ``pushed`` jobs are placed this round."""
    back = trial.copy()
    for k in pushed:
        back.assign(k, int(pack.col[k]))
    wait = 0.0
    for k in sorted(pushed, key=lambda k: est[k]):
        if back.fits(j, c0):
            break
        back.release(k)
        wait = float(est[k])
    return wait


def _queue_ahead_s(
    problem: AllocationProblem,
    pack: Packing,
    cur: np.ndarray,
    thr: np.ndarray,
    due: np.ndarray,
    j: int,
    est: np.ndarray,
    pushed: list[int],
) -> float:
    """How much longer a stopped job ``j`` waits behind the jobs that wait, unplaced this round, and are due before
    it: their expected GPU-seconds over the GPUs of the types ``j`` can use. A stopped job goes back into the
    queue at its due time, not at its old place (tenth session: on an overloaded 6-GPU cluster stopped jobs
    waited 0.83 h each off GPUs, priced as if they restarted when the first job that took their GPUs ends).
    ``cur`` and ``thr``: the guard's own current columns and throughput matrix."""
    usable = {problem.cells[c].gpu_type for c in np.flatnonzero(thr[j] > 0).tolist()}
    on_its_types = np.array([c.gpu_type in usable for c in problem.cells], dtype=bool)
    # only jobs that would run on a GPU type it can use stand in its way
    ahead = (cur < 0) & (pack.col < 0) & (due < due[j]) & (thr[:, on_its_types] > 0).any(axis=1)
    ahead[pushed] = False
    if not ahead.any():
        return 0.0
    req = np.asarray(problem.requested if problem.requested is not None else np.full(problem.num_jobs, -1), int)
    gpus = np.where(req >= 0, pack.cell_gpus[np.maximum(req, 0)], 1.0)
    capacity = sum(float(problem.capacity.get(t, 0)) for t in usable)
    return float((np.minimum(est[ahead], 1e9) * gpus[ahead]).sum()) / max(capacity, 1.0)


def _wait_saved(pack: Packing, j: int, c0: int, cur: np.ndarray, left: np.ndarray) -> float:
    """How long a job pushed out of ``j``'s GPUs would wait for GPUs of that type: until the soonest of ``j``
    and the other jobs that keep running on that type finishes."""
    t = pack.cell_type[c0]
    same = (cur >= 0) & (pack.col == cur) & (pack.cell_type[np.maximum(cur, 0)] == t)
    same[j] = False
    soonest = float(left[same].min()) if same.any() else np.inf
    return min(float(left[j]), soonest)


def _make_room(
    trial: Packing, j: int, c0: int, order: np.ndarray, cur: np.ndarray
) -> tuple[list[int], list[int]] | None:
    """Free ``j``'s old column again in ``trial``, last in the order first: unplace jobs that did not run before,
    and send running jobs that moved onto that GPU type this round back to where they run. Returns (the jobs
    pushed out, the movers sent back), or None when that cannot make room (jobs that ran there keep it)."""
    pushed: list[int] = []
    back: list[int] = []
    t = trial.cell_type[c0]
    if trial.fits(j, c0):
        return pushed, back
    # Only jobs on type t in a column they did not run in can be moved; a step changes the moved job's column
    # only, so the jobs that can move are known before the loop, and j's fit changes only after a step (issue 27:
    # asking it for every job in the order was a million ``fits`` calls on the site history's first day).
    col = trial.col
    movable = (col >= 0) & (trial.cell_type[np.maximum(col, 0)] == t) & (col != cur)
    movable[j] = False
    for k in order[::-1][movable[order[::-1]]].tolist():
        col = trial.col[k]
        if col < 0 or trial.cell_type[col] != t or col == cur[k]:
            continue  # (only if ``order`` named k twice)
        trial.release(k)
        if cur[k] < 0:
            pushed.append(k)
        elif trial.fits(k, int(cur[k])) and trial.cell_type[cur[k]] != t:
            trial.assign(k, int(cur[k]))
            back.append(k)
        else:
            return None
        if trial.fits(j, c0):
            return pushed, back
    return None


def _place_elsewhere(
    trial: Packing, pushed: list[int], order: np.ndarray, choices: Callable[[int, float], list[int]]
) -> None:
    """The jobs pushed out of a kept job's GPUs take, in queue order, their first choice that still fits."""
    rank = {k: i for i, k in enumerate(order.tolist())}
    for k in sorted(pushed, key=rank.__getitem__):
        c = next((c for c in choices(k, 0.0) if trial.fits(k, c)), -1)
        if c >= 0:
            trial.assign(k, c)


def _adopt(pack: Packing, trial: Packing) -> None:
    pack.col[:], pack.free[:] = trial.col, trial.free
    for (_, free), (_, tfree) in zip(pack.host, trial.host, strict=True):
        free[:] = tfree
