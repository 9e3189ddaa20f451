"""The body of ``slurmplan.tick.decide``: state -> problem -> policy -> round -> placement -> actions.

Kept in the mechanism with the stages it chains; the tick's types live in ``tick_types`` so that
``tick.decide`` imports this module at top level without a cycle. Every stage is a pure function of the
tick's input and the previous state.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from slurmplan.domain import (
    Action,
    Allocation,
    AllocationProblem,
    Assignment,
    Candidate,
    Cell,
    JobClass,
    JobId,
    Plan,
    Policy,
    Reason,
    SlurmplanError,
    ValidationError,
    frozen_from,
)
from slurmplan.mechanism.actions import PHASE, RoundStamp, job_actions, kept_as_written, kept_quietly
from slurmplan.mechanism.layout import Placement, place_round
from slurmplan.mechanism.placement import Placed
from slurmplan.mechanism.pricing import remaining_prior
from slurmplan.mechanism.priorities import EPS, deficits, priorities, received_share, start_epoch
from slurmplan.mechanism.problem import RUNNING_STATES, ProblemContext, build_problem, column_index
from slurmplan.mechanism.reconfig import horizons
from slurmplan.mechanism.round import RoundChoice, RowsOnDemand, RunningInfo, gpus_left, plan_round
from slurmplan.mechanism.state import advance, evolve
from slurmplan.tick_types import JobState, ManagedJob, SchedulerState, TickConfig, TickInput, TickOutput

log = logging.getLogger(__name__)

_CHOSEN_REASONS = (Reason.SCHEDULED, Reason.KEPT, Reason.MOVED, Reason.RESIZED)
_MOVES = (Reason.MOVED, Reason.RESIZED)


def align(allocation: Allocation | None, problem: AllocationProblem) -> np.ndarray:
    """The allocation's X on this problem's rows and columns (zeros for jobs or Cells it does not know)."""
    shape = (problem.num_jobs, len(problem.cells))
    if allocation is None:
        return np.zeros(shape)
    last = _last_aligned.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is allocation:
        x, rows, cols = last[1], last[2], last[3]
    else:
        x = np.asarray(allocation.x, dtype=float)
        if x.shape != (len(allocation.job_ids), len(allocation.cells)):
            want = f"shape {(len(allocation.job_ids), len(allocation.cells))}"
            raise ValidationError("allocation.x", x.shape, want, f"policy {allocation.policy}")
        x = np.clip(np.nan_to_num(x, nan=0.0), 0.0, 1.0)  # a share is in [0, 1]; solver noise must not leak on
        rows = {j: i for i, j in enumerate(allocation.job_ids)}
        cols = {c: i for i, c in enumerate(allocation.cells)}
        _last_aligned.value = (allocation, x, rows, cols)
    if allocation.job_ids == problem.job_ids and allocation.cells == problem.cells:
        return x.copy()
    out = np.zeros(shape)
    src_r = [(i, rows[j]) for i, j in enumerate(problem.job_ids) if j in rows]
    if src_r and allocation.cells == problem.cells:  # only the rows moved (jobs came or went): whole rows
        dr, sr = map(list, zip(*src_r, strict=True))
        out[dr] = x[sr]
        return out
    src_c = _columns_from(cols, problem.cells)
    if src_r and src_c:
        dr, sr = map(list, zip(*src_r, strict=True))
        dc, sc = map(list, zip(*src_c, strict=True))
        out[np.ix_(dr, dc)] = x[np.ix_(sr, sc)]
    return out


def _columns_from(cols: dict, cells: tuple) -> list[tuple[int, int]]:
    """(problem column, allocation column) of every Cell both have: the same for every tick of a round while
    the problem's columns are the same tuple (kept with it: a pure memo keyed by both objects' identity)."""
    last = _last_columns.value
    if last is not None and last[0] is cols and last[1] is cells:
        return last[2]
    src_c = [(i, cols[c]) for i, c in enumerate(cells) if c in cols]
    _last_columns.value = (cols, cells, src_c)
    return src_c


class _LastAligned:
    """The round's allocation with its clipped X and row/column positions: every tick of a round aligns the same
    allocation to that tick's problem. A pure memo keyed by the allocation's identity (an Allocation is frozen;
    its X is copied out, never handed out)."""

    value: tuple | None = None


_last_aligned = _LastAligned()


class _LastColumns:
    """``align``'s column pairs for the round's allocation on the previous tick's columns (``_columns_from``)."""

    value: tuple | None = None


