"""One tick, written once: observe -> classify -> managed jobs -> decide -> shape -> journal intents -> apply.

``run_tick(backend, clock, journal, policy, source)`` is the whole tick. The daemon runs it with the Slurm
backend, the SQLite journal (``control.tick_journal``) and the wall clock; the simulator with its in-memory
backend, :class:`MemJournal` and its virtual clock. What differs between the two is injected, never written
twice:

* ``backend`` — ``snapshot()`` / ``apply(actions)``, and the ``rules`` it declares (``slurmplan.rules``);
* ``journal`` — where the state, the decisions and the intents live, how intents are applied and confirmed
  (one row at a time, stopping a job at its first failure, on Slurm; one batch in memory in the simulator);
* ``source`` — who says which jobs are managed, with which hints and candidates: the daemon parses the hints
  from Slurm's admin comment and prices them with ``perf``; the simulator knows its workloads.

Per-tick work is O(jobs that changed): a job value the backend reuses (the simulator rebuilds only changed
jobs) maps to the same ``ManagedJob`` as last tick, which the mechanism's caches key on.

Imports nothing from ``slurm/``, ``control/`` or ``cli``: both edges import this module.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from slurmplan.domain import (
    Action,
    ActionKind,
    ActionResult,
    Assignment,
    Candidate,
    Cluster,
    Hints,
    Job,
    JobState,
    SlurmplanError,
    Snapshot,
    frozen_from,
)
from slurmplan.mechanism.lengths import remember_finished
from slurmplan.mechanism.state import finished_runs
from slurmplan.rules import SLURM_22_05, SlurmRules
from slurmplan.tick import ManagedJob, SchedulerState, TickConfig, TickInput, TickOutput

log = logging.getLogger(__name__)

DecideFn = Callable[[TickInput, Any, SchedulerState], TickOutput]
Clock = Callable[[], float]


# ------------------------------------------------------------------------------------------------ values


@dataclass(frozen=True)
class Observed:
    """One job as classified: managed (hints set), unmanaged, or refused (error set)."""

    job: Job
    hints: Hints | None = None
    error: str = ""

    @property
    def managed(self) -> bool:
        return self.hints is not None and not self.error


@dataclass(frozen=True)
class ApplyReport:
    applied: int = 0
    failed: int = 0
    retry: int = 0
    stale: int = 0


@dataclass(frozen=True)
class TickReport:
    """What one tick saw, decided and did; the CLI prints it, tests, the simulator and the benchmark read it."""

    mode: str
    tick_id: int | None = None
    round_index: int = 0
    new_round: bool = False
    managed: int = 0
    unmanaged: int = 0
    refused: tuple[Observed, ...] = ()
    actions: tuple[Action, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    rolled_forward: ApplyReport = field(default_factory=ApplyReport)
    applied: ApplyReport = field(default_factory=ApplyReport)
    observe_s: float = 0.0
    decide_s: float = 0.0
    act_s: float = 0.0
    skipped: str = ""
    """Why the tick decided nothing (the cluster could not be read), '' when it ran."""
    tick_input: TickInput | None = field(default=None, repr=False, compare=False)
    output: TickOutput | None = field(default=None, repr=False, compare=False)
    results: tuple[ActionResult, ...] = field(default=(), repr=False, compare=False)
    """The backend's answer to each action applied this tick (in order)."""


# ------------------------------------------------------------------------------------------- the edges


class Backend(Protocol):
    def snapshot(self) -> Snapshot: ...

    def apply(self, actions: list[Action]) -> list[ActionResult]: ...


class JobSource(Protocol):
    """Which jobs are managed, with what hints, candidates and progress; and the site's comment format."""

    def classify(self, job: Job) -> Observed: ...

    def price(self, hints: Hints, job: Job, cluster: Cluster) -> tuple[Candidate, ...]: ...

    def progress(self, job: Job) -> float: ...

    def keep_hints(self, action: Action, job: Job | None) -> Action: ...

    def refusal_note(self, observed: Observed) -> Action | None: ...


class TickJournal(Protocol):
    """Where a tick's state, decisions and intents are kept, and how intents reach the backend."""

    mode: str

    def begin(self, now: float) -> int | None: ...

    def roll_forward(self, backend: Backend, now: float) -> ApplyReport: ...

    def observed(self, snapshot: Snapshot, now: float) -> None: ...

    def load_state(self) -> SchedulerState: ...

    def record(self, tick_id: int, tick: RecordedTick) -> list[Any]: ...

    def apply(self, backend: Backend, intents: list[Any], now: float) -> tuple[ApplyReport, list[ActionResult]]: ...

    def finish(self, tick_id: int | None, error: str = "", **fields: Any) -> None: ...


