"""LAS's LPs started from the previous round's final bases (issue 27: equal optima broken differently).

From one round to the next LAS's LP changes by the few jobs that came or left among about a hundred, so the
previous round's final statuses, carried over by what each column and row *is* (a job's Cell, a job's share or
score row, a GPU type's capacity row), are nearly a basis of the new LP. HiGHS completes or trims them (an "alien"
basis) and starts there: on ``bench_sim --days 2``'s 632 contested LPs, re-solved alone, the max-min solves take
3,305 simplex iterations instead of 85,073 and the efficiency passes 19,106 instead of 179,434; the time in HiGHS's
``run`` 1.23 -> 0.54 s, every max-min value and efficiency-pass total equal to 1e-15. The optimum is the same; the
vertex where several are optimal may differ, which issue 27 allows (``tests/sim/test_equal_optima.py``).
"""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy import lp
from slurmplan.policy.highs import BASIC, LOWER  # a new job's columns start at 0 (nonbasic, lower bound), rows basic

_T = -1
"""The key of the max-min LP's last column, ``t``."""


class WarmStart:
    """The last LP's columns and rows by key, with its final statuses per phase; ``bind`` gives a new LP's."""

    def __init__(self) -> None:
        self._cells: dict[Cell, int] = {}
        self._types: dict[str, int] = {}
        self._last: tuple[np.ndarray, np.ndarray, list] | None = None
        self._now: tuple[np.ndarray, np.ndarray, list] | None = None

    def bind(self, problem: AllocationProblem, idx: lp.LpIndex) -> WarmStart:
        """Key this round's LP: a column by its job and Cell, a row by its job (share, score) or GPU type."""
        codes = np.array([self._cells.setdefault(c, len(self._cells)) for c in problem.cells], dtype=np.int64)
        jobs = np.asarray(problem.job_ids, dtype=np.int64)
        cols = np.empty(idx.size + 1, dtype=np.int64)
        cols[:-1] = jobs[idx.rows] * (1 << 20) + codes[idx.cols]
        cols[-1] = _T
        types = np.array([self._types.setdefault(t, len(self._types)) for t in idx.types], dtype=np.int64)
        rows = np.concatenate([jobs * 4, -1 - types, jobs * 4 + 1])  # share rows, capacity rows, score rows
        self._now = (cols, rows, [None, None])
        return self

    def before(self, model, phase: int) -> None:
        last = self._last
        if last is None or last[2][phase] is None:
            return
        cols, rows, _ = self._now
        last_cols, last_rows, statuses = last[0], last[1], last[2][phase]
        model.start_from(
            _carried(last_cols, statuses[0], cols, LOWER),
            _carried(last_rows, statuses[1], rows, BASIC),
        )

    def after(self, model, phase: int, x: np.ndarray) -> None:
        self._now[2][phase] = model.basis(x)
        if phase == 1:
            self._last = self._now

    def forget(self) -> None:
        """Start the next LP cold (after a failed solve)."""
        self._last = None


def _carried(last_keys: np.ndarray, last_status: np.ndarray, keys: np.ndarray, default: int) -> np.ndarray:
    """Each key's status in the last LP, ``default`` for a key it did not have (a new job's column or row)."""
    if len(last_keys) == 0:
        return np.full(len(keys), default, dtype=np.int8)
    order = np.argsort(last_keys, kind="stable")
    src = order[np.minimum(np.searchsorted(last_keys, keys, sorter=order), len(order) - 1)]
    return np.where(last_keys[src] == keys, last_status[src], default).astype(np.int8)