_last_columns = _LastColumns()


def running_info(
    ctx: ProblemContext, states: Mapping[JobId, JobState], config: TickConfig, now: float = 0.0
) -> RunningInfo:
    """Each row's running facts; its move horizon and time since its last move are computed when ``greedy``
    first reads one (``RowsOnDemand``), from the problem's arrays and the rows' JobStates as they are now."""
    p = ctx.problem
    n = p.num_jobs
    current = np.asarray(p.current, dtype=np.int64) if p.current is not None else np.full(n, -1)

    def horizon() -> np.ndarray:
        thr = p.throughput[np.arange(n), np.maximum(current, 0)] if p.cells else np.zeros(n)
        # Expected remaining time where it runs: its steps when known, else the time it has run (pricing.py)
        remaining, _ = remaining_prior(
            p.column("steps_remaining"), thr, ctx.steps_known, p.column("attained_time"), p.time_limit_left,
            config.round_s,
        )  # fmt: skip
        return horizons(config.round_s, remaining)

    got = [states[j] for j in p.job_ids]  # the tick's JobStates now (``states`` is the caller's to change later)

    def since() -> np.ndarray:
        return np.array([np.inf if st.moved_at is None else now - st.moved_at for st in got], dtype=float)

    signalled = np.array([st.signalled_at is not None for st in got], dtype=bool)
    qos = tuple(m.job.qos for m in ctx.jobs) if config.qos_preemption else None  # QOS rules (mechanism/qos.py)
    return RunningInfo(
        ctx.running & (current >= 0), current, signalled, RowsOnDemand(horizon), RowsOnDemand(since), qos
    )