@dataclass(frozen=True)
class RecordedTick:
    """Everything step 5 journals in one transaction."""

    snapshot: Snapshot
    observed: Sequence[Observed]
    managed: Sequence[ManagedJob]
    refused: tuple[Observed, ...]
    output: TickOutput
    actions: Sequence[Action]
    policy_name: str


# ------------------------------------------------------------------------------------------ observe steps


def with_node_gpu_type(job: Job, cluster: Cluster) -> Job:
    """A running job with an untyped GPU request (``--gres=gpu:N``) uses its nodes' GPU type: say so.

    The type read from the nodes is exact, but stays a preference (``gpu_type_preferred``): the request is still
    untyped, so after a requeue the daemon may move it through node features (``slurmplan.rules``).
    """
    if job.gpu_type or not job.nodes or not job.state.active:
        return job
    types = set()
    for name in job.nodes:
        try:
            types.add(cluster.node(name).gpu_type)
        except KeyError:
            return job
    if len(types) != 1 or None in types:
        return job
    return dataclasses.replace(job, gpu_type=types.pop(), gpu_type_preferred=True)


def with_request(hints: Hints, job: Job) -> Hints:
    """Hints completed from the job's own Slurm request (GPU count and type) where the user left them out.

    A job managed only by its partition has no hints at all; its ``--gres`` request is then what it asked for.
    A *typed* pending request also restricts the types: Slurm cannot move it to another type
    (``SlurmRules.typed_keeps_type``), so offering the policy other types would only strand the job. A type
    named only in ``--constraint`` is a preference (``Job.gpu_type_preferred``): it restricts nothing, and the
    daemon may move the job to another type unless the hints say ``types=``.
    """
    changes: dict[str, object] = {}
    if hints.gpus is None and job.gpus > 0:
        low, high = hints.min_gpus or job.gpus, hints.max_gpus or job.gpus
        changes["gpus"] = min(max(job.gpus, low), high)
    typed = job.gpu_type and not job.gpu_type_preferred
    if typed and job.state is JobState.PENDING and hints.gpu_types != (job.gpu_type,):
        changes["gpu_types"] = (job.gpu_type,)
    return dataclasses.replace(hints, **changes) if changes else hints  # type: ignore[arg-type]


def managed_jobs(
    observed: Sequence[Observed],
    cluster: Cluster,
    source: JobSource,
    memo: dict[int, tuple[Job, float, ManagedJob]] | None = None,
) -> tuple[list[ManagedJob], list[Observed]]:
    """ManagedJobs for the unfinished managed jobs, plus the jobs refused because they could not be priced.

    ``memo`` (kept by the caller between ticks) maps a job to last tick's ManagedJob: an unchanged job value
    with unchanged progress is neither re-read nor re-priced, and one whose progress alone moved (every running
    job, every tick) keeps last tick's Job, hints and candidates with its new progress, unless its GPU type is read
    from the cluster's nodes (``with_node_gpu_type``). The memo's owner (the simulator) prices a job by its value.
    """
    out: list[ManagedJob] = []
    refused: list[Observed] = []
    for ob in observed:
        job = ob.job
        if ob.hints is None or ob.error or job.state in _FINISHED:  # not ``managed``, ``finished``: calls per job
            continue
        steps = source.progress(job)
        if memo is not None:
            hit = memo.get(job.job_id)
            if hit is not None and hit[0] is job:
                if hit[1] == steps:  # the same job at the same progress: last tick's ManagedJob and memo entry
                    out.append(hit[2])
                    continue
                # a typed job never reads its type from the nodes (``_reads_nodes``' first test, without the call)
                if job.gpu_type or not _reads_nodes(job):
                    # ``_managed_job`` with last tick's Job, hints and candidates and the new progress, written out
                    d = hit[2].__dict__.copy()
                    d["steps_done"] = steps
                    mj = frozen_from(ManagedJob, d)
                    memo[job.job_id] = (job, steps, mj)
                    out.append(mj)
                    continue
        job = with_node_gpu_type(ob.job, cluster)
        hints = with_request(ob.hints, ob.job)
        try:
            cands = source.price(hints, ob.job, cluster)
        except (SlurmplanError, ValueError, KeyError) as exc:
            log.warning("job %d: cannot price its hints: %s", ob.job.job_id, exc)
            refused.append(Observed(ob.job, None, one_line(f"{type(exc).__name__}: {exc}")))
            continue
        mj = _managed_job(job, hints, cands, steps)
        if memo is not None:
            memo[ob.job.job_id] = (ob.job, steps, mj)
        out.append(mj)
    return out, refused


