"""Gavel's round priorities: X divided by the share of time a job has received in each column.

A job that runs loses priority, a job that waits gains it, so every job with a non-zero X is eventually the
highest-priority candidate of its column: no starvation (narayanan.md A4).

The memory behind "received" is an *epoch*, as in Gavel's scheduler: time received counts from the last
reset, and a reset happens when X changes, at most once every ``priority_reset_s`` (Gavel: 1,920 s). Without
resets a job that once ran alone on a V100 for a day keeps a huge received share and is starved long after X
has given it its fair share again: with lifetime memory, long jobs in a busy cluster finished 3-7x later in the
simulator than Gavel's own simulator finishes them. What an epoch's X promised but did not deliver is kept as a
deficit, which breaks ties between equal priorities (Gavel's order: priority, then deficit, then X).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, JobId
from slurmplan.mechanism.problem import column_ids, column_index
from slurmplan.mechanism.state import evolve
from slurmplan.tick_types import JobState, SchedulerState, TickConfig

EPS = 1e-9
"""Shares below this are treated as zero (solver round-off)."""


_EPOCH, _DEFICIT = attrgetter("epoch_by_cell"), attrgetter("deficit_by_cell")
"""A state's per-Cell seconds, read in C (``_per_column`` reads one per row, every tick: no Python call)."""


def _per_column(
    problem: AllocationProblem,
    states: Mapping[JobId, JobState],
    seconds_by_cell: Callable[[JobState], Mapping],
    only: np.ndarray | None = None,
) -> np.ndarray:
    """A per-Cell mapping of each job's state as a (rows x columns) matrix (0 where the job has none); with
    ``only`` (a row mask), of those rows only (0 in the others)."""
    out = np.zeros((problem.num_jobs, len(problem.cells)))
    col = column_index(problem.cells)  # the problem's own index, kept while the columns are the same tuple
    ids = column_ids(problem.cells)  # the columns' own Cell objects, found without hashing them
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    # Bound methods held in locals: this reads every job's mapping every tick, and the loop's own steps are its cost.
    get, by_id, by_cell = states.get, ids.get, col.get
    add_row, add_col, add_value = rows.append, cols.append, values.append
    job_ids = problem.job_ids
    for j in range(len(job_ids)) if only is None else np.flatnonzero(only).tolist():
        st = get(job_ids[j])
        if st is None:
            continue
        mapping = seconds_by_cell(st)
        if not mapping:  # no seconds yet (a deficit before the first reset, a job that has not run this epoch)
            continue
        for cell, seconds in mapping.items():
            c = by_id(id(cell))
            if c is None:
                c = by_cell(cell)
                if c is None:
                    continue
            add_row(j)
            add_col(c)
            add_value(seconds)
    if rows:  # one fancy assignment: numpy's per-element ``out[j, c] = v`` costs more than the loop itself
        out[rows, cols] = values
    return out


def received_share(
    problem: AllocationProblem, states: Mapping[JobId, JobState], now: float, epoch_start: float, head_s: float
) -> np.ndarray:
    """Share of the epoch's wall-clock time each job spent in each column (rows x columns), never zero.

    Every pair starts the epoch with ``head_s`` seconds (Gavel: half a round), so a pair that has not run has a
    small share and a high but finite priority, and a job that ran the whole epoch in a column has share 1.
    The unit is X's (share of wall-clock time), so ``X / received`` is 1 when a job got exactly its share.
    """
    span = max(0.0, now - epoch_start) + head_s
    return (_per_column(problem, states, _EPOCH) + head_s) / span


def deficits(
    problem: AllocationProblem, states: Mapping[JobId, JobState], only: np.ndarray | None = None
) -> np.ndarray:
    """Each job's deficit per column (seconds owed by past epochs), for breaking priority ties.

    ``only`` (a row mask) fills those rows alone, zeros elsewhere: a refill between rounds breaks ties among the
    jobs it may start (``pick_order`` reads the deficits of eligible rows only), a few of a tick's ~100 rows."""
    return _per_column(problem, states, _DEFICIT, only)


def start_epoch(
    states: dict[JobId, JobState],
    state: SchedulerState,
    allocation: Allocation | None,
    now: float,
    config: TickConfig,
) -> float:
    """Reset the epoch if X changed and the last reset is old enough; returns the epoch's start.

    On a reset each job's deficit grows by what the ending epoch's X promised minus what the job received, and
    its epoch time starts again from zero. ``states`` is updated in place.
    """
    if state.epoch_start is None:
        return now
    prev = state.allocation
    if now - state.epoch_start < config.priority_reset_s or not _changed(prev, allocation):
        return state.epoch_start
    rows = {j: i for i, j in enumerate(prev.job_ids)} if prev is not None else {}
    cols = prev.cells if prev is not None else ()
    for job_id, st in states.items():
        if not st.epoch_by_cell and job_id not in rows:
            continue
        span = now - max(state.epoch_start, st.first_seen if st.first_seen is not None else state.epoch_start)
        owed = dict(st.deficit_by_cell)
        if job_id in rows and prev is not None:
            for c, share in zip(cols, prev.x[rows[job_id]].tolist(), strict=True):
                if share > EPS:
                    owed[c] = owed.get(c, 0.0) + share * span
        for c, seconds in st.epoch_by_cell.items():
            owed[c] = owed.get(c, 0.0) - seconds
        states[job_id] = evolve(st, epoch_by_cell={}, deficit_by_cell=owed)
    return now


def _changed(prev: Allocation | None, new: Allocation | None) -> bool:
    if prev is None or new is None:
        return prev is not new
    if prev.job_ids != new.job_ids or prev.cells != new.cells:
        return True
    return not np.allclose(prev.x, new.x, atol=1e-6)


def priorities(x: np.ndarray, received: np.ndarray) -> np.ndarray:
    """``X / received`` element-wise; infinite where X > 0 and nothing was received yet, 0 where X is 0."""
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    wanted = x > EPS
    got = received > EPS
    # the same quotients written in place (``out[both] = x[both] / received[both]`` gathered and scattered them)
    np.divide(x, received, out=out, where=wanted & got)
    np.copyto(out, np.inf, where=wanted & ~got)
    return out


def pick_order(
    x: np.ndarray, priority: np.ndarray, eligible: np.ndarray, deficit: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of every eligible pair with X > 0, highest priority first.

    Ties go to the larger deficit, then the larger X, then the earlier row (rows are in submit order).
    """
    rows, cols = np.nonzero((x > EPS) & eligible[:, None])
    owed = deficit[rows, cols] if deficit is not None else np.zeros(len(rows))
    order = np.lexsort((cols, rows, -x[rows, cols], -owed, -priority[rows, cols]))
    return rows[order], cols[order]