def replay(
    ctx: ProblemContext,
    x: np.ndarray,
    pri: np.ndarray,
    states: Mapping[JobId, JobState],
    info: RunningInfo,
    config: TickConfig,
    deficit: Callable[[np.ndarray], np.ndarray] | None = None,
    hook: Callable[[AllocationProblem, np.ndarray, np.ndarray], np.ndarray] | None = None,
    notes: list[str | None] | None = None,
) -> RoundChoice:
    """Between rounds: the round's decisions stand; GPUs freed since are refilled from the round's X.

    ``notes`` (``row_notes`` of the round's allocation): a row kept running or left waiting carries its round's
    detail without them (``without_note``); a stopping row keeps them (they say why it stops, and a requeue-hold
    writes its detail into the job's comment).

    ``hook``: a policy's own rows for the jobs free to start between rounds (its ``between_rounds``: given the
    tick's problem, X with the arrivals' rows and which jobs are free to start; called only with
    ``start_arrivals`` and a free GPU; only the flagship has one).

    ``deficit`` gives the deficits (``priorities.deficits``) of the rows it is given, which break the refill's
    ties; it is called only when some job may be refilled (most ticks between rounds refill nobody, and they need
    no deficits), and only for the rows that may be (the refill reads no other row's)."""
    p = ctx.problem
    n = p.num_jobs
    col_of = column_index(p.cells)  # the problem's own index (read only)
    col = [-1] * n
    fixed = [False] * n
    reasons: list[Reason] = [Reason.WAITING] * n
    details: list[str] = ["new since the round started: no free GPUs it can use; decided at the next round"] * n
    # Plain lists: every row reads these each tick, and a numpy element read costs several times a list's.
    running, signalled, current, info_running = (
        ctx.running.tolist(), info.signalled.tolist(), info.current.tolist(), info.running.tolist()
    )  # fmt: skip
    note_of = notes if notes is not None else [None] * n
    for j, job_id in enumerate(p.job_ids):
        planned = states[job_id].planned
        if running[j] and not signalled[j]:
            col[j], fixed[j], reasons[j] = current[j], True, Reason.KEPT
            kept = planned is not None and planned.reason is Reason.KEPT
            if not kept:
                details[j] = "lease renewed"
            else:  # ``without_note``'s answer without the call where there is no note (every row under LAS)
                note = note_of[j]
                details[j] = without_note(planned.detail, note) if note else planned.detail  # type: ignore[union-attr]
            if current[j] < 0:
                details[j] = "runs in a configuration none of its candidates has; decided at the next round"
        elif planned is not None:
            target = col_of.get(planned.cell, -1) if planned.cell is not None else -1
            fixed[j] = info_running[j] or (target >= 0 and planned.reason in _CHOSEN_REASONS)
            col[j] = target if planned.reason in _CHOSEN_REASONS else -1
            reasons[j], details[j] = planned.reason, planned.detail
            if planned.reason is Reason.WAITING and not info_running[j]:
                details[j] = without_note(planned.detail, note_of[j])
    col = np.array(col, dtype=np.int64).reshape(n)
    fixed = np.array(fixed, dtype=bool).reshape(n)
    x = with_arrivals(p, x, states, ~fixed & ~info.running) if config.start_arrivals else x
    free = None
    if hook is not None and config.start_arrivals and p.cells:
        free = gpus_left((p.cells[c] for c in col[fixed & (col >= 0)].tolist()), p.capacity)
        if any(v > 0 for v in free.values()):  # only a free GPU can start anyone: most ticks skip the policy
            x = hook(p, x, ~fixed & ~info.running)
    eligible = ~fixed & ~info.running & (x.sum(axis=1) > EPS) if p.cells else np.zeros(n, dtype=bool)
    if eligible.any():
        if free is None:
            free = gpus_left((p.cells[c] for c in col[fixed & (col >= 0)].tolist()), p.capacity)
        owed = deficit(eligible) if deficit is not None else None
        refill = plan_round(p, x, pri, info, config, eligible=eligible, capacity=free, deficit=owed)
        for j in np.flatnonzero(eligible & (refill.col >= 0)).tolist():
            col[j], reasons[j] = refill.col[j], Reason.SCHEDULED
            new = states[p.job_ids[j]].planned is None
            why = "starts on arrival on free GPUs" if new else "fills GPUs freed since the round started"
            details[j] = f"{why} ({refill.detail[j]})"
    rows = np.arange(n)
    chosen_pri = pri[rows, np.maximum(col, 0)] if p.cells else np.zeros(n)
    return RoundChoice(col, tuple(reasons), tuple(details), np.where(col >= 0, chosen_pri, 0.0))


def without_note(detail: str, note: str | None) -> str:
    """A round's detail without the policy's note that ``assign`` appended to it (``_noted``'s inverse): what a
    row carries between rounds (issue 23, seventeenth session). The note says why the round decided as it did;
    it stays on the round's own assignment (journaled in full, read by ``explain``). Before, it was carried and
    appended again every tick (the flagship's details grew to 2,258 characters on ``decision_hash.py``)."""
    if not note or not detail.endswith(note):
        return detail
    head = detail[: len(detail) - len(note)]
    return head[: -len(_NOTE_SEP)] if head.endswith(_NOTE_SEP) else head or "as decided at the round"


