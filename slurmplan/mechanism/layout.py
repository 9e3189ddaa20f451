"""Where the round's chosen jobs go: placement requests, repacking against fragmentation, refilling.

The greedy round (``round.py``) counts GPUs per type; only placement (``placement.py``) sees nodes. Two things
can go wrong between them, and both are repaired here within the same round:

- kept jobs hold on to their nodes and leave no room of the right shape for a larger chosen job: repack the
  round largest first (kept jobs then move), if that places every job the first try placed and more GPUs;
- a chosen job still finds no nodes: the GPUs the greedy reserved for it go to the next jobs by priority.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from slurmplan.domain import Candidate, Cell, JobId, Reason
from slurmplan.mechanism.placement import Placed, PlacementRequest, Unplaced, place, place_keeping, placed_gpus
from slurmplan.mechanism.priorities import EPS
from slurmplan.mechanism.problem import ProblemContext
from slurmplan.mechanism.qos import frozen_rows
from slurmplan.mechanism.repack import evict_fewest
from slurmplan.mechanism.round import RoundChoice, RunningInfo, gpus_left, plan_round
from slurmplan.tick_types import JobState, ManagedJob, TickConfig

log = logging.getLogger(__name__)

Placement = dict[int, Placed | Unplaced]


def requests_for(
    ctx: ProblemContext,
    col: np.ndarray,
    states: Mapping[JobId, JobState],
    info: RunningInfo,
    requeue_delay: bool = False,
) -> list[PlacementRequest]:
    """One request per chosen row; kept running jobs first, with their nodes, then the rest.

    A job that is about to leave its nodes (a running job moving to another column, or one already signalled)
    avoids them, and so does a pending job still within Slurm's requeue delay of leaving them (``requeued_at``):
    on those nodes it would wait ``cred_expire + 1`` before starting (``placement.py``). Such a pending job is
    refused those nodes, and with the delay in force (``requeue_delay``) so is a leaving running job: placed
    there it would be stopped now and refused them once pending, idle until the next round re-seated it (issue
    23: grown v100x4 -> v100x8 across its own node, never started at v100x8). Unplaced, it stays where it runs.
    """
    p = ctx.problem
    kept: list[PlacementRequest] = []
    others: list[PlacementRequest] = []
    # Plain lists: a numpy element read costs several times a list's, and each row reads these four or more times.
    running, current, signalled = info.running.tolist(), info.current.tolist(), info.signalled.tolist()
    cols = col.tolist()
    memo = _kept_requests.get
    for j, c in enumerate(cols):
        if c < 0:
            continue
        mj, cell = ctx.jobs[j], p.cells[c]
        cand = p.candidates[j][c] if p.candidates else None
        run = running[j]
        if run and c == current[j] and not signalled[j]:  # kept where it runs: most rows, the same as last tick
            job = mj.job
            hit = memo(job.job_id)  # ``_kept_request``'s hit, read in place: every kept row, every tick
            same = hit is not None and hit[0] == j and hit[1] is cell and hit[2] is cand
            if same and hit[3] is job.nodes and hit[4] is mj.hints:
                kept.append(hit[5])
                continue
            kept.append(_kept_request(j, cell, cand, mj))
            continue
        st = states[mj.job.job_id]
        planned = st.planned
        preferred: tuple[str, ...] = ()
        if run and c == current[j]:
            preferred = tuple(mj.job.nodes)
        elif planned is not None and planned.cell == cell and planned.nodes:
            preferred = tuple(planned.nodes)
        leaving = run and (signalled[j] or c != current[j])
        waiting = not run and st.requeued_at is not None
        avoid = tuple(mj.job.nodes) if leaving else (st.ran_on if waiting else ())
        refuse = waiting or (leaving and requeue_delay)
        most = max(1, cand.nodes) if cand is not None and cand.nodes else 0
        req = PlacementRequest.of(
            j, cell, cand.cpus if cand else 0, cand.host_memory_mb if cand else 0, preferred, avoid, refuse,
            mj.hints.max_nodes, most,
        )  # fmt: skip
        (kept if run and not signalled[j] else others).append(req)
    return kept + others


def _kept_request(j: int, cell: Cell, cand: Candidate | None, mj: ManagedJob) -> PlacementRequest:
    """The request of a job kept in the column it runs in, not signalled: its own nodes preferred, none avoided.
    Remembered per job while its row, Cell, candidate, node tuple and hints are the very same (a pure memo: it
    holds them, so their ids stay theirs); a running job asks every tick, and these rarely change."""
    job, hints = mj.job, mj.hints
    hit = _kept_requests.get(job.job_id)
    same = hit is not None and hit[0] == j and hit[1] is cell and hit[2] is cand
    if same and hit[3] is job.nodes and hit[4] is hints:
        return hit[5]
    most = max(1, cand.nodes) if cand is not None and cand.nodes else 0
    req = PlacementRequest.of(
        j, cell, cand.cpus if cand else 0, cand.host_memory_mb if cand else 0, tuple(job.nodes), (), False,
        hints.max_nodes, most,
    )  # fmt: skip
    if len(_kept_requests) > 20_000:
        _kept_requests.clear()
    _kept_requests[job.job_id] = (j, cell, cand, job.nodes, hints, req)
    return req


_kept_requests: dict[JobId, tuple] = {}
"""``_kept_request``'s memo: a pure function of the objects it holds (by identity) and the row, bounded."""


