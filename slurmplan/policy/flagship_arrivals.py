"""The flagship's first size for a job that arrives between rounds (``arrival_size``; issue 23, nineteenth session).

Between rounds the mechanism starts an arrival on free GPUs at its requested size (``engine.with_arrivals``). The
same job arriving at a round is sized by the policy: Crius's search and the climb may give an elastic job more
GPUs, or a faster type of another size. At the next round growing a running job is priced over its expected
remaining time, which for a job without a step count is "as long again as it has run" (seconds), so a job that
started between rounds was never grown. Its first size, and so the run's outcome, depended on where the rounds'
phase fell relative to its arrival: on the shipped replay trace the prediction moved 0.611-0.761 h over twelve
offsets of the daemon's start (``benchmarks/phase_spread.py``), and the real runs were all slower than the
prediction made at one phase.

The rule: when every job not running is a new arrival (nothing waiting before it that could use the free GPUs),
the policy's own round decides each arrival's column (the caller passes the round's X for the tick's problem,
computed without touching what the policy remembers), and that column, when it fits on the free GPUs, goes ahead
of the requested size's columns in the arrival's row. Where it does not fit (the round would have made room by
moving a running job, which only a round may do) the arrival starts at its requested size as before.
"""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.mechanism.priorities import EPS

SIZED = 2.0
"""The weight of the round's column in an arrival's row: above the requested size's columns (at most 1.0), so the
refill (highest X first among rows without a priority) tries it first and falls back to them."""


def lone_arrivals(problem: AllocationProblem, x: np.ndarray, new: np.ndarray) -> np.ndarray | None:
    """Rows of the jobs that arrived since the round with a row to start on (``with_arrivals``'s), or None when
    none did or a job that is neither running nor new is in the problem (one the round left waiting, or stopped):
    it came before them and may want the free GPUs, so the arrivals keep their requested size."""
    if problem.num_jobs == 0 or not problem.cells:
        return None
    new = np.asarray(new, dtype=bool)
    cur = problem.current
    running = np.asarray(cur, dtype=int) >= 0 if cur is not None else np.zeros(problem.num_jobs, dtype=bool)
    if (~running & ~new).any():
        return None
    rows = np.flatnonzero(new & (x.sum(axis=1) > EPS))
    return rows if rows.size else None


def never_ran(problem: AllocationProblem, x: np.ndarray, free: np.ndarray) -> np.ndarray | None:
    """``size_waiting``: rows of every job free to start that never ran and has a row to start on (an arrival's, or
    ``fill_freed``'s for a job the round left waiting), or None."""
    if problem.num_jobs == 0 or not problem.cells:
        return None
    ok = np.asarray(free, dtype=bool) & (problem.column("attained_time") <= 0) & (x.sum(axis=1) > EPS)
    rows = np.flatnonzero(ok)
    return rows if rows.size else None


def sized_rows(x: np.ndarray, rows: np.ndarray, round_x: np.ndarray) -> np.ndarray:
    """X with each of ``rows`` given the round's column (``round_x``'s largest share in that row) at ``SIZED`` plus
    the row's own largest weight (so the order among them stays: arrivals, then ``fill_freed``'s due order), its
    other columns kept below as the fallback."""
    out = x.copy()
    for j in rows.tolist():
        r = round_x[j]
        if r.max(initial=0.0) <= EPS:
            continue
        out[j, int(np.argmax(r))] = SIZED + x[j].max(initial=0.0)
    return out