def with_arrivals(
    p: AllocationProblem, x: np.ndarray, states: Mapping[JobId, JobState], waiting: np.ndarray
) -> np.ndarray:
    """X with a row for each job that arrived since the round started (no share, no decision yet): its columns
    of the requested size, weighted by speed, so that free GPUs it can use start it at the next tick, as plain
    Slurm would, instead of at the next round (issue 23: managed jobs waited 2-7 min for their first start)."""
    new = waiting & (x.sum(axis=1) <= EPS) if p.cells else np.zeros(p.num_jobs, dtype=bool)
    if not new.any():
        return x
    for j in np.flatnonzero(new).tolist():  # only these rows' states are read (not every row's, every tick)
        new[j] = states[p.job_ids[j]].planned is None
    if not new.any():
        return x
    x = x.copy()
    gpus = np.array([c.gpus for c in p.cells])
    req = p.requested if p.requested is not None else np.full(p.num_jobs, -1)
    sla = p.column("sla_throughput")
    guaranteed = [c is JobClass.GUARANTEED for c in p.job_class] if p.job_class else [False] * p.num_jobs
    for j in np.flatnonzero(new).tolist():
        row = np.asarray(p.throughput[j], dtype=float)
        if req[j] >= 0:
            row = np.where(gpus == gpus[req[j]], row, 0.0)
        if guaranteed[j]:  # a guaranteed job starts only where it gets its SLA (its requested speed)
            row = np.where(row >= sla[j] - 1e-9, row, 0.0)
        if row.max(initial=0.0) > 0:
            x[j] = row / row.max()
    return x


def with_policy_notes(
    assignments: list[Assignment], allocation: Allocation | None, problem: AllocationProblem
) -> list[Assignment]:
    """Append the policy's own per-job words (``Allocation.notes``) to each decision's detail.

    ``decide`` passes the notes to ``assign`` instead (``row_notes``), which writes each detail once; this is the
    same rule applied afterwards, kept as the reference ``tests/mechanism/test_assign_notes.py`` compares with."""
    notes = getattr(allocation, "notes", None)
    if not notes:
        return assignments
    by_job = dict(zip(allocation.job_ids, notes, strict=False))
    out = []
    for a in assignments:
        note = by_job.get(a.job_id)
        out.append(_with_detail(a, f"{a.detail}; {note}" if a.detail else note) if note else a)
    return out


def row_notes(allocation: Allocation | None, problem: AllocationProblem) -> list[str | None] | None:
    """The policy's note (``Allocation.notes``) for each of the problem's rows (None: it wrote none for that job),
    or None when the policy writes no notes at all (every policy but the flagship)."""
    notes = getattr(allocation, "notes", None)
    if not notes:
        return None
    by_job = dict(zip(allocation.job_ids, notes, strict=False))
    return [by_job.get(job_id) for job_id in problem.job_ids]


_NOTE_SEP = "; "
"""Between a decision's detail and the policy's note (``_noted`` appends it, ``without_note`` takes it off)."""


def _noted(detail: str, note: str | None) -> str:
    """A decision's detail with the policy's note appended (``with_policy_notes``'s rule)."""
    if not note:
        return detail
    return f"{detail}{_NOTE_SEP}{note}" if detail else note


def _with_detail(a: Assignment, detail: str) -> Assignment:
    """``replace(a, detail=detail)`` without ``replace``'s per-field work (Assignment has no ``__post_init__``):
    one per job per tick under a policy that writes notes."""
    return frozen_from(Assignment, {**a.__dict__, "detail": detail})


