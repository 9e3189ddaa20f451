"""Build the policy's AllocationProblem (and the node pool placement needs) from one tick's input.

The mechanism and every policy see the same numbers: columns are the distinct Cells over all jobs'
candidates, capacity is what managed jobs may use (unmanaged jobs' GPUs taken out first), and the
per-job vectors carry attained time, remaining steps and SLAs in the units of the job's own candidates.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter, is_not

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
ACTIVE_STATES = tuple(s for s in SlurmState if s.active)
"""``JobState.active``'s states (a job holds GPUs now), for a membership test without the property's call."""


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
        """GPUs per type (a new dict each call; worked out once per pool: ``build_pool`` hands out the same pool on
        most ticks)."""
        return dict(self._capacity)

    def free_lists(self) -> tuple[list[int], list[int], list[int]]:
        """Free GPUs, CPUs and memory per node as new lists, for placement to consume: copies of lists read from
        the arrays once per pool (a list's copy costs a tenth of reading the array; issue 27, twenty-second
        session)."""
        g, c, m = self._lists
        return g.copy(), c.copy(), m.copy()

    @functools.cached_property
    def _capacity(self) -> dict[GpuType, int]:
        """``capacity``'s answer, never handed out (only copies): the pool is frozen, and ``build_pool``'s arrays
        are read only."""
        gpus = self.gpus
        return {t: int(gpus[idx].sum()) for t, idx in self.by_type().items()}

    @functools.cached_property
    def _lists(self) -> tuple[list[int], list[int], list[int]]:
        """``free_lists``' lists, never handed out (only copies)."""
        return self.gpus.tolist(), self.cpus.tolist(), self.memory_mb.tolist()


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
    the daemon's memo of unchanged jobs), and the sums are of integers, so the order does not matter. The array
    is carried too, and a copy changed at the rows of those jobs' nodes (a tick's few), where it was rebuilt from
    three lists of every node before (issue 27, twenty-second session).
    """
    last = _last_usage.value  # read once: another thread may replace it, never change it
    held = list(map(_JOB, jobs))
    now = dict(zip(map(id, held), held, strict=True))  # holds the jobs: an id stays theirs while either dict lives
    if last is None or last[0] is not index or len(now) != len(jobs):
        before: dict[int, Job] = {}
        usage = np.zeros((len(index), 3), dtype=np.int64)
    else:
        before, usage = last[1], last[2]
        if now.keys() == before.keys():
            return usage
        usage = usage.copy()
    for i in before.keys() - now.keys():
        _add_usage(usage, before[i], index, -1)
    for i in now.keys() - before.keys():
        _add_usage(usage, now[i], index, 1)
    usage.setflags(write=False)  # handed out again on the next call with the same jobs: nobody may write to it
    _last_usage.value = (index, now, usage)
    return usage


_JOB, _JOB_ID = attrgetter("job"), attrgetter("job.job_id")
_SUBMIT_ORDER = attrgetter("job.submit_time", "job.job_id")
"""A row's place: ``(submit time, job id)``, read in C (``build_problem`` sorts every job every tick)."""


class _LastUsage:
    """``(index, jobs by id, their per-node array)`` of the last ``_per_node_usage`` call.

    A pure memo: never changed in place (a new value per call that changed the jobs); the array is read only."""

    value: tuple[Mapping[str, int], dict[int, Job], np.ndarray] | None = None


_last_usage = _LastUsage()


