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
    Job,
    JobId,
    Node,
    Reason,
    ValidationError,
)
from slurmplan.domain import JobState as SlurmState
from slurmplan.mechanism.columns import matrix, row_of
from slurmplan.tick_types import JobState, ManagedJob, TickConfig, TickInput

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
        """Node name -> position: the remembered layout's own dict (read only), the same object while the node
        list stays, so that placement can remember per-job rows by its identity."""
        return _layout(self.names, self.gpu_type).index

    def by_type(self) -> dict[GpuType, np.ndarray]:
        """Positions of each type's nodes, types in the order their first node comes."""
        return _layout(self.names, self.gpu_type).by_type

    def capacity(self) -> dict[GpuType, int]:
        gpus = self.gpus
        return {t: int(gpus[idx].sum()) for t, idx in self.by_type().items()}


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


@dataclass(frozen=True, eq=False)
class _Layout:
    index: dict[str, int]
    by_type: dict[GpuType, np.ndarray]


_layouts: dict[tuple[tuple[str, ...], tuple[GpuType, ...]], _Layout] = {}


def _layout(names: tuple[str, ...], gpu_type: tuple[GpuType, ...]) -> _Layout:
    """Name -> position and type -> positions of a pool's nodes, remembered: the node list rarely changes.

    A pure memo keyed by the names and types themselves (an equal key gives an equal layout).
    """
    last = _last_layout.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is names and last[1] is gpu_type:
        return last[2]  # the same tuples as the call before (``_NodeTable``'s): no hash of every node's name
    key = (names, gpu_type)
    hit = _layouts.get(key)
    if hit is None:
        groups: dict[GpuType, list[int]] = {}
        for i, t in enumerate(gpu_type):
            groups.setdefault(t, []).append(i)
        hit = _Layout(
            {name: i for i, name in enumerate(names)},
            {t: np.array(idx, dtype=np.int64) for t, idx in groups.items()},
        )
        if len(_layouts) > 64:
            _layouts.clear()
        _layouts[key] = hit
    _last_layout.value = (names, gpu_type, hit)
    return hit


class _LastLayout:
    """``(names, gpu_type, layout)`` of the last ``_layout`` call, for a lookup by identity: a tick asks five
    times or more for the same pool, and hashing its two tuples of hundreds of names cost more than the rest."""

    value: tuple[tuple[str, ...], tuple[GpuType, ...], _Layout] | None = None


_last_layout = _LastLayout()


def _per_node_usage(jobs: tuple[ManagedJob, ...], index: Mapping[str, int]) -> np.ndarray:
    """GPUs, CPUs and memory (columns) each pool node (rows) gives to managed jobs that hold resources now.

    Nodes outside the pool are skipped. Carried from the previous call by the jobs (``Job`` values, by identity)
    that came and went: a tick's jobs are mostly the very same values as the tick before's (the simulator, and
    the daemon's memo of unchanged jobs), and the sums are of integers, so the order does not matter.
    """
    last = _last_usage.value  # read once: another thread may replace it, never change it
    now = {id(mj.job): mj.job for mj in jobs}  # holds the jobs: an id stays theirs while either dict lives
    if last is None or last[0] is not index or len(now) != len(jobs):
        before: dict[int, Job] = {}
        usage = ([0] * len(index), [0] * len(index), [0] * len(index))
    else:
        before, usage = last[1], last[2]
        if now.keys() == before.keys():
            return last[3]
        usage = (list(usage[0]), list(usage[1]), list(usage[2]))
    for i in before.keys() - now.keys():
        _add_usage(usage, before[i], index, -1)
    for i in now.keys() - before.keys():
        _add_usage(usage, now[i], index, 1)
    out = np.array(usage, dtype=np.int64).T.reshape(len(index), 3)
    out.setflags(write=False)  # handed out again on the next call with the same jobs: nobody may write to it
    _last_usage.value = (index, now, usage, out)
    return out


class _LastUsage:
    """``(index, jobs by id, the three per-node lists, their array)`` of the last ``_per_node_usage`` call.

    A pure memo: never changed in place (a new value per call that changed the jobs); the array is read only."""

    value: tuple[Mapping[str, int], dict[int, Job], tuple[list[int], list[int], list[int]], np.ndarray] | None = None