def assign(
    ctx: ProblemContext,
    choice: RoundChoice,
    placed: Placement,
    x: np.ndarray,
    states: Mapping[JobId, JobState],
    info: RunningInfo,
    notes: list[str | None] | None = None,
    settled: dict[int, JobState] | None = None,
    new_round: bool = False,
) -> list[Assignment]:
    """Turn every row into an Assignment with its Reason and detail, on the nodes placement found; ``notes``
    (``row_notes``) are the policy's words per row, appended to the detail as ``with_policy_notes`` would, but
    with each Assignment built once (the flagship writes one for most jobs, every tick).

    ``settled`` (a dict to fill) takes the steady rows' fast path (``_steady_row``): a running job kept on the
    very Cell, nodes and plan of its assignment of the tick before gets that assignment with this tick's numbers
    and detail, and, when nothing is to be sent for it, its next state goes into ``settled`` by row, which
    ``settle`` then takes as it is (``new_round`` as ``settle``'s). Without it every row takes the plain path, which
    ``tests/mechanism/test_steady_rows.py`` compares the fast one with on every tick of real runs.

    Runs for every job every tick: the per-row numbers are read from Python lists, not numpy scalars.
    """
    p = ctx.problem
    out: list[Assignment] = []
    cols, pris = choice.col.tolist(), choice.priority.tolist()
    running, info_running, signalled = ctx.running.tolist(), info.running.tolist(), info.signalled.tolist()
    cells, candidates = p.cells, p.candidates
    thr_at, x_at, x_sum = _row_values(p, choice.col, x)
    note_of = notes if notes is not None else [None] * len(cols)
    fast = settled is not None
    kept = Reason.KEPT
    choice_reasons, choice_details, jobs = choice.reason, choice.detail, ctx.jobs  # read once, not once a row
    for j, job_id in enumerate(p.job_ids):
        c, note = cols[j], note_of[j]
        reason, detail, pri = choice_reasons[j], choice_details[j], pris[j]
        if c < 0:
            if running[j] and reason is Reason.WAITING:
                reason = Reason.PREEMPTED  # running outside every column, and not chosen: it must stop
            # ``Assignment(job_id, reason, priority=pri, share=x_sum[j], detail=...)`` built without its per-field
            # setattr: every waiting row, every tick (a third of the flagship's rows on a busy site day)
            out.append(_assignment(job_id, reason, None, None, (), 0, 0.0, pri, x_sum[j], _noted(detail, note)))
            continue
        cand = candidates[j][c] if candidates else None
        where = placed[j]
        if fast and reason is kept and running[j]:
            st, mj = states[job_id], jobs[j]
            got = _steady_row(
                st, cells[c], where, mj, cand, _noted(detail, note) if note else detail, thr_at[j], pri, x_at[j]
            )
            if got is not None:
                out.append(got)
                nxt = _quiet_next(st, got, mj, new_round)
                if nxt is not None:
                    settled[j] = nxt  # type: ignore[index]
                continue
        if not isinstance(where, Placed):
            if info_running[j] and not signalled[j]:
                cur = states[job_id].current
                if cur is not None:
                    why = _noted(f"stays: target not placeable ({where.why})", note)
                    out.append(replace(cur, reason=Reason.KEPT, detail=why))
                    continue
            reason = Reason.UNPLACEABLE if not info_running[j] else Reason.PREEMPTED
            why = _noted(where.why, note)
            out.append(Assignment(job_id, reason, cell=cells[c], priority=pri, share=x_at[j], detail=why))
            continue
        plan = cand.plan if cand else None
        if reason is Reason.KEPT and tuple(where.nodes) != tuple(ctx.jobs[j].job.nodes):
            gone = set(ctx.jobs[j].job.nodes) - set(ctx.pool.names)
            why = f"{','.join(sorted(gone))} no longer schedulable" if gone else "so that larger jobs fit"
            reason, detail = Reason.MOVED, f"re-placed on {','.join(where.nodes)} ({why}); before that: {detail}"
        elif reason is Reason.KEPT:
            cur = states[job_id].current
            same = cur is not None and (cur.cell is cells[c] or cur.cell == cells[c])
            plan = cur.plan if same and cur.plan else plan  # what it runs
        detail += _spread_note(len(where.nodes), cand)
        if note:
            detail = _noted(detail, note)
        out.append(
            _assignment(
                job_id, reason, cells[c], plan, where.nodes, where.gpus_per_node, thr_at[j], pri, x_at[j], detail
            )
        )
    return out


