"""Desired assignments -> Slurm actions, diffed against what each job is now (adaptdl's diff before write).

A pending job slurmplan has not chosen is held, so Slurm does not start it on its own; a chosen one is
updated to its Cell and nodes, annotated, then released. A running job that must stop or move gets the
checkpoint signal, and if it still runs after the grace period it is requeued held (forced); once pending it
is started in its new configuration by a later tick. Nothing is emitted when the job already matches, or
when the same decision was already sent (``JobState.sent``): the applier's journal retries failed actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmplan import formats
from slurmplan.domain import Action, ActionKind, Assignment, Cell, Job, JobId, Plan, Reason
from slurmplan.formats import decision_of, round_stamp, same_configuration, with_decision
from slurmplan.mechanism.problem import PENDING_STATES, RUNNING_STATES
from slurmplan.mechanism.state import evolve
from slurmplan.tick_types import JobState, ManagedJob, TickConfig

PHASE = {
    ActionKind.SIGNAL: 0,
    ActionKind.REQUEUE: 0,
    ActionKind.REQUEUE_HOLD: 0,
    ActionKind.CANCEL: 0,
    ActionKind.HOLD: 1,
    ActionKind.UPDATE: 2,
    ActionKind.RELEASE: 3,
    ActionKind.ANNOTATE: 4,
}
"""Order of a tick's actions: free GPUs first (stop, hold), then update and release the jobs that start."""

STOPPING = (Reason.PREEMPTED, Reason.MOVED, Reason.RESIZED, Reason.SCHEDULED)
"""Reasons that, for a running job, mean it must leave its current configuration."""


@dataclass(frozen=True)
class RoundStamp:
    """The round a decision belongs to, printed in the admin comment (``since round 17``)."""

    index: int

    @property
    def text(self) -> str:
        return round_stamp(self.index)


def decision_text(cell: Cell, plan: Plan | None, stamp: RoundStamp) -> str:
    """``slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | since round 17`` (no plan: pure data parallel)."""
    return formats.decision_text(cell, plan, stamp.index)


def pinned_to(st: JobState) -> tuple[str, ...] | None:
    """The nodes the last start sent for this job pinned it to (its ``ReqNodeList``), None when unknown.

    A pending job shows no nodes in Slurm, so its pin is known only from what this daemon sent (``st.sent``, the
    start key ``start <comment> @ <nodes>``, journaled). The configuration alone is not enough to skip the
    UPDATE: a job re-decided onto other nodes of the same Cell would keep its old pin and start there (on nodes
    the round gave to another job), or wait for them, and then be moved again. A requeue clears ``sent``
    (``state.advance``), so a job requeued from under its decision is pinned again before its restart.
    """
    if not st.sent.startswith("start ") or " @ " not in st.sent:
        return None
    nodes = st.sent.rsplit(" @ ", 1)[1]
    return tuple(nodes.split(",")) if nodes else ()


def _start(mj: ManagedJob, a: Assignment, st: JobState, stamp: RoundStamp) -> tuple[list[Action], JobState]:
    """Update a pending job to its Cell and nodes, then release it (each only when needed)."""
    job = mj.job
    assert a.cell is not None
    decision = decision_text(a.cell, a.plan, stamp)
    comment = with_decision(job.admin_comment, decision)
    key = f"start {comment} @ {','.join(a.nodes)}"
    if st.sent == key:
        return [], st
    acts: list[Action] = []
    same = (
        job.gpu_type == a.cell.gpu_type
        and job.gpus_per_node == a.gpus_per_node
        and job.node_count == len(a.nodes)
        and same_configuration(job.admin_comment, a.cell, a.plan)  # decided in an earlier round: still true
        and (tuple(job.nodes) == a.nodes if job.nodes else pinned_to(st) == a.nodes)
    )
    if not same:
        acts.append(
            Action(
                ActionKind.UPDATE,
                job.job_id,
                gpu_type=a.cell.gpu_type,
                gpus_per_node=a.gpus_per_node,
                node_count=len(a.nodes),
                nodelist=a.nodes,
                admin_comment=comment,
                reason=f"{a.reason.value}: {a.detail}",
            )
        )
    if job.held:
        why = f"{a.reason.value}: start as {a.cell.short()}"
        acts.append(Action(ActionKind.RELEASE, job.job_id, reason=why, previous_nodes=st.ran_on or None))
    return acts, (evolve(st, sent=key) if acts else st)


