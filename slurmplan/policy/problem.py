"""Building AllocationProblems from per-GPU-type throughputs (Gavel's job x type matrix), and checking X.

The CLI's ``--jobs`` files, the tests and the benchmark all start from "job m runs at T[m, type] on
``scale_factor`` GPUs of a type"; this turns that into the job x Cell form every policy reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, Cell, GpuType


def type_problem(
    throughput: Mapping[GpuType, Sequence[float]],
    capacity: Mapping[GpuType, int],
    scale_factor: Sequence[int] | None = None,
    **fields,
) -> AllocationProblem:
    """One column per (GPU type, scale factor) present; job m is usable only in columns of its own scale factor.

    ``throughput`` maps GPU type -> per-job throughput at the job's scale factor (Gavel's T columns); the
    remaining AllocationProblem fields pass through ``fields``. ``requested`` defaults to -1.
    """
    types = list(throughput)
    t = np.array([list(throughput[k]) for k in types], dtype=float).T.reshape(-1, len(types))
    nj = t.shape[0]
    sf = np.ones(nj, dtype=int) if scale_factor is None else np.asarray(scale_factor, dtype=int)
    sizes = sorted(set(sf.tolist())) or [1]
    cells = tuple(Cell(k, s) for s in sizes for k in types)
    mat = np.zeros((nj, len(cells)))
    for c, cell in enumerate(cells):
        k = types.index(cell.gpu_type)
        mat[:, c] = np.where(sf == cell.gpus, t[:, k], 0.0)
    fields.setdefault("job_ids", tuple(range(nj)))
    return AllocationProblem(cells=cells, throughput=mat, capacity=dict(capacity), **fields)


def gpus_used(problem: AllocationProblem, x: np.ndarray) -> dict[GpuType, float]:
    """GPUs of each type that ``x`` occupies on average (the left side of the capacity constraint)."""
    out: dict[GpuType, float] = {t: 0.0 for t in problem.capacity}
    for c, cell in enumerate(problem.cells):
        out[cell.gpu_type] = out.get(cell.gpu_type, 0.0) + float(x[:, c].sum()) * cell.gpus
    return out


def violations(problem: AllocationProblem, alloc: Allocation, tol: float = 1e-6) -> list[str]:
    """Every way ``alloc`` breaks the base constraints (empty when valid): bounds, row sums, capacity, T = 0."""
    x = alloc.x
    out = []
    if x.shape != problem.throughput.shape:
        return [f"shape {x.shape} != {problem.throughput.shape}"]
    if (x < -tol).any() or (x > 1 + tol).any():
        out.append("share outside [0, 1]")
    rows = x.sum(axis=1)
    if (rows > 1 + tol).any():
        out.append(f"row sum {rows.max():.6f} > 1")
    for t, used in gpus_used(problem, x).items():
        if used > problem.capacity.get(t, 0) + tol * max(1.0, used):
            out.append(f"{t}: {used:.6f} GPUs > capacity {problem.capacity.get(t, 0)}")
    if (x[problem.throughput <= 0] > tol).any():
        out.append("share in a column the job cannot use")
    return out