def _steady_row(
    st: JobState,
    cell: Cell,
    where: Placed | object,
    mj: ManagedJob,
    cand: Candidate | None,
    detail: str,
    throughput: float,
    priority: float,
    share: float,
) -> Assignment | None:
    """A kept running row's Assignment from its previous one, or None where the plain path must build it.

    Steady: the job's last assignment (``planned``) is the one it runs under (``current``: kept, on nodes Slurm
    still shows), on this very column's Cell, placed on the very node tuple it had with as many GPUs a node, with
    a plan, and no spread note. Then the plain path (``assign``'s KEPT branch) builds an Assignment equal field by
    field to the previous one but for throughput, priority, share and ``detail`` (this tick's, with the policy's
    note: the caller's): it is that one's fields with this tick's four values."""
    prev = st.planned
    if prev is None or prev is not st.current or prev.cell is not cell or where.__class__ is not Placed:
        return None
    if prev.reason is not Reason.KEPT:  # ``advance`` keeps only a KEPT one as ``current``: a guard, not a branch
        return None
    nodes = where.nodes  # type: ignore[attr-defined]
    if prev.nodes is not nodes or prev.gpus_per_node != where.gpus_per_node or not prev.plan:  # type: ignore[attr-defined]
        return None
    job_nodes = mj.job.nodes
    if job_nodes is not nodes and tuple(job_nodes) != nodes:
        return None  # re-placed: the plain path says MOVED
    if cand is not None and len(nodes) > max(1, cand.nodes):
        return None  # the plain path appends its spread note
    d = prev.__dict__.copy()
    d["throughput"], d["priority"], d["share"], d["detail"] = throughput, priority, share, detail
    return frozen_from(Assignment, d)


def _quiet_next(st: JobState, a: Assignment, mj: ManagedJob, new_round: bool) -> JobState | None:
    """A steady row's next state (``_next_state`` for a running job kept: planned and current are ``a``) when
    ``job_actions`` would send nothing for it (``kept_quietly``'s test, read here without the call), else None."""
    job = mj.job
    if st.signalled_at is not None or not mj.hints.managed or job.state not in RUNNING_STATES:
        return None
    seen = kept_as_written(job.job_id)
    if seen is None or seen[0] is not job.admin_comment or seen[1] is not a.cell or seen[2] is not a.plan:
        return None
    d = st.__dict__.copy()
    d["planned"] = d["current"] = a
    if new_round:
        d["rounds_scheduled"] = st.rounds_scheduled + 1
    return frozen_from(JobState, d)


def _row_values(p: AllocationProblem, col: np.ndarray, x: np.ndarray) -> tuple[list, list, list]:
    """Each row's throughput and share in its chosen column (column 0 stands in for "none"), and its total share
    (summed once for all rows: a C-ordered row's sum is the same pairwise sum either way), as Python lists."""
    n = len(col)
    rows, at = np.arange(n), np.maximum(col, 0)
    thr_at = p.throughput[rows, at].tolist() if p.cells else [0.0] * n
    x_at = x[rows, at].tolist() if p.cells else [0.0] * n
    return thr_at, x_at, np.ascontiguousarray(x).sum(axis=1).tolist()


def _assignment(
    job_id: JobId,
    reason: Reason,
    cell: Cell,
    plan: Plan | None,
    nodes: tuple[str, ...],
    gpus_per_node: int,
    throughput: float,
    priority: float,
    share: float,
    detail: str,
) -> Assignment:
    """``Assignment(...)`` with every field given, without the frozen dataclass's per-field setattr calls
    (Assignment has no ``__post_init__``): one per running job per tick, so its fields are one dict display."""
    return frozen_from(Assignment, {
        "job_id": job_id, "reason": reason, "cell": cell, "plan": plan, "nodes": nodes,
        "gpus_per_node": gpus_per_node, "throughput": throughput, "priority": priority, "share": share,
        "detail": detail,
    })  # fmt: skip


def _spread_note(nodes: int, cand: Candidate | None) -> str:
    """Say so when a job runs on more nodes than its throughput was predicted for (fragmented GPUs)."""
    if cand is None or nodes <= max(1, cand.nodes):
        return ""
    return f"; spread over {nodes} nodes, throughput predicted for {max(1, cand.nodes)}"


def _next_state(st: JobState, a: Assignment, running: bool, new_round: bool) -> JobState:
    """``evolve(st, planned=a, current=..., rounds_scheduled=..., reconfigurations=...)``, written out: it runs
    for every job every tick."""
    d = st.__dict__.copy()
    d["planned"] = a
    if running and a.reason is Reason.KEPT:
        d["current"] = a
    if new_round:
        if a.reason in _CHOSEN_REASONS and a.cell is not None:
            d["rounds_scheduled"] = st.rounds_scheduled + 1
        if running and a.reason in _MOVES:
            d["reconfigurations"] = st.reconfigurations + 1
    return frozen_from(JobState, d)


