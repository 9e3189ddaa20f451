"""Carry the scheduler's memory from one tick to the next: attained time, current configuration, arrivals.

Attained time is what makes Gavel's priorities work: every tick adds the time since the previous tick to each
running job, in total and for the Cell it runs in (since arrival, and since the priorities' last reset). Jobs no
longer in the input are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace

from slurmplan.domain import Assignment, Cell, JobId, Reason, frozen_from
from slurmplan.mechanism.problem import PENDING_STATES, RUNNING_STATES
from slurmplan.tick_types import JobState, ManagedJob, SchedulerState, TickInput

_FIELDS = frozenset(f.name for f in fields(JobState))


def evolve(st: JobState, **changes: object) -> JobState:
    """``dataclasses.replace`` for JobState, several times faster (it runs for every job, several times a tick).

    JobState is a frozen dataclass without ``__post_init__``, so a copy of its ``__dict__`` with the changes is
    the new value whole (``domain.frozen_from``).
    """
    if not changes.keys() <= _FIELDS:
        raise TypeError(f"JobState has no field(s) {sorted(set(changes) - _FIELDS)}")
    d = st.__dict__.copy()
    d.update(changes)
    return frozen_from(JobState, d)


def running_cell(mj: ManagedJob, st: JobState) -> Assignment:
    """The assignment a running job is under: the remembered one if Slurm still agrees, else what Slurm shows."""
    job = mj.job
    for a in (st.current, st.planned):
        if a is not None and a.cell is not None and a.cell.gpu_type == job.gpu_type and a.cell.gpus == job.gpus:
            if a.reason is Reason.KEPT and tuple(a.nodes) == tuple(job.nodes):
                return a
            return replace(a, reason=Reason.KEPT, nodes=tuple(job.nodes), gpus_per_node=job.gpus_per_node)
    shapes = sorted(
        (c for c in mj.candidates if c.cell.gpu_type == job.gpu_type and c.cell.gpus == job.gpus),
        key=lambda c: c.cell.stages,
    )
    cand = shapes[0] if shapes else None
    return Assignment(
        job.job_id,
        Reason.KEPT,
        cell=cand.cell if cand else Cell(job.gpu_type or "", job.gpus),
        plan=cand.plan if cand else None,
        nodes=tuple(job.nodes),
        gpus_per_node=job.gpus_per_node,
        throughput=cand.throughput if cand else 0.0,
        detail="running as Slurm started it",
    )


def advance(inp: TickInput, state: SchedulerState) -> dict[int, JobState]:
    """Per-job state at ``inp.now``: arrivals stamped, attained time added for running jobs, others dropped."""
    now = inp.now
    dt = max(0.0, now - state.last_tick) if state.last_tick is not None else 0.0
    out: dict[int, JobState] = {}
    for mj in inp.jobs:
        job = mj.job
        st = state.jobs.get(job.job_id) or JobState(first_seen=now)
        if st.first_seen is None:
            st = evolve(st, first_seen=now)
        if job.state not in RUNNING_STATES:
            reset = job.state in PENDING_STATES and (st.current is not None or st.signalled_at is not None)
            # it left its configuration (requeued): what was sent to start it before is no longer sent
            if reset:
                st = evolve(st, current=None, signalled_at=None, sent="", requeued_at=now if st.ran_on else None)
            out[job.job_id] = _requeue_wait_over(st, now, inp.config.requeue_delay_s)
            continue
        # ``min(dt, max(0.0, now - start))`` as conditionals that pick the same operand (two builtin calls a job)
        if job.start_time is None:
            ran = dt
        else:
            since = now - job.start_time
            since = since if since > 0.0 else 0.0
            ran = since if since < dt else dt
        # ``running_cell``'s first answer, read here: most running jobs are kept where they were the tick before
        a = st.current
        cell = a.cell if a is not None and a.reason is Reason.KEPT else None
        if (
            cell is None
            or cell.gpu_type != job.gpu_type
            or cell.gpus != job.gpus_per_node * job.node_count
            or (a.nodes is not job.nodes and a.nodes != job.nodes)
        ):
            a = running_cell(mj, st)
        # ``evolve(st, current=a, attained_s=..., attained_by_cell=..., epoch_by_cell=..., ran_on=...,
        # requeued_at=None)`` written out, with ``_plus``'s one-Cell case (the very Cell, the job's only key) in
        # place: every running job, every tick (``tests/mechanism/test_advance_steady.py`` compares the plain code)
        d = st.__dict__.copy()
        cell = a.cell
        if ran > 0 and cell is not None:
            by = st.attained_by_cell
            if len(by) == 1:
                [(key, value)] = by.items()
                d["attained_by_cell"] = {cell: value + ran} if key is cell else _plus(by, cell, ran)
            else:
                d["attained_by_cell"] = _plus(by, cell, ran)
            by = st.epoch_by_cell
            if len(by) == 1:
                [(key, value)] = by.items()
                d["epoch_by_cell"] = {cell: value + ran} if key is cell else _plus(by, cell, ran)
            else:
                d["epoch_by_cell"] = _plus(by, cell, ran)
        d["current"], d["attained_s"], d["requeued_at"] = a, st.attained_s + ran, None
        d["ran_on"] = tuple(job.nodes) or st.ran_on
        out[job.job_id] = frozen_from(JobState, d)
    return out


def finished_runs(
    state: SchedulerState, alive: set[JobId], unfinished: set[JobId], now: float, max_gap_s: float
) -> list[float]:
    """Seconds of GPUs held by each job that ran and has left the managed jobs since the last tick, in job id
    order; not one that is still there unfinished (turned unmanaged) or never ran (it tells nothing about run
    lengths). A job running at the last tick is counted to ``now``, at most ``max_gap_s`` more (a daemon that was
    down for hours does not know when it ended): the simulator ticks at each completion; the daemon's figure may
    be up to a tick long."""
    out = []
    for job_id, st in sorted(state.jobs.items()):
        if job_id in alive or job_id in unfinished:
            continue
        gap = min(max(0.0, now - state.last_tick), max_gap_s) if state.last_tick is not None else 0.0
        ran = gap if st.current is not None else 0.0
        if st.attained_s + ran > 0:
            out.append(st.attained_s + ran)
    return out


def _plus(seconds: Mapping[Cell, float], cell: Cell, ran: float) -> dict[Cell, float]:
    """A copy of per-Cell ``seconds`` with ``ran`` added to ``cell``'s. A running job's mapping mostly holds its own
    Cell alone, the very object (``columns.canonical_cell``): then the copy is built with one hash of the Cell (a
    dataclass's hash is a Python call) instead of two; the same sum, the same single key."""
    if len(seconds) == 1:
        for key, value in seconds.items():
            if key is cell:
                return {cell: value + ran}
    out = dict(seconds)  # a copy keeps the keys' hashes
    for key, value in seconds.items():  # the Cell's own key found by identity: one hash of it, not two
        if key is cell:
            out[cell] = value + ran
            return out
    out[cell] = out.get(cell, 0.0) + ran
    return out


def _requeue_wait_over(st: JobState, now: float, delay_s: float) -> JobState:
    """Forget ``requeued_at`` once Slurm's requeue delay is over: the nodes the job left are as good as any."""
    if st.requeued_at is not None and now - st.requeued_at >= delay_s:
        return evolve(st, requeued_at=None)
    return st
