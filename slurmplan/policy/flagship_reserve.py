"""The flagship's reservation for its highest-priority waiting gang job, the EASY-backfill way (issue 23).

Why: plain Slurm's backfill never delays the expected start of the highest-priority waiting job: that job gets a
reservation at the time enough GPUs free up, and a lower-priority job may start now only if it is expected to end
before then, or uses GPUs the reservation does not need. Without one, a 4-GPU job on a 16-GPU A100 cluster waited
5,029 s against plain Slurm's 2,728 s (``u-replay-single`` 30/102, job 12, never stopped): at rounds backfill and
elastic sizing put smaller jobs ahead of it, and between rounds each arrival took a freed GPU.

The reservation is per GPU type (the policy's packing counts GPUs per type): the type among the job's columns of
its requested size where enough GPUs are expected free first, by the running jobs' expected remaining times (the
estimate the move guard prices with). Only tick inputs: both backends decide alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.policy.greedy import Packing


@dataclass
class Reservation:
    """GPUs of one type held for a waiting gang job from ``start_s`` seconds from now."""

    job: int
    type: int
    need: float
    start_s: float
    spare: float
    """GPUs of the type beyond the job's need at ``start_s``: a longer job may take these (EASY's extra nodes)."""

    def allows(self, left_s: float, added_gpus: float) -> bool:
        """May a lower-priority job expected to run ``left_s`` more take ``added_gpus`` of the type? Yes if it ends
        before the reserved start, or fits in the spare."""
        return added_gpus <= 1e-9 or left_s <= self.start_s or added_gpus <= self.spare + 1e-9

    def take(self, left_s: float, added_gpus: float) -> None:
        """A job that does not end before the reserved start took ``added_gpus`` of the spare."""
        if added_gpus > 1e-9 and left_s > self.start_s:
            self.spare -= added_gpus

    def admits(self, left_s: float, added_gpus: float) -> bool:
        """``allows``, taking the spare when it does."""
        ok = self.allows(left_s, added_gpus)
        if ok:
            self.take(left_s, added_gpus)
        return ok


def shadow(free: float, ends: list[tuple[float, float]], need: float) -> tuple[float, float] | None:
    """The earliest time ``free`` plus the GPUs released by then (``ends``: (seconds left, GPUs)) covers ``need``,
    and the GPUs spare at that time; None when even every end does not."""
    if free >= need - 1e-9:
        return 0.0, free - need
    for end, gpus in sorted(ends):
        free += gpus
        if free >= need - 1e-9:
            return end, free - need
    return None


def reserve(
    pack: Packing, j: int, columns: list[int], holders: dict[int, tuple[int, float]], left: np.ndarray
) -> Reservation | None:
    """The reservation for job ``j`` over ``columns`` (its columns of its requested size). ``holders``: the jobs
    holding GPUs outside ``pack`` (running jobs not yet placed), job -> (type, GPUs); ``pack``'s placed jobs and the
    holders free their GPUs after their expected remaining time ``left``."""
    best: Reservation | None = None
    for c in columns:
        t = int(pack.cell_type[c])
        if t < 0:
            continue
        need = float(pack.cell_gpus[c])
        held = [(k, g) for k, (tk, g) in holders.items() if tk == t]
        ends = [(float(left[k]), g) for k, g in held]
        ends += [
            (float(left[k]), pack.gpus_of(k)) for k in np.flatnonzero(pack.col >= 0) if pack.cell_type[pack.col[k]] == t
        ]
        got = shadow(float(pack.free[t]) - sum(g for _, g in held), ends, need)
        if got is not None and (best is None or got[0] < best.start_s):
            best = Reservation(j, t, need, got[0], got[1])
    return best


def allowed_columns(
    problem: AllocationProblem, pack: Packing, res: Reservation | None, left: np.ndarray
) -> np.ndarray | None:
    """Jobs x columns for the sizing steps after selection (matching, growth, climbing): no job other than the
    reserved one takes more GPUs of the reserved type than it holds in ``pack`` unless it is expected to end before
    the reserved start. None without a reservation."""
    if res is None:
        return None
    on_type = pack.cell_type == res.type
    held = np.array(
        [pack.gpus_of(k) if pack.col[k] >= 0 and on_type[pack.col[k]] else 0.0 for k in range(len(pack.col))]
    )
    ok = ~on_type[None, :] | (pack.cell_gpus[None, :] <= held[:, None] + 1e-9) | (left[:, None] <= res.start_s)
    ok[res.job] = True
    return ok


def arrivals_held(
    problem: AllocationProblem,
    x_round: np.ndarray,
    x: np.ndarray,
    job_id,
    type_name: str,
    left: np.ndarray,
) -> np.ndarray:
    """Between rounds: the arrivals' rows of ``x`` (rows empty in ``x_round``) lose the reserved type's columns
    unless the arrival is expected to end before the reserved start or fits in the spare; the reserved job gets
    its own row there, so that it starts as soon as its GPUs are free. The reservation is recomputed from this
    tick's running jobs."""
    ids = list(problem.job_ids)
    if job_id not in ids or type_name not in problem.capacity:
        return x
    j = ids.index(job_id)
    cur = np.asarray(problem.current if problem.current is not None else np.full(len(ids), -1), dtype=int)
    if cur[j] >= 0:
        return x
    gpus = np.array([c.gpus for c in problem.cells], dtype=float)
    on_type = np.array([c.gpu_type == type_name for c in problem.cells], dtype=bool)
    req = -1 if problem.requested is None else int(problem.requested[j])
    if req < 0:
        return x
    need = gpus[req]
    run = np.flatnonzero((cur >= 0) & on_type[np.maximum(cur, 0)])
    free = float(problem.capacity[type_name]) - float(gpus[cur[run]].sum())
    got = shadow(free, [(float(left[k]), float(gpus[cur[k]])) for k in run], need)
    if got is None:
        return x
    res = Reservation(j, -1, need, got[0], got[1])
    x = x.copy()
    new = np.flatnonzero((x_round.sum(axis=1) <= 1e-9) & (x.sum(axis=1) > 1e-9))
    submit = problem.column("submit_time")
    for k in sorted(new.tolist(), key=lambda k: submit[k]):
        if k == j or not (x[k] * on_type).any():
            continue
        want = float(gpus[np.flatnonzero((x[k] > 0) & on_type)].max())
        if not res.admits(float(left[k]), want):
            x[k, on_type] = 0.0
    row = np.asarray(problem.throughput[j], dtype=float) * on_type * (gpus == need)
    if row.max(initial=0.0) > 0:
        x[j] = row / row.max()
    return x