_NONE: dict[int, JobState] = {}
"""``settle`` without steady rows: every row's next state built there (read only)."""


def settle(
    ctx: ProblemContext,
    assignments: list[Assignment],
    states: Mapping[JobId, JobState],
    new_round: bool,
    now: float,
    stamp: RoundStamp,
    config: TickConfig,
    settled: Mapping[int, JobState] | None = None,
) -> tuple[list[Action], dict[JobId, JobState]]:
    """Each job's state after this tick's decision (``_next_state``; an excluded job's plan forgotten) and the
    actions that bring it there: ``plan_actions`` over those states, for the rows then the excluded jobs, in one
    pass. A steady row (kept where it runs, nothing to send: ``kept_quietly``) skips ``job_actions``, whose
    answer for it is no action and the same state; ``tests/mechanism/test_settle.py`` compares with the plain
    two passes on every tick of real runs."""
    actions: list[Action] = []
    out: dict[JobId, JobState] = {}
    running = ctx.running.tolist()
    done = settled.get if settled else _NONE.get
    for j, (mj, a) in enumerate(zip(ctx.jobs, assignments, strict=True)):
        st = done(j)
        if st is not None:  # a steady row's next state, built by ``assign``'s fast path
            out[a.job_id] = st
            continue
        st = _next_state(states[a.job_id], a, running[j], new_round)
        if kept_quietly(mj, a, st):
            out[a.job_id] = st
            continue
        acts, out[a.job_id] = job_actions(mj, a, st, now, stamp, config)
        actions.extend(acts)
    for mj, a in ctx.excluded:
        acts, out[a.job_id] = job_actions(mj, a, evolve(states[a.job_id], planned=None), now, stamp, config)
        actions.extend(acts)
    actions.sort(key=lambda a: PHASE[a.kind])  # stable: job order is kept within a phase (``plan_actions``)
    return actions, out


def decide(inp: TickInput, policy: Policy, state: SchedulerState) -> TickOutput:
    """See ``slurmplan.tick.decide``."""
    config = inp.config
    states = advance(inp, state)
    finished = state.finished_lengths
    new_round = state.last_round_start is None or inp.now - state.last_round_start >= config.round_s - ON_TIME_S
    round_start = (
        on_round_grid(inp.now, state.last_round_start, config.round_s) if new_round else state.last_round_start
    )
    ctx = build_problem(inp, states, finished)
    problem = ctx.problem
    info = running_info(ctx, states, config, inp.now)
    if not new_round and getattr(policy, "round_at_arrival", False):
        new_round = arrival_round(ctx, states)  # an extra round; the rounds' grid (``round_start``) stays
    round_index = state.round_index + 1 if new_round else state.round_index
    stamp = RoundStamp(round_index)
    allocation = _allocate(policy, problem, state) if new_round else state.allocation
    epoch_start = start_epoch(states, state, allocation, inp.now, config) if new_round else state.epoch_start
    x = align(allocation, problem)
    notes = row_notes(allocation, problem)
    shares = received_share(
        problem, states, inp.now, inp.now if epoch_start is None else epoch_start, config.round_s / 2
    )
    pri = priorities(x, shares)
    if new_round:
        choice = plan_round(problem, x, pri, info, config, deficit=deficits(problem, states))
    else:
        hook = getattr(policy, "between_rounds", None)
        owed = lambda rows: deficits(problem, states, rows)  # noqa: E731
        choice = replay(ctx, x, pri, states, info, config, owed, hook, notes)
    choice, placed = place_round(ctx, choice, x, pri, states, info, config)
    settled: dict[int, JobState] = {}  # the steady rows' next states (``assign``'s fast path)
    # The policy's notes say why the round decided as it did: appended to the round's details only
    assignments = assign(ctx, choice, placed, x, states, info, notes if new_round else None, settled, new_round)
    actions, new_states = settle(ctx, assignments, states, new_round, inp.now, stamp, config, settled)
    assignments.extend(a for _, a in ctx.excluded)
    if new_round:
        log.info("round %d: %d jobs, %d actions", round_index, problem.num_jobs, len(actions))
    out_state = SchedulerState(round_index, round_start, new_states, inp.now, allocation, epoch_start, finished)
    signalled = [s.signalled_at for s in new_states.values() if s.signalled_at is not None]
    ends = [t + config.grace_s for t in signalled] + signalled  # grace ends; signals due (``signal_min_run_s``)
    wake = min((t for t in ends if t > inp.now), default=None)
    return TickOutput(tuple(actions), tuple(assignments), allocation, out_state, new_round, wake)