def held_text(a: Assignment, stamp: RoundStamp) -> str:
    """``slurmplan: held (preempted) | round 3 | <why>``: the decision a held job shows in ``scontrol show job``.

    Without it a preempted, requeue-held job kept its last running decision (``... | since round 2``), which
    tells the admin it should be running. ``=`` and ``||`` would read as hints, so they are kept out.
    """
    why = a.detail.replace("||", "|").replace("=", ":")
    return f"{formats.PREFIX} held ({a.reason.value}) | round {stamp.index} | {why}"


def _hold(job: Job, a: Assignment, st: JobState, stamp: RoundStamp) -> tuple[list[Action], JobState]:
    """Hold a pending job slurmplan has not chosen, and mark its comment held (each only when needed).

    A job already held whose comment is the very one last found to need no new decision (``_held_as_written``)
    sends nothing: ``decision_of`` is a pure function of the comment. Every waiting job asks every tick (the
    flagship's busy site day: 164,000 times), and nothing is recorded in its state when nothing was sent."""
    key = f"hold round {stamp.index}"
    if st.sent == key:
        return [], st
    comment = job.admin_comment
    if job.held and _held_as_written.get(job.job_id, _NO_COMMENT) is comment:
        return [], st
    acts: list[Action] = []
    if not job.held:
        acts.append(Action(ActionKind.HOLD, job.job_id, reason=f"{a.reason.value}: {a.detail}"))
    current = decision_of(comment)
    if current and not current.startswith(f"{formats.PREFIX} held"):  # a decision from when it ran: replace it
        written = with_decision(comment, held_text(a, stamp))
        acts.append(Action(ActionKind.ANNOTATE, job.job_id, admin_comment=written, reason=f"held: {a.reason.value}"))
    elif job.held:
        if len(_held_as_written) > 20_000:  # a daemon sees new job ids for ever: bounded
            _held_as_written.clear()
        _held_as_written[job.job_id] = comment
    return acts, (evolve(st, sent=key) if acts else st)


_held_as_written: dict[JobId, str] = {}
"""``_hold``'s memo: per job, the comment last found to hold no decision to replace (by identity; holding it keeps
its id its own). A held job with that very comment is left as it is. A job id's entry is replaced, never stale."""

_NO_COMMENT = object()
"""What ``_held_as_written`` answers for a job it has no entry for: no comment is this object."""


def _signal_time(job: Job, now: float, config: TickConfig) -> float:
    """When a job decided to stop now may be signalled: once it has run ``signal_min_run_s``."""
    return now if job.start_time is None else max(now, job.start_time + config.signal_min_run_s)


def _stop(
    job: Job, a: Assignment, st: JobState, now: float, config: TickConfig, stamp: RoundStamp
) -> tuple[list[Action], JobState]:
    """Checkpoint signal first; requeue-hold once the grace period has passed and the job still runs.

    A job that has run less than ``config.signal_min_run_s`` is signalled once it has: until then it is marked as
    stopping (``signalled_at`` = the due time, so the mechanism does not keep it), and nothing is sent.
    """
    due = f"signal due at {st.signalled_at:.3f}" if st.signalled_at is not None else ""
    if st.signalled_at is None or st.sent == due:
        when = st.signalled_at if st.signalled_at is not None else _signal_time(job, now, config)
        if when > now:
            return [], evolve(st, signalled_at=when, sent=f"signal due at {when:.3f}")
        waited = f" (signalled once it had run {config.signal_min_run_s:.0f} s)" if st.sent == due and due else ""
        why = f"{a.reason.value}: {a.detail}{waited}"
        act = Action(ActionKind.SIGNAL, job.job_id, signal=config.checkpoint_signal, reason=why)
        return [act], evolve(st, signalled_at=now, sent="", moved_at=now)
    key = f"requeue-hold after signal at {st.signalled_at:.3f}"
    if now - st.signalled_at < config.grace_s or st.sent == key:
        return [], st
    why = f"still running {now - st.signalled_at:.0f} s after the checkpoint signal (grace {config.grace_s:.0f} s)"
    acts = [Action(ActionKind.REQUEUE_HOLD, job.job_id, reason=why)]
    if decision_of(job.admin_comment):  # its running decision would say it should still run
        comment = with_decision(job.admin_comment, held_text(a, stamp))
        acts.append(Action(ActionKind.ANNOTATE, job.job_id, admin_comment=comment, reason=f"held: {a.reason.value}"))
    return acts, evolve(st, sent=key)