_FINISHED = tuple(s for s in JobState if s.finished)
"""``JobState.finished``'s states, for a membership test without the property's call (every job, every tick)."""


def _reads_nodes(job: Job) -> bool:
    """Whether ``with_node_gpu_type`` reads this job's GPU type from the cluster's nodes (and so may answer
    otherwise for the same job value on another tick)."""
    return not job.gpu_type and bool(job.nodes) and job.state.active


def _managed_job(job: Job, hints: Hints, candidates: tuple[Candidate, ...], steps_done: float) -> ManagedJob:
    """``ManagedJob(job, hints, candidates, steps_done)`` without the frozen dataclass's per-field setattr (it has
    no ``__post_init__``): a running job's progress moves every tick, so every running job gets a new one."""
    return frozen_from(ManagedJob, {"job": job, "hints": hints, "candidates": candidates, "steps_done": steps_done})


def prune(
    state: SchedulerState,
    managed: Sequence[ManagedJob],
    observed: Sequence[Observed] = (),
    now: float | None = None,
    max_gap_s: float = TickConfig.round_s,
) -> SchedulerState:
    """Forget jobs that are no longer managed and unfinished (finished, gone, or turned unmanaged), remembering the
    run lengths of those that finished or are gone, not of those still ``observed`` unfinished (issue 23,
    ``mechanism.lengths``: the expected remaining time is learned from them, on both backends alike)."""
    alive = {m.job.job_id for m in managed}
    if state.jobs.keys() <= alive:  # every remembered job is still managed (compared in C: every tick)
        return state
    unfinished = {o.job.job_id for o in observed if not o.job.state.finished}
    runs = finished_runs(state, alive, unfinished, state.last_tick if now is None else now, max_gap_s)
    jobs = {j: s for j, s in state.jobs.items() if j in alive}
    return replace(state, jobs=jobs, finished_lengths=remember_finished(state.finished_lengths, runs))


# -------------------------------------------------------------------------------------------- shaping


def untyped_update(action: Action, job: Job | None, rules: SlurmRules = SLURM_22_05) -> Action:
    """Keep a GPU request's typing as Slurm requires (``rules``): an untyped request never gains a GRES type.

    A request with a type only by preference moves through the node feature (the backend writes ``Features=``);
    a request with no type at all keeps none, and the node list picks the GPUs.
    """
    if action.kind is not ActionKind.UPDATE or job is None or job.gpu_type or action.gpu_type is None:
        return action
    if not rules.mixed_type_refused:
        return action
    if not job.gpus_per_node and not action.nodelist:
        return action  # a job without GPUs now: only a typed request can say which GPUs it gets
    return replace(action, gpu_type=None)


def drop_no_ops(actions: Sequence[Action], jobs: Mapping[int, Job]) -> list[Action]:
    """Diff before write: skip actions whose effect the backend already shows (no needless scontrol calls).

    The comparison follows the batch in order, so a RELEASE after a HOLD of the same tick is kept. Only the
    jobs the actions name are looked at (the simulator's ticks act on few of many jobs).
    """
    out = []
    held: dict[int, bool] = {}
    pending: dict[int, bool] = {}
    comment: dict[int, str] = {}
    for a in actions:
        j = a.job_id
        job = jobs.get(j)
        if job is None:
            out.append(a)
            continue
        if j not in held:
            held[j], pending[j], comment[j] = job.held, job.state is JobState.PENDING, job.admin_comment.strip()
        if a.kind is ActionKind.HOLD and pending[j] and held[j]:
            continue
        if a.kind is ActionKind.RELEASE and pending[j] and not held[j]:
            continue
        if a.kind is ActionKind.ANNOTATE and a.admin_comment is not None and comment[j] == a.admin_comment.strip():
            continue
        if a.kind in (ActionKind.HOLD, ActionKind.REQUEUE_HOLD):
            held[j] = True
        if a.kind is ActionKind.REQUEUE_HOLD:
            pending[j] = True
        if a.kind is ActionKind.RELEASE:
            held[j] = False
        if a.admin_comment is not None:
            comment[j] = a.admin_comment.strip()
        out.append(a)
    return out


def shape_actions(
    decided: Sequence[Action],
    refused: Sequence[Observed],
    jobs: Mapping[int, Job],
    source: JobSource,
    rules: SlurmRules = SLURM_22_05,
) -> list[Action]:
    """The mechanism's actions made safe for the backend's rules, plus refusal notes, minus no-ops."""
    actions = [untyped_update(source.keep_hints(a, jobs.get(a.job_id)), jobs.get(a.job_id), rules) for a in decided]
    actions += [a for o in refused if (a := source.refusal_note(o)) is not None]
    return drop_no_ops(actions, jobs)


