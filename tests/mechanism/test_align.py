"""``engine.align`` puts a round's X on a later tick's rows and columns: whole rows when only jobs came and went,
row and column pairs when the columns changed too; every path against one share at a time."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from slurmplan.domain import Allocation, Cell
from slurmplan.mechanism.engine import align

CELLS = (Cell("a100", 1), Cell("a100", 2), Cell("v100", 1), Cell("v100", 4))


def _one_by_one(allocation: Allocation, job_ids: tuple[int, ...], cells: tuple[Cell, ...]) -> np.ndarray:
    out = np.zeros((len(job_ids), len(cells)))
    for i, j in enumerate(job_ids):
        for k, c in enumerate(cells):
            if j in allocation.job_ids and c in allocation.cells:
                out[i, k] = allocation.x[allocation.job_ids.index(j), allocation.cells.index(c)]
    return out


def test_align_gives_each_jobs_share_in_each_column_whatever_moved() -> None:
    rng = np.random.default_rng(0)
    allocation = Allocation((1, 2, 3, 4), CELLS, rng.random((4, len(CELLS))) / 4, "test")
    cases = [
        ((1, 2, 3, 4), CELLS),  # the round's own rows and columns
        ((2, 4, 5), CELLS),  # jobs came and went, the same columns
        ((2, 4, 5), tuple(Cell(c.gpu_type, c.gpus, c.stages) for c in CELLS)),  # equal columns, other objects
        ((1, 3), (CELLS[2], Cell("h100", 8), CELLS[0])),  # the columns changed too
        ((7, 8), CELLS),  # nobody the round knew
    ]
    for job_ids, cells in cases:
        problem = SimpleNamespace(num_jobs=len(job_ids), job_ids=job_ids, cells=cells)
        got = align(allocation, problem)
        assert np.array_equal(got, _one_by_one(allocation, job_ids, cells)), (job_ids, cells)
        got[:] = 9.0  # the caller's copy: the remembered X stays the round's
    again = align(allocation, SimpleNamespace(num_jobs=4, job_ids=(1, 2, 3, 4), cells=CELLS))
    assert np.array_equal(again, allocation.x)