ON_TIME_S = 1e-6
"""Float rounding on the rounds' grid: a round is due this much before its grid point, and one opened less than
this after it starts at the tick itself. The simulator ticks on the grid, and its tick at ``start + round_s`` can be
an ulp short of ``round_s`` after ``start`` (e.g. 359.99999999999994 after 156.6): without the slack it missed the
round and the next tick, maybe a round later, opened it off the grid."""


def on_round_grid(now: float, last: float | None, round_s: float) -> float:
    """When the round opened at ``now`` starts: the last grid point ``last + n * round_s`` at or before ``now``.

    The daemon notices a round is due at its first tick at or after the grid point, and that tick fires a few ms
    late (tick work and sleep). Were the round to start at the tick itself, each round would be late by the part of
    a tick, and the next due a whole tick later: on the dev cluster's replays (1 s ticks, 12 s rounds) the rounds
    came every 12.5 s on average, up to 13 s, so a site's ``round_s: 360`` with 30 s ticks gave rounds of up to
    390 s, while the simulator, which ticks on the grid, opens them every 360 s (issue 23: the daemon and its
    prediction must decide alike). On the grid the rounds keep ``round_s`` on average; a daemon that was down for
    rounds takes up the grid where it falls."""
    if last is None:
        return now
    grid = last + max(1, math.floor((now - last + ON_TIME_S) / round_s)) * round_s
    return now if now - grid < ON_TIME_S else grid


def arrival_round(ctx: ProblemContext, states: Mapping[JobId, JobState]) -> bool:
    """Open a round now, between rounds (a policy's ``round_at_arrival``; issue 23, nineteenth session): a job
    arrived since the round (no decision yet), every job not running arrived since then too, and free GPUs can
    start one of them in one of its columns. The policy then sizes the arrival as it sizes a job at any round (an
    elastic job may start larger), where between rounds it would start at its requested size; every other job's
    change is priced as at any round. The rounds' grid is kept: the next round falls where it would have."""
    p = ctx.problem
    if not p.cells:
        return False
    waiting = ~ctx.running
    new = waiting & np.array([states[j].planned is None for j in p.job_ids], dtype=bool)
    if not new.any() or (waiting & ~new).any():
        return False
    cur = np.asarray(p.current, dtype=np.int64) if p.current is not None else np.full(p.num_jobs, -1)
    free = gpus_left((p.cells[c] for c in cur[ctx.running & (cur >= 0)].tolist()), p.capacity)
    thr = np.asarray(p.throughput, dtype=float)
    fits = np.array([c.gpus <= free.get(c.gpu_type, 0) for c in p.cells], dtype=bool)
    return bool(((thr[new] > 0) & fits[None, :]).any())


def _allocate(policy: Policy, problem: AllocationProblem, state: SchedulerState) -> Allocation | None:
    """The policy's X for a new round; if the policy fails, the previous round's X (logged), not a dead tick."""
    if problem.num_jobs == 0:
        return None
    try:
        return policy.allocate(problem)
    except SlurmplanError as exc:
        name = getattr(policy, "name", type(policy).__name__)
        log.error("policy %s failed, keeping the previous round's allocation: %s", name, exc)
        return state.allocation