# ------------------------------------------------------------------------------------- applying actions


SKIPPED = "skipped: an earlier action of this job failed"
"""The result of an action not sent because one before it for the same job failed (it stays an intent)."""


def apply_in_waves(backend: Backend, actions: Sequence[Action]) -> list[ActionResult | None]:
    """The one rule for applying a tick's actions, used by both journals; one result per action, in order.

    One job's actions go in order and stop at its first failure, so a job whose UPDATE was refused is never
    released with the old request (its later actions get None: not applied). Wave k holds the k-th action of
    every job whose earlier actions took, so the backend may batch one kind across jobs (``scontrol hold
    1,2,3``). A backend that raises fails the whole wave with the exception's text (Slurm unreachable).
    """
    by_job: dict[int, list[int]] = {}
    for i, action in enumerate(actions):
        by_job.setdefault(action.job_id, []).append(i)
    results: list[ActionResult | None] = [None] * len(actions)
    queues = list(by_job.values())
    while queues:
        wave = [q[0] for q in queues]
        try:
            answers = backend.apply([actions[i] for i in wave])
        except Exception as exc:  # a backend bug or Slurm unreachable: the wave failed, later actions wait
            log.warning("applying %d actions raised: %s", len(wave), exc)
            answers = [ActionResult(actions[i], False, f"{type(exc).__name__}: {exc}") for i in wave]
        for i, answer in zip(wave, answers, strict=True):
            results[i] = answer
        queues = [q[1:] for q, answer in zip(queues, answers, strict=True) if answer.ok and len(q) > 1]
    return results


# ------------------------------------------------------------------------------------------- the journal


class MemJournal:
    """The simulator's journal: the scheduler state in an attribute, intents applied as one batch.

    Nothing is stored per tick beyond the state (the simulator records what it needs from the report), so a
    13,000-job run costs no more here than the plain loop did.
    """

    mode = "act"

    def __init__(self, state: SchedulerState | None = None) -> None:
        self.state = state or SchedulerState()
        self.ticks = 0

    def begin(self, now: float) -> int | None:
        self.ticks += 1
        return self.ticks

    def roll_forward(self, backend: Backend, now: float) -> ApplyReport:
        return ApplyReport()  # every tick applies its intents before it returns: nothing is left over

    def observed(self, snapshot: Snapshot, now: float) -> None:
        return None

    def load_state(self) -> SchedulerState:
        return self.state

    def record(self, tick_id: int, tick: RecordedTick) -> list[Any]:
        self.state = tick.output.state
        return list(tick.actions)

    def apply(self, backend: Backend, intents: list[Any], now: float) -> tuple[ApplyReport, list[ActionResult]]:
        """The daemon's rule (:func:`apply_in_waves`); an action skipped after its job's failure is dropped,
        as the daemon drops it when its intent goes stale (a simulated tick leaves nothing to roll forward)."""
        answers = apply_in_waves(backend, intents)
        pairs = zip(intents, answers, strict=True)
        results = [r if r is not None else ActionResult(a, False, SKIPPED) for a, r in pairs]
        ok = sum(1 for r in results if r.ok)
        return ApplyReport(applied=ok, failed=sum(1 for r in answers if r is not None and not r.ok)), results

    def finish(self, tick_id: int | None, error: str = "", **fields: Any) -> None:
        return None


# ----------------------------------------------------------------------------------------------- the tick


def default_decide(inp: TickInput, policy: Any, state: SchedulerState) -> TickOutput:
    """``tick.decide``, imported when first called (tests inject their own ``decide`` instead)."""
    from slurmplan.tick import decide

    return decide(inp, policy, state)


def run_tick(
    backend: Backend,
    clock: Clock,
    journal: TickJournal,
    policy: Any,
    source: JobSource,
    *,
    config: TickConfig | None = None,
    rules: SlurmRules | None = None,
    decide: DecideFn = default_decide,
    memo: dict[int, tuple[Job, float, ManagedJob]] | None = None,
) -> TickReport:
    """One tick. Order chosen so that a tick killed at any line loses nothing (see ``control/runner.py``).

    ``clock`` gives the journal's time (the wall clock for the daemon, the virtual one for the simulator);
    decisions read the snapshot's time. ``rules`` defaults to the backend's own (``backend.rules``, read after
    the snapshot: a Slurm backend knows its version from the JSON it read).
    """
    config = config or TickConfig()
    t0 = time.perf_counter()
    tick_id = journal.begin(clock())
    try:
        return _tick_body(backend, clock, journal, policy, source, config, rules, decide, memo, tick_id, t0)
    except Exception as exc:
        if tick_id is not None:  # the failure is on record; the next tick rolls forward what was written
            journal.finish(tick_id, error=f"tick failed: {type(exc).__name__}: {exc}")
        raise