def _add_usage(usage: np.ndarray, job: Job, index: Mapping[str, int], sign: int) -> None:
    """Add (``sign`` 1) or take out (-1) one job's share of each of its pool nodes (rows of ``usage``)."""
    if not job.state.active or not job.nodes:
        return
    k = len(job.nodes)
    share = (sign * job.gpus_per_node, sign * -(-job.cpus // k), sign * -(-job.memory_mb // k))
    for name in job.nodes:
        i = index.get(name)
        if i is not None:
            usage[i] += share


def build_pool(cluster: Cluster, managed_holding: tuple[ManagedJob, ...]) -> NodePool:
    """Schedulable GPU nodes (sorted by name) with unmanaged usage taken out.

    Unmanaged usage on a node = observed usage minus what the managed jobs on it hold.
    """
    nodes = _node_table(cluster)
    names, gpu_type, table = nodes.names, nodes.gpu_type, nodes.table
    have, other = table[:, :3], table[:, 3:] - _per_node_usage(managed_holding, _layout(names, gpu_type).index)
    left = np.maximum(have - np.maximum(other, 0), 0)
    last = _last_pool.value  # read once: another thread may replace it, never change it
    if last is not None and last[1].names is names and last[1].gpu_type is gpu_type and np.array_equal(left, last[0]):
        return last[1]
    pool = NodePool(
        names=names,
        gpu_type=gpu_type,
        gpus=_read_only(np.ascontiguousarray(left[:, 0])),
        cpus=_read_only(np.ascontiguousarray(left[:, 1])),
        memory_mb=_read_only(np.ascontiguousarray(left[:, 2])),
    )
    _last_pool.value = (left, pool)
    return pool


class _LastPool:
    """``(the nodes' numbers, NodePool)`` of the previous ``build_pool``: what managed jobs may use changes only
    with unmanaged work (the managed jobs' own usage is not taken out), so most ticks build the same pool, and
    handing out the very same value lets what the pool works out once (its capacity, placement's free lists)
    answer (issue 27, twenty-second session). A pure memo: the pool's arrays are read only."""

    value: tuple[np.ndarray, NodePool] | None = None


_last_pool = _LastPool()


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


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
        # the positions whose Node is not the very same object, compared in C (every node, every tick)
        changed = list(compress(range(len(nodes)), map(is_not, last.nodes, nodes)))
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
    ids = list(map(_JOB_ID, inp.jobs))
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValidationError("jobs", dup, "each job id at most once in a tick's input", "tick input")
    holding = tuple([mj for mj in inp.jobs if mj.hints.managed and mj.job.state in ACTIVE_STATES])
    pool = build_pool(inp.cluster, holding)
    raw_capacity = pool.capacity()
    total = dict(_node_table(inp.cluster).total)  # the pool's memo: no second pass over every node
    rows: list[ManagedJob] = []
    excluded: list[tuple[ManagedJob, Assignment]] = []
    for mj in sorted(inp.jobs, key=_SUBMIT_ORDER):
        if mj.job.state in RUNNING_STATES and mj.hints.managed:  # ``_exclusion``'s first answer: most rows
            rows.append(mj)
            continue
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
    by_shape = _shapes(cells)
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
    config = inp.config
    # A row is a job's fixed part (``_fixed_row``: what its Job, hints and candidates say, kept between ticks while
    # they are the same objects) and the few numbers that move with the clock and progress, done below as array
    # operations over all rows at once (the same float operations, in the same order, as one row at a time).
    col_of = column_index(cells)
    fixed = _fixed_rows_of(rows, by_shape)
    got = [states.get(mj.job.job_id) for mj in rows]
    col_ids = column_ids(cells)
    current = _current_columns(rows, got, by_shape, col_of, col_ids)
    (ids, requested, unit, submit, accounts, job_class, known_steps, steps_total, deadline_at, limit, started,
     least_gpus) = zip(*fixed, strict=True) if fixed else ((),) * 12  # fmt: skip
    requested = np.array(requested, dtype=np.int64).reshape(n)
    current = np.array(current, dtype=np.int64).reshape(n)
    # Steps in the units of the job's candidates' throughput: a model job's candidates count samples/s, so its
    # steps count global batches (as the simulator's workloads convert them); a table job's count steps/s.
    steps = (np.array(steps_total, dtype=float) - np.array([mj.steps_done for mj in rows], dtype=float)).reshape(n)
    steps = steps * np.array(unit, dtype=float)
    known = steps[~np.isnan(steps)]
    # Jobs without a step count look as long as the longest known one: finish-time policies stay finite.
    steps = np.where(np.isnan(steps), known.max() if known.size else 1.0, np.maximum(steps, 0.0))
    ar = np.arange(n)
    # The requested configuration's throughput for every job; policies enforce it for guaranteed jobs only.
    sla = np.where(requested >= 0, throughput[ar, np.maximum(requested, 0)], 0.0) if n else np.zeros(0)
    submit_s = np.array(submit).reshape(n)
    deadline = np.array(deadline_at, dtype=float).reshape(n)  # inf without one: inf - now stays inf
    limit_s = np.array(limit, dtype=float).reshape(n)  # nan without one
    start = np.array(started, dtype=float).reshape(n)  # nan: not started, counted from now
    limit_left = np.where(
        np.isnan(limit_s), np.inf, np.maximum(np.where(np.isnan(start), now, start) + limit_s - now, 0.0)
    )
    cost, recent = _restart_costs(got, current, requested, least_gpus, cells, config, now)
    return AllocationProblem(
        job_ids=tuple(ids),
        cells=cells,
        throughput=throughput,
        capacity=dict(capacity),
        weights=np.ones(n),
        steps_remaining=steps.reshape(n),
        time_since_start=np.maximum(now - submit_s, 0.0),
        attained_time=np.array([st.attained_s if st else 0.0 for st in got], dtype=float).reshape(n),
        submit_time=submit_s,
        deadline=deadline - now,
        accounts=tuple(accounts),
        account_weights=dict(config.account_weights) or None,
        job_class=tuple(job_class),
        sla_throughput=sla.reshape(n),
        requested=requested,
        current=current,
        cost_per_gpu_hour=dict(config.cost_per_gpu_hour) or None,
        candidates=table,
        steps_known=np.array(known_steps, dtype=bool).reshape(n),
        time_limit_left=limit_left.reshape(n),
        restart_cost_s=cost,
        moved_recently=recent,
        finished_lengths=np.array(finished, dtype=float) if finished else None,
    )


def _restart_costs(
    got: list[JobState | None],
    current: np.ndarray,
    requested: np.ndarray,
    least_gpus: tuple[int, ...],
    cells: tuple[Cell, ...],
    config: TickConfig,
    now: float,
) -> tuple[np.ndarray, np.ndarray]:
    """What one restart costs each job end to end (``TickConfig.full_cost_for`` its size: its current column's,
    else its requested one's, else its own GPU count), doubled when a decision moved it within ``move_hold_s``
    (hysteresis: a move back must pay for both), and that flag."""
    n = len(got)
    col = np.where(current >= 0, current, requested).tolist()
    sizes = [cells[c].gpus if c >= 0 else g for c, g in zip(col, least_gpus, strict=True)]
    per_size = {g: config.full_cost_for(g) for g in set(sizes)}
    base = np.array([per_size[g] for g in sizes], dtype=float).reshape(n)
    moved = np.array([np.nan if st is None or st.moved_at is None else st.moved_at for st in got], dtype=float)
    hold = config.move_hold_s
    recent = (now - moved.reshape(n) < hold) if hold > 0 else np.zeros(n, dtype=bool)  # nan: never moved
    return base * np.where(recent, 2.0, 1.0), recent


def _shapes(cells: tuple[Cell, ...]) -> dict[tuple[GpuType, int], int]:
    """``{(GPU type, GPUs): first column of that shape}`` (lowest stage count first: cells are sorted), kept while
    the columns are the same tuple, so that the rows' memo (``_fixed_row``) can hold on to it (do not change it)."""
    last = _last_shapes.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is cells:
        return last[1]
    by_shape: dict[tuple[GpuType, int], int] = {}
    for i, c in enumerate(cells):
        by_shape.setdefault((c.gpu_type, c.gpus), i)
    _last_shapes.value = (cells, by_shape)
    return by_shape


class _LastShapes:
    """``(cells, by_shape)`` of the previous tick (``_shapes``): a pure memo keyed by the columns' identity."""

    value: tuple[tuple[Cell, ...], dict[tuple[GpuType, int], int]] | None = None


_last_shapes = _LastShapes()


def _fixed_rows_of(rows: list[ManagedJob], by_shape: Mapping[tuple[GpuType, int], int]) -> list[tuple]:
    """``[_fixed_row(mj, by_shape) for mj in rows]``, with the memo's hit read in place (every row, every tick)."""
    memo = _fixed_rows.get
    out = []
    for mj in rows:
        job = mj.job
        hit = memo(job.job_id)
        if hit is not None and hit[0] is job and hit[1] is mj.hints and hit[2] is mj.candidates and hit[3] is by_shape:
            out.append(hit[4])
        else:
            out.append(_fixed_row(mj, by_shape))
    return out


def _current_columns(
    rows: list[ManagedJob],
    got: list[JobState | None],
    by_shape: Mapping[tuple[GpuType, int], int],
    col_of: Mapping[Cell, int],
    ids: Mapping[int, int],
) -> list[int]:
    """``current_column`` of every row, with its first answer (a running job's remembered Cell is the column's own
    object, found by its id) read in place: every running row, every tick."""
    out = []
    for mj, st in zip(rows, got, strict=True):
        cur = st.current if st is not None else None
        cell = cur.cell if cur is not None else None
        col = ids.get(id(cell)) if cell is not None and mj.job.state in RUNNING_STATES else None
        out.append(col if col is not None else current_column(mj, st, by_shape, col_of, ids))
    return out


def _fixed_row(mj: ManagedJob, by_shape: Mapping[tuple[GpuType, int], int]) -> tuple:
    """The part of a job's problem row that its Job, hints and candidates fix: id, requested column, step unit,
    submit time, account, class, steps known, total steps (nan: unknown), deadline (inf: none), time limit (nan:
    none), start time (nan: not started) and its own GPU count (at least 1). Kept per job while those objects
    and the columns' shapes are the very same ones: a kept job asks every tick, and they rarely change."""
    job, hints, cands = mj.job, mj.hints, mj.candidates
    hit = _fixed_rows.get(job.job_id)
    if hit is not None and hit[0] is job and hit[1] is hints and hit[2] is cands and hit[3] is by_shape:
        return hit[4]
    row = (
        job.job_id, _match(by_shape, *requested_cell(mj)), _unit_per_step(mj), job.submit_time, job.account,
        hints.job_class, hints.steps is not None, np.nan if hints.steps is None else hints.steps,
        np.inf if hints.deadline is None else hints.deadline, job.time_limit_s or np.nan,
        np.nan if job.start_time is None else job.start_time, max(1, job.gpus),
    )  # fmt: skip
    if len(_fixed_rows) > 20_000:
        _fixed_rows.clear()
    _fixed_rows[job.job_id] = (job, hints, cands, by_shape, row)  # holds them: their ids stay theirs meanwhile
    return row


_fixed_rows: dict[JobId, tuple] = {}
"""``_fixed_row``'s memo: a pure function of the objects it holds (by identity), bounded."""


class _LastCols:
    """``(cells, {cell: column}, {id(cell): column})`` of the previous tick: the columns are the very same tuple
    on most ticks (``_DenseRows.cells``). A pure memo keyed by the tuple's identity (kept alive with it)."""

    value: tuple[tuple[Cell, ...], dict[Cell, int], dict[int, int]] | None = None


_last_cols = _LastCols()


def column_index(cells: tuple[Cell, ...]) -> dict[Cell, int]:
    """``{cell: column}`` of ``cells``, kept while the columns are the same tuple (do not change it)."""
    return _column_maps(cells)[1]


def column_ids(cells: tuple[Cell, ...]) -> dict[int, int]:
    """``{id(cell): column}`` of ``cells``' own Cell objects (do not change it). The assignments and the states'
    per-Cell times hold these very objects from tick to tick, and finding one by its id skips hashing it (a
    dataclass's hash is a Python call); a Cell found this way is the column's own object, as the columns hold
    theirs alive. Any other Cell, equal or not, is looked up in ``column_index``."""
    return _column_maps(cells)[2]


def _column_maps(cells: tuple[Cell, ...]) -> tuple[tuple[Cell, ...], dict[Cell, int], dict[int, int]]:
    last = _last_cols.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is cells:
        return last
    out = (cells, {c: i for i, c in enumerate(cells)}, {id(c): i for i, c in enumerate(cells)})
    _last_cols.value = out
    return out


def _unit_per_step(mj: ManagedJob) -> float:
    """Samples per training step of a job whose candidates count samples/s (its plan's global batch), else 1."""
    if mj.hints.global_batch:
        return float(mj.hints.global_batch)
    return row_of(mj.candidates).plan_batch  # the candidates' first plan: read once per candidates tuple


def current_column(
    mj: ManagedJob,
    st: JobState | None,
    by_shape: Mapping[tuple[GpuType, int], int],
    col_of: Mapping[Cell, int],
    ids: Mapping[int, int] | None = None,
) -> int:
    """Column a running job runs in: its remembered Cell if still a column, else its Slurm GPU shape.
    ``ids`` (``column_ids``) finds a Cell that is the column's own object without hashing it."""
    if mj.job.state not in RUNNING_STATES:
        return -1
    if st is not None and st.current is not None and st.current.cell is not None:
        cell = st.current.cell
        col = ids.get(id(cell)) if ids is not None else None
        if col is None:
            col = col_of.get(cell)
        if col is not None:
            return col
    return _match(by_shape, mj.job.gpu_type, mj.job.gpus)