_last_usage = _LastUsage()


def _add_usage(usage: tuple[list[int], list[int], list[int]], job: Job, index: Mapping[str, int], sign: int) -> None:
    """Add (``sign`` 1) or take out (-1) one job's share of each of its pool nodes."""
    if not job.state.active or not job.nodes:
        return
    gpus, cpus, mem = usage
    k = len(job.nodes)
    gpn, cpn, mpn = sign * job.gpus_per_node, sign * -(-job.cpus // k), sign * -(-job.memory_mb // k)
    for name in job.nodes:
        i = index.get(name)
        if i is not None:
            gpus[i] += gpn
            cpus[i] += cpn
            mem[i] += mpn


def build_pool(cluster: Cluster, managed_holding: tuple[ManagedJob, ...]) -> NodePool:
    """Schedulable GPU nodes (sorted by name) with unmanaged usage taken out.

    Unmanaged usage on a node = observed usage minus what the managed jobs on it hold.
    """
    nodes = _node_table(cluster)
    names, gpu_type, table = nodes.names, nodes.gpu_type, nodes.table
    have, other = table[:, :3], table[:, 3:] - _per_node_usage(managed_holding, _layout(names, gpu_type).index)
    left = np.maximum(have - np.maximum(other, 0), 0)
    return NodePool(
        names=names,
        gpu_type=gpu_type,
        gpus=np.ascontiguousarray(left[:, 0]),
        cpus=np.ascontiguousarray(left[:, 1]),
        memory_mb=np.ascontiguousarray(left[:, 2]),
    )


@dataclass(frozen=True, eq=False)
class _NodeTable:
    """The pool's nodes (schedulable GPU nodes, sorted by name) and their six numbers, for one ``cluster.nodes``.

    ``table`` rows: GPUs, CPUs, memory, and the same three in use. ``pos`` maps a position in ``cluster.nodes`` to
    its row (-1: not in the pool). ``total`` is ``cluster.gpus_by_type()``.
    """

    nodes: tuple[Node, ...]
    names: tuple[str, ...]
    gpu_type: tuple[GpuType, ...]
    table: np.ndarray
    pos: tuple[int, ...]
    total: dict[GpuType, int]


def _static(n: Node) -> tuple:
    """What decides a node's place in the pool and its totals (its usage is the rest)."""
    return (n.name, n.state.schedulable, n.gpu_type, n.gpus, n.cpus, n.memory_mb)


class _LastNodes:
    """The previous tick's ``_NodeTable``: a tick usually changes the usage of a few nodes out of hundreds (the
    simulator and a daemon reading an unchanged node reuse its value), so only those rows are re-read.

    A pure memo: the table is rebuilt in full whenever a changed node differs in anything but its usage, and is
    never changed in place (a new table per tick that changed a node).
    """

    value: _NodeTable | None = None


_last_nodes = _LastNodes()


def _node_table(cluster: Cluster) -> _NodeTable:
    nodes = cluster.nodes
    last = _last_nodes.value  # read once: another thread may replace it, never change it
    if last is not None and last.nodes is nodes:
        return last  # the same tick asks twice (the pool, then the totals)
    if last is not None and len(last.nodes) == len(nodes):
        changed = [i for i, (a, b) in enumerate(zip(last.nodes, nodes, strict=True)) if a is not b]
        few = len(changed) <= len(nodes) // 4  # a daemon reads every node anew: then a full pass is as quick
        if few and all(_static(last.nodes[i]) == _static(nodes[i]) for i in changed):
            table = last.table
            if changed:
                table = table.copy()
                for i in changed:
                    row = last.pos[i]
                    if row >= 0:
                        n = nodes[i]
                        table[row, 3:] = (n.gpus_used, n.cpus_used, n.memory_used_mb)
            out = _NodeTable(nodes, last.names, last.gpu_type, table, last.pos, last.total)
            _last_nodes.value = out
            return out
    keep = sorted((i for i, n in enumerate(nodes) if n.gpus > 0 and n.gpu_type and n.state.schedulable),
                  key=lambda i: nodes[i].name)  # fmt: skip
    pos = [-1] * len(nodes)
    for row, i in enumerate(keep):
        pos[i] = row
    pool = [nodes[i] for i in keep]
    # One pass over the nodes for all six numbers (a 2-D array), not one per attribute.
    table = np.array(
        [(n.gpus, n.cpus, n.memory_mb, n.gpus_used, n.cpus_used, n.memory_used_mb) for n in pool], dtype=np.int64
    ).reshape(len(pool), 6)
    out = _NodeTable(
        nodes,
        tuple(n.name for n in pool),
        tuple(str(n.gpu_type) for n in pool),
        table,
        tuple(pos),
        cluster.gpus_by_type(),
    )
    _last_nodes.value = out
    return out


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


def build_problem(inp: TickInput, states: Mapping[JobId, JobState], finished: tuple[float, ...] = ()) -> ProblemContext:
    """The AllocationProblem for this tick; ``states`` must already hold this tick's attained time."""
    ids = [mj.job.job_id for mj in inp.jobs]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValidationError("jobs", dup, "each job id at most once in a tick's input", "tick input")
    holding = tuple(mj for mj in inp.jobs if mj.hints.managed and mj.job.state.active)
    pool = build_pool(inp.cluster, holding)
    raw_capacity = pool.capacity()
    total = dict(_node_table(inp.cluster).total)  # the pool's memo: no second pass over every node
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

    cells, throughput, table = matrix(rows)
    by_shape: dict[tuple[GpuType, int], int] = {}
    for i, c in enumerate(cells):
        by_shape.setdefault((c.gpu_type, c.gpus), i)  # lowest stage count first (cells are sorted)
    return ProblemContext(
        problem=_assemble(inp, states, rows, cells, throughput, capacity, table, by_shape, finished),
        jobs=tuple(rows),
        running=np.array([mj.job.state in RUNNING_STATES for mj in rows], dtype=bool),
        pool=pool,
        excluded=tuple(excluded),
        steps_known=np.array([mj.hints.steps is not None for mj in rows], dtype=bool),
    )


def _assemble(
    inp: TickInput,
    states: Mapping[JobId, JobState],
    rows: list[ManagedJob],
    cells: tuple[Cell, ...],
    throughput: np.ndarray,
    capacity: Mapping[GpuType, int],
    table: tuple[tuple[Candidate | None, ...], ...],
    by_shape: Mapping[tuple[GpuType, int], int],
    finished: tuple[float, ...] = (),
) -> AllocationProblem:
    now = inp.now
    n = len(rows)
    # One pass over the jobs for every per-row number (``_row_values``), then one column each: twelve passes
    # over ~100 jobs every tick, each re-reading the same attributes, were most of this function's time.
    fixed = _RowFixed(states, by_shape, column_index(cells), cells, inp.config, now)
    values = [fixed.values(mj) for mj in rows]
    (ids, requested, current, unit, steps_raw, since, attained, submit, deadline, accounts, job_class, known_steps,
     limit_left, cost, recent) = zip(*values, strict=True) if values else ((),) * 15  # fmt: skip
    requested = np.array(requested, dtype=np.int64).reshape(n)
    current = np.array(current, dtype=np.int64).reshape(n)
    # Steps in the units of the job's candidates' throughput: a model job's candidates count samples/s, so its
    # steps count global batches (as the simulator's workloads convert them); a table job's count steps/s.
    steps = np.array(steps_raw) * np.array(unit)
    known = steps[~np.isnan(steps)]
    # Jobs without a step count look as long as the longest known one: finish-time policies stay finite.
    steps = np.where(np.isnan(steps), known.max() if known.size else 1.0, np.maximum(steps, 0.0))
    ar = np.arange(n)
    # The requested configuration's throughput for every job; policies enforce it for guaranteed jobs only.
    sla = np.where(requested >= 0, throughput[ar, np.maximum(requested, 0)], 0.0) if n else np.zeros(0)
    return AllocationProblem(
        job_ids=tuple(ids),
        cells=cells,
        throughput=throughput,
        capacity=dict(capacity),
        weights=np.ones(n),
        steps_remaining=steps.reshape(n),
        time_since_start=np.array(since).reshape(n),
        attained_time=np.array(attained).reshape(n),
        submit_time=np.array(submit).reshape(n),
        deadline=np.array(deadline).reshape(n),
        accounts=tuple(accounts),
        account_weights=dict(inp.config.account_weights) or None,
        job_class=tuple(job_class),
        sla_throughput=sla.reshape(n),
        requested=requested,
        current=current,
        cost_per_gpu_hour=dict(inp.config.cost_per_gpu_hour) or None,
        candidates=table,
        steps_known=np.array(known_steps, dtype=bool).reshape(n),
        time_limit_left=np.array(limit_left, dtype=float).reshape(n),
        restart_cost_s=np.array(cost, dtype=float).reshape(n),
        moved_recently=np.array(recent, dtype=bool).reshape(n),
        finished_lengths=np.array(finished, dtype=float) if finished else None,
    )


class _LastCols:
    """``(cells, {cell: column})`` of the previous tick: the columns are the very same tuple on most ticks
    (``_DenseRows.cells``). A pure memo keyed by the tuple's identity (kept alive with it)."""

    value: tuple[tuple[Cell, ...], dict[Cell, int]] | None = None


_last_cols = _LastCols()


def column_index(cells: tuple[Cell, ...]) -> dict[Cell, int]:
    """``{cell: column}`` of ``cells``, kept while the columns are the same tuple (do not change it)."""
    last = _last_cols.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is cells:
        return last[1]
    col_of = {c: i for i, c in enumerate(cells)}
    _last_cols.value = (cells, col_of)
    return col_of


@dataclass(frozen=True, eq=False)
class _RowFixed:
    """What every row of one tick's problem is computed against (``values``)."""

    states: Mapping[JobId, JobState]
    by_shape: Mapping[tuple[GpuType, int], int]
    col_of: Mapping[Cell, int]
    cells: tuple[Cell, ...]
    config: TickConfig
    now: float

    def values(self, mj: ManagedJob) -> tuple:
        """One job's problem row: id, requested and current column, step unit, steps left (nan: unknown), time
        since submit, attained time, submit time, time to deadline, account, class, steps known, time limit
        left, restart cost (``_restart_cost``) and moved recently."""
        job, hints, now = mj.job, mj.hints, self.now
        st = self.states.get(job.job_id)
        req = _match(self.by_shape, *requested_cell(mj))
        cur = current_column(mj, st, self.by_shape, self.col_of)
        cost, recent = self._restart_cost(mj, st, cur, req)
        return (
            job.job_id, req, cur, _unit_per_step(mj),
            np.nan if hints.steps is None else hints.steps - mj.steps_done,
            max(0.0, now - job.submit_time), st.attained_s if st else 0.0, job.submit_time,
            np.inf if hints.deadline is None else hints.deadline - now, job.account, hints.job_class,
            hints.steps is not None, _limit_left(mj, now), cost, recent,
        )  # fmt: skip

    def _restart_cost(self, mj: ManagedJob, st: JobState | None, cur: int, req: int) -> tuple[float, bool]:
        """What one restart costs the job end to end (``TickConfig.full_cost_for`` its size), doubled when a
        decision moved it within ``move_hold_s`` (hysteresis: a move back must pay for both), and that flag."""
        col = cur if cur >= 0 else req
        gpus = self.cells[col].gpus if col >= 0 else max(1, mj.job.gpus)
        moved = st.moved_at if st is not None else None
        hold = self.config.move_hold_s
        flag = moved is not None and hold > 0 and self.now - moved < hold
        return self.config.full_cost_for(gpus) * (2.0 if flag else 1.0), flag


def _unit_per_step(mj: ManagedJob) -> float:
    """Samples per training step of a job whose candidates count samples/s (its plan's global batch), else 1."""
    if mj.hints.global_batch:
        return float(mj.hints.global_batch)
    return row_of(mj.candidates).plan_batch  # the candidates' first plan: read once per candidates tuple


def _limit_left(mj: ManagedJob, now: float) -> float:
    """Seconds until the job's Slurm time limit ends it (from its start, else from now); inf without one."""
    limit = mj.job.time_limit_s
    if not limit:
        return np.inf
    start = mj.job.start_time if mj.job.start_time is not None else now
    return max(0.0, start + limit - now)


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