def _observe(
    backend: Backend, clock: Clock, journal: TickJournal, tick_id: int | None, t0: float
) -> tuple[Snapshot | None, ApplyReport, str]:
    """Snapshot, roll forward pending intents (then look again); ``(None, _, why)`` when the cluster is unreadable."""
    rolled = ApplyReport()
    try:
        snapshot = backend.snapshot()
        rolled = journal.roll_forward(backend, clock())
        if rolled.applied:
            snapshot = backend.snapshot()  # decide on the state the rolled-forward actions made
    except Exception as exc:  # Slurm unreachable or answering garbage: decide nothing this time
        reason = f"cannot observe the cluster: {type(exc).__name__}: {exc}"
        log.error("tick skipped: %s", reason)
        journal.finish(tick_id, error=reason, observe_s=time.perf_counter() - t0)
        return None, rolled, reason
    journal.observed(snapshot, clock())
    return snapshot, rolled, ""


def _tick_body(
    backend: Backend,
    clock: Clock,
    journal: TickJournal,
    policy: Any,
    source: JobSource,
    config: TickConfig,
    rules: SlurmRules | None,
    decide: DecideFn,
    memo: dict[int, tuple[Job, float, ManagedJob]] | None,
    tick_id: int | None,
    t0: float,
) -> TickReport:
    mode = journal.mode
    snapshot, rolled, why = _observe(backend, clock, journal, tick_id, t0)
    if snapshot is None:
        return TickReport(mode=mode, tick_id=tick_id, rolled_forward=rolled, skipped=why)
    observed = [source.classify(job) for job in snapshot.jobs]
    managed, unpriced = managed_jobs(observed, snapshot.cluster, source, memo)
    refused = tuple([o for o in [*observed, *unpriced] if o.error and not o.job.state.finished])  # a list: no generator
    state = prune(journal.load_state(), managed, observed, snapshot.time, config.round_s)
    t1 = time.perf_counter()

    inp = TickInput(now=snapshot.time, cluster=snapshot.cluster, jobs=tuple(managed), config=config)
    out = decide(inp, policy, state)
    t2 = time.perf_counter()

    by_id = {j.job_id: j for j in snapshot.jobs} if out.actions or refused else {}
    rules = rules or getattr(backend, "rules", SLURM_22_05)  # after the snapshot: the backend knows its version
    actions = shape_actions(out.actions, refused, by_id, source, rules)
    # the report's fields known now; it is built once, when the tick's last ones are (not built, then replaced)
    report: dict[str, Any] = dict(
        mode=mode,
        tick_id=tick_id,
        round_index=out.state.round_index,
        new_round=out.new_round,
        managed=len(managed),
        unmanaged=len([o for o in observed if o.hints is None and not o.error and not o.job.state.finished]),
        refused=refused,
        actions=tuple(actions),
        assignments=out.assignments,
        rolled_forward=rolled,
        observe_s=t1 - t0,
        decide_s=t2 - t1,
        tick_input=inp,
        output=out,
    )
    if tick_id is None:  # dry run: print, change nothing
        return TickReport(**report, act_s=time.perf_counter() - t2)
    policy_name = str(getattr(policy, "name", "") or type(policy).__name__)
    recorded = RecordedTick(snapshot, observed, managed, refused, out, actions, policy_name)
    intents = journal.record(tick_id, recorded)
    applied, results = ApplyReport(), []
    if mode == "act" and intents:
        applied, results = journal.apply(backend, intents, clock())
    t3 = time.perf_counter()
    journal.finish(
        tick_id,
        round_index=out.state.round_index,
        new_round=int(out.new_round),
        observe_s=t1 - t0,
        decide_s=t2 - t1,
        act_s=t3 - t2,
        jobs=len(managed),
        actions=len(actions),
    )
    return TickReport(**report, applied=applied, act_s=t3 - t2, results=tuple(results))


_MAX_ERROR_CHARS = 200


def one_line(text: str) -> str:
    """An error text on one line of at most 200 characters (it goes into an admin comment and a table cell)."""
    clean = " ".join(text.replace("||", "|").split())
    return clean if len(clean) <= _MAX_ERROR_CHARS else clean[: _MAX_ERROR_CHARS - 3] + "..."
