"""Gavel's round priorities: X divided by the share of time a job has received in each column.

A job that runs loses priority, a job that waits gains it, so every job with a non-zero X is eventually the
highest-priority candidate of its column: no starvation (narayanan.md A4).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from slurmplan.domain import AllocationProblem, JobId
from slurmplan.tick import JobState

EPS = 1e-9
"""Shares below this are treated as zero (solver round-off)."""


def received_share(problem: AllocationProblem, states: Mapping[JobId, JobState], now: float) -> np.ndarray:
    """Fraction of its time in the system that each job spent in each column (rows x columns).

    The same unit as X (share of wall-clock time), so ``X / received`` is 1 when a job got exactly its share.
    """
    share = np.zeros((problem.num_jobs, len(problem.cells)))
    col = {c: i for i, c in enumerate(problem.cells)}
    for j, job_id in enumerate(problem.job_ids):
        st = states.get(job_id)
        if st is None or not st.attained_by_cell or st.first_seen is None:
            continue
        age = now - st.first_seen
        if age <= 0:
            continue
        for cell, seconds in st.attained_by_cell.items():
            c = col.get(cell)
            if c is not None:
                share[j, c] = seconds / age
    return share


def priorities(x: np.ndarray, received: np.ndarray) -> np.ndarray:
    """``X / received`` element-wise; infinite where X > 0 and nothing was received yet, 0 where X is 0."""
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    wanted = x > EPS
    got = received > EPS
    both = wanted & got
    out[both] = x[both] / received[both]
    out[wanted & ~got] = np.inf
    return out


def pick_order(x: np.ndarray, priority: np.ndarray, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of every eligible pair with X > 0, highest priority first.

    Ties (several infinite priorities) go to the larger X, then to the earlier row (rows are in submit order).
    """
    rows, cols = np.nonzero((x > EPS) & eligible[:, None])
    order = np.lexsort((cols, rows, -x[rows, cols], -priority[rows, cols]))
    return rows[order], cols[order]
