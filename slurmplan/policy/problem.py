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
    from slurmplan.policy.lp import host_needs

    for label, need, cap in zip(
        ("CPUs", "memory MB"), host_needs(problem), (problem.cpu_capacity, problem.memory_capacity_mb), strict=True
    ):
        for t in cap or {}:
            cols = [c for c, cell in enumerate(problem.cells) if cell.gpu_type == t]
            used = float((x[:, cols] * need[:, cols]).sum())
            if used > cap[t] + tol * max(1.0, used):
                out.append(f"{t}: {used:.3f} {label} > capacity {cap[t]}")
    return out


CRIUS_TYPES: tuple[GpuType, ...] = ("a100", "a40", "a10", "v100")
_TYPE_SPEED = {"a100": 1.0, "a40": 0.55, "a10": 0.3, "v100": 0.45}


def synthetic_problem(num_jobs: int, gpus: int = 1280, seed: int = 0, sizes: Sequence[int] = (1, 2, 4, 8)):
    """A Crius-like problem: ``gpus`` split evenly over A100/A40/A10/V100, every job with Cells of each size.

    Per-job speed varies (model size), per-type speed ratios vary by job around a type's typical speed, and
    scaling is sub-linear; about a third of the jobs are running (``current``), a fifth guaranteed with an
    SLA at 60% of their requested Cell's throughput, three accounts with weights 1, 2, 3. For benchmarks and
    property tests; not calibrated to any measurement.
    """
    from slurmplan.domain import JobClass

    rng = np.random.default_rng(seed)
    cells = tuple(Cell(t, s) for t in CRIUS_TYPES for s in sizes)
    base = rng.lognormal(3.0, 1.0, num_jobs)
    ratio = np.array([[_TYPE_SPEED[c.gpu_type] for c in cells]]) * rng.uniform(0.7, 1.3, (num_jobs, len(cells)))
    eff = rng.uniform(0.6, 0.95, num_jobs)
    sizes_arr = np.array([c.gpus for c in cells], dtype=float)
    thr = base[:, None] * ratio * sizes_arr[None, :] ** eff[:, None]
    min_gpus = rng.choice(
        sizes, num_jobs, p=[0.5, 0.25, 0.15, 0.1][: len(sizes)] / np.sum([0.5, 0.25, 0.15, 0.1][: len(sizes)])
    )
    thr[sizes_arr[None, :] < min_gpus[:, None]] = 0.0
    requested = np.array([cells.index(Cell(CRIUS_TYPES[rng.integers(4)], int(g))) for g in min_gpus])
    current = np.where(rng.random(num_jobs) < 0.3, requested, -1)
    guaranteed = rng.random(num_jobs) < 0.2
    sla = np.where(guaranteed, 0.6 * thr[np.arange(num_jobs), requested], 0.0)
    accounts = tuple(f"acct{int(a)}" for a in rng.integers(0, 3, num_jobs))
    per = gpus // len(CRIUS_TYPES)
    return AllocationProblem(
        job_ids=tuple(range(num_jobs)),
        cells=cells,
        throughput=thr,
        capacity=dict.fromkeys(CRIUS_TYPES, per),
        weights=np.ones(num_jobs),
        steps_remaining=rng.uniform(1e4, 1e6, num_jobs),
        time_since_start=rng.uniform(0, 36000, num_jobs),
        attained_time=rng.uniform(0, 36000, num_jobs),
        submit_time=rng.uniform(0, 1e5, num_jobs),
        deadline=np.where(rng.random(num_jobs) < 0.3, rng.uniform(3600, 1e6, num_jobs), np.inf),
        accounts=accounts,
        account_weights={"acct0": 1.0, "acct1": 2.0, "acct2": 3.0},
        job_class=tuple(JobClass.GUARANTEED if g else JobClass.BEST_EFFORT for g in guaranteed),
        sla_throughput=sla,
        requested=requested,
        current=current,
        cost_per_gpu_hour={"a100": 3.0, "a40": 1.6, "a10": 0.8, "v100": 2.0},
    )