def place_with_repack(
    ctx: ProblemContext, requests: list[PlacementRequest], frozen: frozenset = frozenset()
) -> Placement:
    """Kept jobs keep their nodes; if that leaves a chosen job without nodes, move the fewest kept jobs for it.

    Without the repacking, running jobs that keep winning their column could fragment the nodes a larger
    waiting job needs for ever: its priority would grow but it would never be placed (starvation). Issue 23:
    repacking the whole round largest first moved 20-odd kept jobs to seat one (``repack.py``); it is now only
    the fallback, taken when it moves no more kept jobs than it seats new ones. Neither moves a running job in
    ``frozen``: its QOS may not be preempted by a job of the round (``qos.frozen_rows``), and a move is a requeue.
    """
    placed = place(ctx.pool, requests)
    if all(isinstance(p, Placed) or p.waits for p in placed.values()):  # ``place`` answers every request's row
        return placed  # a job that only waits out its requeue delay is no fragmentation to repack for
    fewest = evict_fewest(ctx.pool, requests, placed, frozen)
    if fewest is not None:
        log.info("moved %d kept jobs to seat %d GPUs more", fewest[1], placed_gpus(fewest[0]) - placed_gpus(placed))
        return fewest[0]
    before = {row for row, where in placed.items() if isinstance(where, Placed)}
    # None: it lost a job placed before, or could not be taken for a reason below (found as it goes)
    repacked = place_keeping(ctx.pool, requests, before, kept_first=False, rival=placed, frozen=frozen)
    if repacked is None or placed_gpus(repacked) <= placed_gpus(placed):
        return placed
    if any(repacked[row] != placed[row] for row in frozen):
        return placed
    moved = sum(1 for r in requests if r.preferred and r.row in before and repacked[r.row] != placed[r.row])
    seated = sum(1 for row, where in repacked.items() if isinstance(where, Placed) and row not in before)
    if moved > seated:
        return placed
    log.info("repacked the round: %d GPUs placed instead of %d", placed_gpus(repacked), placed_gpus(placed))
    return repacked


def place_round(
    ctx: ProblemContext,
    choice: RoundChoice,
    x: np.ndarray,
    pri: np.ndarray,
    states: Mapping[JobId, JobState],
    info: RunningInfo,
    config: TickConfig,
) -> tuple[RoundChoice, Placement]:
    """Nodes for the round's choice; GPUs left by chosen jobs that found none are refilled by priority."""
    delay = config.requeue_delay_s > 0
    requests = requests_for(ctx, choice.col, states, info, delay)
    frozen: frozenset = frozenset()
    if info.qos is not None:  # QOS rules: the rows a repack may not move (``frozen_rows``; none without QOS)
        running = info.running.tolist()  # a list: numpy's per-element read costs several times a list's
        waiting = [r.row for r in requests if not running[r.row]]
        frozen = frozen_rows(info.qos, config.qos_preemption, info.running, waiting)
    placed = place_with_repack(ctx, requests, frozen)
    stay = [r.row for r in requests if isinstance(placed[r.row], Unplaced) and _stays_put(placed[r.row], r.row, info)]
    if stay:  # kept on its own nodes, placed first, so that no other job is put on them
        choice = _kept_in_place(choice, stay, info, placed)
        requests = requests_for(ctx, choice.col, states, info, delay)
        placed = place_with_repack(ctx, requests, frozen)
    if not stay and not any(isinstance(w, Unplaced) and not ctx.running[row] for row, w in placed.items()):
        return choice, placed
    p = ctx.problem
    taken = (r.cell for r in requests if isinstance(placed[r.row], Placed) or ctx.running[r.row])
    left = gpus_left(taken, p.capacity)
    eligible = (choice.col < 0) & ~ctx.running & (x.sum(axis=1) > EPS)
    if not eligible.any():
        return choice, placed
    more = plan_round(p, x, pri, info, config, eligible=eligible, capacity=left)
    rows = np.flatnonzero(eligible & (more.col >= 0)).tolist()
    if not rows:
        return choice, placed
    fixed = [replace(r, preferred=w.nodes) for r in requests if isinstance(w := placed[r.row], Placed)]
    extra = requests_for(ctx, np.where(np.isin(np.arange(p.num_jobs), rows), more.col, -1), states, info, delay)
    again = place(ctx.pool, fixed + extra)
    if any(again[r.row] != placed[r.row] for r in fixed):
        return choice, placed  # cannot happen with the same pool; keep the first answer rather than guess
    col = choice.col.copy()
    reasons, details = list(choice.reason), list(choice.detail)
    for j in rows:
        col[j], reasons[j] = more.col[j], Reason.SCHEDULED
        details[j] = f"takes GPUs a chosen job could not be placed on ({more.detail[j]})"
    priority = np.where(np.isin(np.arange(p.num_jobs), rows), more.priority, choice.priority)
    return RoundChoice(col, tuple(reasons), tuple(details), priority), {**placed, **again}


def _stays_put(where: Placed | Unplaced, j: int, info: RunningInfo) -> bool:
    """A running job whose new configuration fits only on the nodes it would leave (Slurm's requeue delay)."""
    return isinstance(where, Unplaced) and where.waits and bool(info.running[j]) and not bool(info.signalled[j])


def _kept_in_place(choice: RoundChoice, rows: list[int], info: RunningInfo, placed: Placement) -> RoundChoice:
    """The round's choice with ``rows`` back in the column they run in: stopped, they could not restart this round."""
    col = choice.col.copy()
    reasons, details = list(choice.reason), list(choice.detail)
    for j in rows:
        col[j], reasons[j] = int(info.current[j]), Reason.KEPT
        details[j] = f"stays: target not placeable ({placed[j].why}); before that: {details[j]}"
    return RoundChoice(col, tuple(reasons), tuple(details), choice.priority)
