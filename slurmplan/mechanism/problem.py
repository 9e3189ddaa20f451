"""Build the policy's AllocationProblem (and the node pool placement needs) from one tick's input.

The mechanism and every policy see the same numbers: columns are the distinct Cells over all jobs'
candidates, capacity is what managed jobs may use (unmanaged jobs' GPUs taken out first), and the
per-job vectors carry attained time, remaining steps and SLAs in the units of the job's own candidates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from slurmplan.domain import (
    AllocationProblem,
    Assignment,
    Candidate,
    Cell,
    Cluster,
    GpuType,
    JobId,
    Reason,
    ValidationError,
)
from slurmplan.domain import JobState as SlurmState
from slurmplan.tick_types import JobState, ManagedJob, TickInput

log = logging.getLogger(__name__)

RUNNING_STATES = (SlurmState.RUNNING, SlurmState.SUSPENDED)
"""Slurm states in which a managed job holds its GPUs and can be kept, moved or stopped."""
PENDING_STATES = (SlurmState.PENDING, SlurmState.REQUEUED)
"""Slurm states in which a managed job waits for a decision (hold, or update and release)."""


@dataclass(frozen=True, eq=False)
class NodePool:
    """What managed jobs may use on each schedulable GPU node: totals minus what unmanaged jobs hold.

    Managed jobs' own usage is not subtracted: the round reassigns all of it.
    """

    names: tuple[str, ...]
    gpu_type: tuple[GpuType, ...]
    gpus: np.ndarray
    cpus: np.ndarray
    memory_mb: np.ndarray

    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    def capacity(self) -> dict[GpuType, int]:
        out: dict[GpuType, int] = {}
        for t, g in zip(self.gpu_type, self.gpus.tolist(), strict=True):
            out[t] = out.get(t, 0) + int(g)
        return out


@dataclass(frozen=True, eq=False)
class ProblemContext:
    """The problem plus the indexes the round, placement and action stages share."""

    problem: AllocationProblem
    jobs: tuple[ManagedJob, ...]
    """One per problem row, in row order."""
    running: np.ndarray
    """Per row: the job holds GPUs now (RUNNING or SUSPENDED)."""
    pool: NodePool
    excluded: tuple[tuple[ManagedJob, Assignment], ...]
    """Jobs left out of the problem (unmanaged, unschedulable, in transition), with why."""
    steps_known: np.ndarray
    """Per row: the job told its step count (else ``steps_remaining`` is a stand-in)."""

    @property
    def row(self) -> dict[JobId, int]:
        return {j: i for i, j in enumerate(self.problem.job_ids)}

    @property
    def col(self) -> dict[Cell, int]:
        return {c: i for i, c in enumerate(self.problem.cells)}


def _per_node_usage(jobs: tuple[ManagedJob, ...]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """GPUs, CPUs and memory each node gives to managed jobs that hold resources now."""
    gpus: dict[str, int] = {}
    cpus: dict[str, int] = {}
    mem: dict[str, int] = {}
    for mj in jobs:
        job = mj.job
        if not job.state.active or not job.nodes:
            continue
        k = len(job.nodes)
        for name in job.nodes:
            gpus[name] = gpus.get(name, 0) + job.gpus_per_node
            cpus[name] = cpus.get(name, 0) + -(-job.cpus // k)
            mem[name] = mem.get(name, 0) + -(-job.memory_mb // k)
    return gpus, cpus, mem


def build_pool(cluster: Cluster, managed_holding: tuple[ManagedJob, ...]) -> NodePool:
    """Schedulable GPU nodes (sorted by name) with unmanaged usage taken out.

    Unmanaged usage on a node = observed usage minus what the managed jobs on it hold.
    """
    gpus_m, cpus_m, mem_m = _per_node_usage(managed_holding)
    nodes = [n for n in cluster.nodes if n.gpus > 0 and n.gpu_type and n.state.schedulable]
    nodes.sort(key=lambda n: n.name)
    names = tuple(n.name for n in nodes)

    def left(total: str, used: str, managed: Mapping[str, int]) -> np.ndarray:
        have = np.array([getattr(n, total) for n in nodes], dtype=np.int64)
        other = np.array([getattr(n, used) for n in nodes], dtype=np.int64)
        if managed:
            other -= np.array([managed.get(name, 0) for name in names], dtype=np.int64)
        return np.maximum(have - np.maximum(other, 0), 0)

    return NodePool(
        names=names,
        gpu_type=tuple(str(n.gpu_type) for n in nodes),
        gpus=left("gpus", "gpus_used", gpus_m),
        cpus=left("cpus", "cpus_used", cpus_m),
        memory_mb=left("memory_mb", "memory_used_mb", mem_m),
    )


def _exclusion(mj: ManagedJob, capacity: Mapping[GpuType, int]) -> Assignment | None:
    """Why a job stays out of the problem, or None when it belongs in it.

    ``capacity`` counts every GPU on schedulable nodes: a job that only waits for unmanaged jobs to finish
    is not unschedulable.
    """
    job = mj.job
    if not mj.hints.managed:
        return Assignment(job.job_id, Reason.UNMANAGED, detail="hints say managed=no")
    if job.state in RUNNING_STATES:
        return None
    if job.state not in PENDING_STATES:
        return Assignment(job.job_id, Reason.WAITING, detail=f"job is {job.state.value}; decided once it settles")
    if not any(c.throughput > 0 and c.cell.gpus <= capacity.get(c.cell.gpu_type, 0) for c in mj.candidates):
        types = ", ".join(f"{t}:{n}" for t, n in sorted(capacity.items())) or "none"
        why = "no candidate configuration" if not mj.candidates else "no candidate fits the cluster"
        return Assignment(job.job_id, Reason.UNSCHEDULABLE, detail=f"{why} (usable GPUs {types})")
    return None


def requested_cell(mj: ManagedJob) -> tuple[GpuType | None, int | None]:
    """The user's own request: first hinted GPU type (else Slurm's) and hinted GPU count (else Slurm's)."""
    gpu_type = mj.hints.gpu_types[0] if mj.hints.gpu_types else mj.job.gpu_type
    gpus = mj.hints.gpus if mj.hints.gpus is not None else (mj.job.gpus or None)
    return gpu_type, gpus


def _match(by_shape: Mapping[tuple[GpuType, int], int], gpu_type: GpuType | None, gpus: int | None) -> int:
    if gpu_type is None or gpus is None:
        return -1
    return by_shape.get((gpu_type, gpus), -1)


def build_problem(inp: TickInput, states: Mapping[JobId, JobState]) -> ProblemContext:
    """The AllocationProblem for this tick; ``states`` must already hold this tick's attained time."""
    ids = [mj.job.job_id for mj in inp.jobs]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValidationError("jobs", dup, "each job id at most once in a tick's input", "tick input")
    holding = tuple(mj for mj in inp.jobs if mj.hints.managed and mj.job.state.active)
    pool = build_pool(inp.cluster, holding)
    raw_capacity = pool.capacity()
    total = inp.cluster.gpus_by_type()
    rows: list[ManagedJob] = []
    excluded: list[tuple[ManagedJob, Assignment]] = []
    for mj in sorted(inp.jobs, key=lambda m: (m.job.submit_time, m.job.job_id)):
        why = _exclusion(mj, total)
        if why is None:
            rows.append(mj)
        else:
            excluded.append((mj, why))
    # GPUs of managed jobs in transition (e.g. COMPLETING) are not the round's to give.
    busy: dict[GpuType, int] = {}
    for mj, _ in excluded:
        if mj.hints.managed and mj.job.state.active and mj.job.gpu_type:
            busy[mj.job.gpu_type] = busy.get(mj.job.gpu_type, 0) + mj.job.gpus
    capacity = {t: max(0, n - busy.get(t, 0)) for t, n in raw_capacity.items()}

    cells, throughput, table = _matrix(rows)
    by_shape: dict[tuple[GpuType, int], int] = {}
    for i, c in enumerate(cells):
        by_shape.setdefault((c.gpu_type, c.gpus), i)  # lowest stage count first (cells are sorted)
    return ProblemContext(
        problem=_assemble(inp, states, rows, cells, throughput, capacity, table, by_shape),
        jobs=tuple(rows),
        running=np.array([mj.job.state in RUNNING_STATES for mj in rows], dtype=bool),
        pool=pool,
        excluded=tuple(excluded),
        steps_known=np.array([mj.hints.steps is not None for mj in rows], dtype=bool),
    )


CellKey = tuple[str, int, int]


@dataclass(frozen=True, eq=False)
class _Row:
    """One job's best candidate per Cell: keys, candidates (an object array) and their throughputs."""

    keys: tuple[CellKey, ...]
    candidates: np.ndarray
    throughput: np.ndarray


class _RowMemo:
    """Each job's ``_Row``, remembered by the identity of the job's candidates tuple.

    Candidates are computed once per job and handed over unchanged tick after tick (the daemon's and the
    simulator's caches), while 2,000 jobs x 20 candidates would otherwise be re-keyed every tick. Keyed by
    ``id`` with the tuple itself kept alive, so a hit is always the same object: a pure memo, decisions do not
    depend on it.
    """

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._rows: dict[int, tuple[tuple[Candidate, ...], _Row]] = {}

    def __call__(self, candidates: tuple[Candidate, ...]) -> _Row:
        hit = self._rows.get(id(candidates))
        if hit is not None and hit[0] is candidates:
            return hit[1]
        best: dict[CellKey, Candidate] = {}
        for cand in candidates:
            key = (cand.cell.gpu_type, cand.cell.gpus, cand.cell.stages)
            old = best.get(key)
            if old is None or cand.throughput > old.throughput:
                best[key] = cand
        cands = np.empty(len(best), dtype=object)
        cands[:] = list(best.values())
        thr = np.array([max(c.throughput, 0.0) for c in best.values()], dtype=float)
        row = _Row(tuple(best), cands, thr)
        if len(self._rows) >= self.limit:
            self._rows.clear()
        self._rows[id(candidates)] = (candidates, row)
        return row


_row_of = _RowMemo()


def _matrix(rows: list[ManagedJob]) -> tuple[tuple[Cell, ...], np.ndarray, tuple[tuple[Candidate | None, ...], ...]]:
    """Columns (sorted Cells), the throughput matrix and the candidate behind each entry (best if repeated).

    Cells are keyed by plain tuples: hashing and comparing the dataclass itself costs several times more.
    """
    lines = [_row_of(tuple(mj.candidates)) for mj in rows]
    order = sorted(set().union(*(r.keys for r in lines)))
    col = {k: i for i, k in enumerate(order)}
    throughput = np.zeros((len(rows), len(order)))
    table = np.full((len(rows), len(order)), None, dtype=object)
    for j, r in enumerate(lines):
        cols = np.fromiter(map(col.__getitem__, r.keys), dtype=np.int64, count=len(r.keys))
        throughput[j, cols] = r.throughput
        table[j, cols] = r.candidates
    return tuple(Cell(*k) for k in order), throughput, tuple(map(tuple, table))


def _assemble(
    inp: TickInput,
    states: Mapping[JobId, JobState],
    rows: list[ManagedJob],
    cells: tuple[Cell, ...],
    throughput: np.ndarray,
    capacity: Mapping[GpuType, int],
    table: tuple[tuple[Candidate | None, ...], ...],
    by_shape: Mapping[tuple[GpuType, int], int],
) -> AllocationProblem:
    now = inp.now
    n = len(rows)
    requested = np.array([_match(by_shape, *requested_cell(mj)) for mj in rows], dtype=np.int64).reshape(n)
    col_of = {c: i for i, c in enumerate(cells)}
    current = np.array([current_column(mj, states.get(mj.job.job_id), by_shape, col_of) for mj in rows], dtype=np.int64)
    steps = np.array([np.nan if mj.hints.steps is None else mj.hints.steps - mj.steps_done for mj in rows])
    known = steps[~np.isnan(steps)]
    # Jobs without a step count look as long as the longest known one: finish-time policies stay finite.
    steps = np.where(np.isnan(steps), known.max() if known.size else 1.0, np.maximum(steps, 0.0))
    ar = np.arange(n)
    # The requested configuration's throughput for every job; policies enforce it for guaranteed jobs only.
    sla = np.where(requested >= 0, throughput[ar, np.maximum(requested, 0)], 0.0) if n else np.zeros(0)
    return AllocationProblem(
        job_ids=tuple(mj.job.job_id for mj in rows),
        cells=cells,
        throughput=throughput,
        capacity=dict(capacity),
        weights=np.ones(n),
        steps_remaining=steps.reshape(n),
        time_since_start=np.array([max(0.0, now - mj.job.submit_time) for mj in rows]).reshape(n),
        attained_time=np.array([_attained(states, mj.job.job_id) for mj in rows]).reshape(n),
        submit_time=np.array([mj.job.submit_time for mj in rows]).reshape(n),
        deadline=np.array([np.inf if mj.hints.deadline is None else mj.hints.deadline - now for mj in rows]).reshape(n),
        accounts=tuple(mj.job.account for mj in rows),
        account_weights=dict(inp.config.account_weights) or None,
        job_class=tuple(mj.hints.job_class for mj in rows),
        sla_throughput=sla.reshape(n),
        requested=requested,
        current=current,
        cost_per_gpu_hour=dict(inp.config.cost_per_gpu_hour) or None,
        candidates=table,
        steps_known=np.array([mj.hints.steps is not None for mj in rows], dtype=bool).reshape(n),
        time_limit_left=np.array([_limit_left(mj, now) for mj in rows], dtype=float).reshape(n),
    )


def _limit_left(mj: ManagedJob, now: float) -> float:
    """Seconds until the job's Slurm time limit ends it (from its start, else from now); inf without one."""
    limit = mj.job.time_limit_s
    if not limit:
        return np.inf
    start = mj.job.start_time if mj.job.start_time is not None else now
    return max(0.0, start + limit - now)


def _attained(states: Mapping[JobId, JobState], job_id: JobId) -> float:
    st = states.get(job_id)
    return st.attained_s if st else 0.0


def current_column(
    mj: ManagedJob, st: JobState | None, by_shape: Mapping[tuple[GpuType, int], int], col_of: Mapping[Cell, int]
) -> int:
    """Column a running job runs in: its remembered Cell if still a column, else its Slurm GPU shape."""
    if mj.job.state not in RUNNING_STATES:
        return -1
    if st is not None and st.current is not None and st.current.cell is not None:
        col = col_of.get(st.current.cell)
        if col is not None:
            return col
    return _match(by_shape, mj.job.gpu_type, mj.job.gpus)