_kept_as_written: dict[JobId, tuple[str, Cell, Plan | None]] = {}
"""``_annotate``'s memo: per job, the comment, Cell and plan last found to agree (by identity). A kept job asks
every tick with the same three objects, and the cache behind ``same_configuration`` hashes the plan's dozen
fields each time. Holding the objects keeps their ids theirs; a job id's entry is replaced, never stale."""

kept_as_written = _kept_as_written.get
"""``_annotate``'s memo entry of a job id (None: none), for ``engine``'s steady rows; the memo is cleared in place,
never rebound, so this stays its lookup."""


def _annotate(job: Job, a: Assignment, st: JobState, stamp: RoundStamp) -> tuple[list[Action], JobState]:
    """A running job that keeps its configuration: nothing to send when its comment already names it (the
    common case: Slurm calls stay proportional to the jobs whose decision changed); written only when the
    comment lacks it (a job started by hand, or a comment an admin overwrote)."""
    assert a.cell is not None
    seen = _kept_as_written.get(job.job_id)
    if seen is not None and seen[0] is job.admin_comment and seen[1] is a.cell and seen[2] is a.plan:
        return [], st  # the very objects found to agree last time: ``same_configuration`` is a pure function
    if same_configuration(job.admin_comment, a.cell, a.plan):
        if len(_kept_as_written) > 20_000:  # a daemon sees new job ids for ever: bounded
            _kept_as_written.clear()
        _kept_as_written[job.job_id] = (job.admin_comment, a.cell, a.plan)
        return [], st
    comment = with_decision(job.admin_comment, decision_text(a.cell, a.plan, stamp))
    key = f"annotate {comment}"
    if st.sent == key:
        return [], st
    return [Action(ActionKind.ANNOTATE, job.job_id, admin_comment=comment, reason="decision written")], evolve(
        st, sent=key
    )


def job_actions(
    mj: ManagedJob, a: Assignment, st: JobState, now: float, stamp: RoundStamp, config: TickConfig
) -> tuple[list[Action], JobState]:
    """The actions that bring one job from what it is to ``a``, and its state after them."""
    job = mj.job
    if not mj.hints.managed or a.reason is Reason.UNMANAGED:
        return [], st
    if job.state in PENDING_STATES:
        if a.cell is not None and a.nodes and a.reason is not Reason.UNPLACEABLE:
            return _start(mj, a, st, stamp)
        return _hold(job, a, st, stamp)
    if job.state in RUNNING_STATES:
        if a.reason is Reason.KEPT and st.signalled_at is None:
            return _annotate(job, a, st, stamp) if a.cell is not None else ([], st)
        if st.signalled_at is not None or a.reason in STOPPING or a.cell is None:
            return _stop(job, a, st, now, config, stamp)
    return [], st


def kept_quietly(mj: ManagedJob, a: Assignment, st: JobState) -> bool:
    """Whether ``job_actions(mj, a, st, ...)`` is ``([], st)`` because the job runs on, kept, unsignalled, with
    its comment already found to name its Cell and plan (``_annotate``'s memo, the very objects): the steady rows,
    most of every tick's (issue 27). Reads nothing that ``job_actions`` does not; False leaves the answer to it."""
    if a.reason is not Reason.KEPT or st.signalled_at is not None or not mj.hints.managed:
        return False
    job = mj.job
    if job.state not in RUNNING_STATES:
        return False
    if a.cell is None:
        return True
    seen = _kept_as_written.get(job.job_id)
    return seen is not None and seen[0] is job.admin_comment and seen[1] is a.cell and seen[2] is a.plan


def plan_actions(
    decided: Sequence[tuple[ManagedJob, Assignment]],
    states: Mapping[JobId, JobState],
    now: float,
    stamp: RoundStamp,
    config: TickConfig,
) -> tuple[list[Action], dict[JobId, JobState]]:
    """Actions for every decided job, ordered so GPUs are freed (stop, hold) before jobs are started.

    ``states`` must hold each job's state after this tick's decision; the returned states record what was sent.
    """
    actions: list[Action] = []
    out: dict[JobId, JobState] = {}
    for mj, a in decided:
        acts, out[mj.job.job_id] = job_actions(mj, a, states[mj.job.job_id], now, stamp, config)
        actions.extend(acts)
    actions.sort(key=lambda a: PHASE[a.kind])  # stable: job order is kept within a phase
    return actions, out
