"""The simulator's ClusterBackend: an in-memory Slurm with Slurm's semantics for every action.

The daemon observes Slurm and applies actions through ``slurm.backend``; the simulator swaps in this class and
nothing else, so the decisions are the daemon's own. What each action does here is what ``scontrol`` does on
Slurm 22.05 (DESIGN.md): HOLD sets a pending job's priority to 0; RELEASE lets it start, at once if its node list
(or, without one, any nodes of its GPU type) has the GPUs free; UPDATE changes a pending job's request, and only
the admin comment of a running one; REQUEUE puts a running job back to pending, losing the work since its last
checkpoint; REQUEUE_HOLD does the same and holds it; CANCEL ends it. A SIGNAL stands for the launcher's
checkpoint contract: the simulated job checkpoints and requeue-holds itself, so it loses no work but pays the
reconfiguration cost when it next starts. Managed jobs are submitted held, as job_submit.lua does.

Progress (``advance``) is linear at the throughput of the job's current configuration; the engine owns time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from slurmplan.domain import (
    Action,
    ActionKind,
    ActionResult,
    Cluster,
    GpuType,
    Job,
    JobId,
    JobState,
    Node,
    Snapshot,
    frozen_from,
)
from slurmplan.rules import NEWEST, SlurmRules
from slurmplan.tick_types import TickConfig

log = logging.getLogger(__name__)

_ROUND_OFF_S = 1e-6
"""Seconds within which a job's computed end counts as reached (work accumulates in floats)."""

RateFn = Callable[[JobId, GpuType | None, int, str], float]
"""(job, GPU type, total GPUs, admin comment) -> work units per second in that configuration (0: cannot run)."""


@dataclass
class SimJob:
    """Mutable record of one job inside the simulator (never leaves it; ``Job`` values do)."""

    job_id: JobId
    submit_time: float
    work_total: float
    account: str = "default"
    name: str = ""
    partition: str = "gpu"
    user: str = ""
    comment: str = ""
    gpu_type: GpuType | None = None
    typed: bool = False
    """The GRES request names ``gpu_type`` (``--gres=gpu:a100:2``): it keeps that type (``SlurmRules``). False:
    an untyped request whose type, if any, is the node feature asked for (``--constraint``), which may move."""
    gpus_per_node: int = 1
    node_count: int = 1
    req_nodes: tuple[str, ...] = ()
    admin_comment: str = ""
    state: JobState = JobState.PENDING
    held: bool = True
    nodes: tuple[str, ...] = ()
    alloc_gpus: tuple[int, ...] = ()
    start_time: float | None = None
    first_start: float | None = None
    finish_time: float | None = None
    restart_count: int = 0
    work_done: float = 0.0
    checkpoint_work: float = 0.0
    rate: float = 0.0
    restore_until: float = 0.0
    pending_cost: float = 0.0
    eligible_at: float = 0.0
    """Earliest start after a requeue (``SlurmRules.requeue_start_delay_s``)."""
    ran_on: tuple[str, ...] = ()
    """The nodes the job last ran on (a release pinned elsewhere skips the requeue wait, as on Slurm)."""
    last_update: float = 0.0
    run_seconds: float = 0.0
    gpu_seconds: float = 0.0
    preemptions: int = 0
    reconfigurations: int = 0
    last_config: tuple[GpuType | None, int] | None = None
    configs: list[tuple[float, GpuType | None, int]] = field(default_factory=list)
    cached: Job | None = None

    @classmethod
    def like(cls, job: Job, work_total: float, **fields: object) -> SimJob:
        """A record of ``job`` as Slurm shows it (identity and GPU request); ``fields`` sets the rest.

        Tests mirror a real cluster's jobs, or the jobs they describe, into the simulator this way.
        """
        return cls(
            job_id=job.job_id,
            submit_time=job.submit_time,
            work_total=work_total,
            account=job.account,
            name=job.name,
            gpu_type=job.gpu_type,
            gpus_per_node=job.gpus_per_node,
            node_count=job.node_count,
            admin_comment=job.admin_comment,
            **fields,  # type: ignore[arg-type]
        )

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.node_count


@dataclass
class SimBackend:
    """An in-memory cluster plus jobs; ``snapshot()`` and ``apply()`` are the two edges the tick touches."""

    nodes: tuple[Node, ...]
    rate_fn: RateFn
    reconfig_cost_s: float = TickConfig.reconfig_cost_s
    start_latency_s: float = 0.0
    """Seconds from Slurm starting a job to the job training (release -> Started, PrologSlurmctld, slurmd's
    launch); every start pays it, first starts and restarts alike, holding its GPUs meanwhile."""
    rules: SlurmRules = NEWEST
    """Slurm's rules, enforced here as Slurm enforces them (refusals carry Slurm's message); the newest measured
    version's unless told (``SimOptions.slurm_version``)."""
    submit_held: bool = True
    keep_finished_s: float = 0.0
    """Seconds a finished job stays in ``snapshot()`` (Slurm's MinJobAge, 300 s by default; the simulator
    needs none, the daemon's journal reads the final state from it)."""
    now: float = 0.0
    jobs: dict[JobId, SimJob] = field(default_factory=dict)
    finished: dict[JobId, SimJob] = field(default_factory=dict)
    on_finish: Callable[[SimJob], None] | None = None

    def __post_init__(self) -> None:
        self._index = {n.name: i for i, n in enumerate(self.nodes)}
        self._used = [n.gpus_used for n in self.nodes]
        self._node_cache: list[Node] = list(self.nodes)
        self._dirty: set[int] = set()
        self._cluster: Cluster | None = None
        """The last snapshot's cluster, handed out again while no node's usage changed (it is frozen)."""
        self._due_at: tuple[float, tuple[float, SimJob | None]] | None = None
        """(now, ``_due()``) as ``next_completion`` found it; forgotten by anything that changes a job."""
        self._by_type: dict[GpuType | None, list[int]] = {}
        for i, n in enumerate(self.nodes):
            self._by_type.setdefault(n.gpu_type, []).append(i)
        self.running: dict[JobId, SimJob] = {}
        self._waiting: set[JobId] = set()
        """Requeued jobs whose begin time is still ahead (their start is an event ``advance`` must stop at)."""
        self.requeue_waits = 0
        """Releases of a requeued job onto nodes it just left, so that it waits out Slurm's requeue delay there."""
        self._busy = sum(self._used)
        self.series: list[tuple[float, int, int]] = []
        """(time, busy GPUs, active jobs) at every change, for utilization and fairness over time."""
        self._mark()

    def start_at(self, t: float) -> None:
        """Set the clock before anything happened (the run starts at the first arrival, not at 0)."""
        self._due_at = None
        if self.jobs or self.finished:
            raise ValueError("start_at() only before the first job")
        self.now = t
        self.series.clear()
        self._mark()

    def _mark(self) -> None:
        point = (self.now, self._busy, len(self.jobs))
        if self.series and self.series[-1][1:] == point[1:]:
            return
        if self.series and self.series[-1][0] == self.now:
            self.series[-1] = point
        else:
            self.series.append(point)

    # ------------------------------------------------------------------------------------------- observing

    def snapshot(self) -> Snapshot:
        """The cluster and the active jobs now; unchanged nodes and jobs are reused, not rebuilt."""
        if self._dirty or self._cluster is None:
            for i in self._dirty:
                self._node_cache[i] = _with_used(self.nodes[i], self._used[i])
            self._dirty.clear()
            self._cluster = Cluster(tuple(self._node_cache))  # unchanged nodes: the same Cluster value again
        value = self._job_value
        # ``_job_value``'s hit read in place (most jobs are unchanged since the last snapshot: every job, every tick)
        jobs = tuple([j.cached if j.cached is not None else value(j) for j in self.jobs.values()])
        if self.keep_finished_s > 0:
            since = self.now - self.keep_finished_s
            jobs += tuple(value(j) for j in self.finished.values() if (j.finish_time or 0.0) >= since)
        return Snapshot(time=self.now, cluster=self._cluster, jobs=jobs)

    def _job_value(self, job: SimJob) -> Job:
        if job.cached is None:
            job.cached = Job(
                job_id=job.job_id,
                name=job.name,
                account=job.account,
                user=job.user,
                partition=job.partition,
                comment=job.comment,
                state=job.state,
                state_reason="JobHeldUser" if job.held and job.state is JobState.PENDING else "",
                gpu_type=job.gpu_type,
                gpus_per_node=job.gpus_per_node,
                node_count=job.node_count,
                nodes=job.nodes,
                submit_time=job.submit_time,
                start_time=job.start_time,
                admin_comment=job.admin_comment,
                restart_count=job.restart_count,
                held=job.held and job.state is JobState.PENDING,
                gpu_type_preferred=job.gpu_type is not None and not job.typed,
            )
        return job.cached

    @property
    def busy_gpus(self) -> int:
        return self._busy

    # ---------------------------------------------------------------------------------------------- submit

    def submit(self, job: SimJob) -> None:
        self._due_at = None
        job.held = self.submit_held
        job.last_update = self.now
        self.jobs[job.job_id] = job
        if not job.held:
            self._try_start(job)
        self._mark()

    # -------------------------------------------------------------------------------------------- actions

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        """Apply in order, one result each; then start whatever pending, released job now fits (Slurm's pass)."""
        self._due_at = None
        results = [self._apply_one(a) for a in actions]
        self.schedule_pending()
        return results

    def _apply_one(self, action: Action) -> ActionResult:
        job = self.jobs.get(action.job_id)
        if job is None:
            return ActionResult(action, False, f"Invalid job id specified ({action.job_id})")
        handler = _HANDLERS[action.kind]
        message = handler(self, job, action)
        job.cached = None
        if message:
            log.debug("t=%.0f %s %s refused: %s", self.now, action.kind.value, job.job_id, message)
        return ActionResult(action, not message, message)

    def _hold(self, job: SimJob, action: Action) -> str:
        if job.state is not JobState.PENDING:
            return "Job is no longer pending execution"
        job.held = True
        return ""

    def _release(self, job: SimJob, action: Action) -> str:
        if job.state is not JobState.PENDING:
            return "Job is no longer pending execution"
        job.held = False
        if not self._skip_wait(job) and job.eligible_at > self.now:
            self.requeue_waits += 1
        self._try_start(job)
        return ""

    def _skip_wait(self, job: SimJob) -> bool:
        """The daemon's ``StartTime=now`` on a requeued job pinned to nodes it did not run on (as on Slurm)."""
        if job.eligible_at > self.now and self.rules.may_skip_requeue_wait(job.ran_on, job.req_nodes):
            job.eligible_at = self.now
            return True
        return False

    def _update(self, job: SimJob, action: Action) -> str:
        changes = {
            "gpu_type": action.gpu_type,
            "gpus_per_node": action.gpus_per_node,
            "node_count": action.node_count,
            "req_nodes": tuple(action.nodelist) if action.nodelist is not None else None,
        }
        changes = {k: v for k, v in changes.items() if v is not None and getattr(job, k) != v}
        if changes and job.state is not JobState.PENDING:
            return f"Job is not pending: cannot change {', '.join(sorted(changes))} of a running job"
        refusal = self.rules.type_change_error(
            job.job_id, job.typed, job.gpu_type, changes.get("gpu_type"), f"gres:gpu:{job.gpu_type}:{job.gpus_per_node}"
        )
        if refusal is not None:
            return str(refusal)
        for key, value in changes.items():
            setattr(job, key, value)
        if "req_nodes" in changes and job.eligible_at > self.now and self._skip_wait(job):
            self._try_start(job)  # pinned elsewhere while it waits: the daemon resets its begin time
        if action.admin_comment is not None:
            job.admin_comment = action.admin_comment
        return ""

    def _annotate(self, job: SimJob, action: Action) -> str:
        job.admin_comment = action.admin_comment or ""
        return ""

    def _signal(self, job: SimJob, action: Action) -> str:
        if job.state is not JobState.RUNNING:
            return "Job is not running"
        self._progress(job)
        job.checkpoint_work = job.work_done
        self._requeue(job, hold=True)
        return ""

    def _requeue_action(self, job: SimJob, action: Action) -> str:
        if job.state is not JobState.RUNNING:
            if job.state is JobState.PENDING and action.kind is ActionKind.REQUEUE_HOLD:
                job.held = True  # already back in the queue (it checkpointed on the signal): just hold it
                return ""
            return "Job is not running: requeue refused"
        self._progress(job)
        job.work_done = job.checkpoint_work
        self._requeue(job, hold=action.kind is ActionKind.REQUEUE_HOLD)
        return ""

    def _cancel(self, job: SimJob, action: Action) -> str:
        if job.state is JobState.RUNNING:
            self._progress(job)
            self._free(job)
        self._end(job, JobState.CANCELLED)
        return ""

    # ------------------------------------------------------------------------------------------ mechanics

    def _requeue(self, job: SimJob, *, hold: bool) -> None:
        self._free(job)
        job.state = JobState.PENDING
        job.held = hold
        job.restart_count += 1
        job.preemptions += 1
        job.pending_cost = self.reconfig_cost_s
        job.eligible_at = self.now + self.rules.requeue_start_delay_s
        if self.rules.requeue_start_delay_s > 0:
            self._waiting.add(job.job_id)
        job.start_time = None
        job.ran_on = job.nodes
        job.nodes = ()
        job.rate = 0.0

    def _free(self, job: SimJob) -> None:
        for name, gpus in zip(job.nodes, job.alloc_gpus, strict=True):
            i = self._index[name]
            self._used[i] -= gpus
            self._busy -= gpus
            self._dirty.add(i)
        job.alloc_gpus = ()
        self.running.pop(job.job_id, None)
        self._mark()

    def _end(self, job: SimJob, state: JobState) -> None:
        job.state = state
        job.finish_time = self.now
        job.rate = 0.0
        job.cached = None
        self.jobs.pop(job.job_id, None)
        self.running.pop(job.job_id, None)
        self.finished[job.job_id] = job
        self._mark()
        if self.on_finish is not None:
            self.on_finish(job)

    def _pick_nodes(self, job: SimJob) -> list[int] | None:
        """Nodes for the job's request, as Slurm would: its node list first, then any fitting node of its type."""
        need, per = job.node_count, job.gpus_per_node
        chosen: list[int] = []
        for name in job.req_nodes:
            i = self._index.get(name)
            if i is None or self.nodes[i].gpus - self._used[i] < per:
                return None
            if job.gpu_type and self.nodes[i].gpu_type != job.gpu_type:
                return None
            chosen.append(i)
        if len(chosen) >= need:
            return chosen[:need]
        types = [job.gpu_type] if job.gpu_type else list(self._by_type)
        for gpu in types:
            for i in self._by_type.get(gpu, ()):
                if i not in chosen and self.nodes[i].gpus - self._used[i] >= per:
                    chosen.append(i)
                    if len(chosen) == need:
                        return chosen
            if not job.gpu_type and not job.req_nodes:
                chosen = []
        return None

    def _try_start(self, job: SimJob) -> bool:
        if job.state is not JobState.PENDING or job.held:
            return False
        if job.eligible_at > self.now + _ROUND_OFF_S:
            return False  # a requeued job waits for its begin time (Slurm's cred_expire + 1)
        picked = self._pick_nodes(job)
        if picked is None:
            return False
        gpu_type = self.nodes[picked[0]].gpu_type
        rate = self.rate_fn(job.job_id, gpu_type, job.gpus, job.admin_comment)
        for i in picked:
            self._used[i] += job.gpus_per_node
            self._busy += job.gpus_per_node
            self._dirty.add(i)
        job.nodes = tuple(self.nodes[i].name for i in picked)
        job.alloc_gpus = tuple(job.gpus_per_node for _ in picked)
        job.state = JobState.RUNNING
        job.start_time = self.now
        job.first_start = self.now if job.first_start is None else job.first_start
        job.rate = rate
        job.restore_until = self.now + self.start_latency_s + job.pending_cost
        job.pending_cost = 0.0
        job.last_update = self.now
        config = (gpu_type, job.gpus)
        if job.last_config is not None and job.last_config != config:
            job.reconfigurations += 1
        job.last_config = config
        job.configs.append((self.now, gpu_type, job.gpus))
        job.cached = None
        self.running[job.job_id] = job
        self._mark()
        if rate <= 0:
            log.warning("job %s started on %s x%d where it cannot make progress", job.job_id, gpu_type, job.gpus)
        return True

    def schedule_pending(self) -> int:
        """Slurm's own pass: start released pending jobs in submit order wherever they fit; returns how many."""
        self._due_at = None
        if len(self.running) == len(self.jobs):
            return 0  # every active job runs (``running`` holds exactly the active jobs that run): none waits
        started = 0
        pending = JobState.PENDING
        for job in sorted(
            [j for j in self.jobs.values() if j.state is pending and not j.held],  # a list: no generator per job
            key=lambda j: (j.submit_time, j.job_id),
        ):
            started += self._try_start(job)
        return started

    # -------------------------------------------------------------------------------------------- progress

    def _progress(self, job: SimJob) -> None:
        """Bring one running job's work up to ``now``."""
        if job.state is not JobState.RUNNING:
            return
        busy_from = max(job.last_update, job.restore_until)
        if self.now > busy_from and job.rate > 0:
            job.work_done = min(job.work_total, job.work_done + job.rate * (self.now - busy_from))
        elapsed = self.now - job.last_update
        job.run_seconds += elapsed
        job.gpu_seconds += elapsed * job.gpus
        job.last_update = self.now

    def _next_eligible(self) -> float:
        """The next begin time of a requeued job still waiting for it (inf: none); forgets those passed."""
        if not self._waiting:
            return math.inf
        for job_id in [j for j in self._waiting if j not in self.jobs or self.jobs[j].eligible_at <= self.now]:
            self._waiting.discard(job_id)
        return min((self.jobs[j].eligible_at for j in self._waiting), default=math.inf)

    def next_begin(self) -> float:
        """When the next requeued job's begin time comes (inf: none waits); until then the run can progress."""
        return self._next_eligible()

    def next_completion(self) -> float:
        due = self._due()
        self._due_at = (self.now, due)  # ``advance``'s first look when nothing changed in between (the run loop)
        return due[0]

    def _due(self) -> tuple[float, SimJob | None]:
        """The running job that finishes first (ties: lowest job id) and when; (inf, None) when none will.

        One pass that computes each job's ETA once (every tick asks, over every running job), inline rather than
        a method call per job: at its current rate, after its restore; inf when it makes no progress. ETA is
        ``max(last_update, restore_until) + max(0.0, work_total - work_done) / rate``, its two ``max`` written as
        conditionals that pick the same operand (two builtin calls per running job per call saved).

        From ``last_update``, not ``now``: ``work_done`` stands as of ``last_update``. The two are equal except
        inside ``advance`` after a completion, which brings only the finished job up to ``now``; an ETA from
        ``now`` would then put a second completion in the same interval late by the time already passed."""
        best, due, due_id = math.inf, None, 0
        running, inf = JobState.RUNNING, math.inf
        for job in self.running.values():
            rate = job.rate
            if job.state is not running or rate <= 0:
                eta = inf
            else:
                restore, last, left = job.restore_until, job.last_update, job.work_total - job.work_done
                eta = (restore if restore > last else last) + (left if left > 0.0 else 0.0) / rate
            if due is None or eta < best or (eta == best and job.job_id < due_id):
                best, due, due_id = eta, job, job.job_id
        return best, due

    def advance(self, t: float) -> list[SimJob]:
        """Move the clock to ``t``; jobs that finish on the way complete at their exact time, in order.

        A completion frees GPUs at once, and Slurm's own pass starts any released job waiting for them (the
        daemon only reacts at its next tick). Returns the completed jobs.
        """
        if t < self.now:
            raise ValueError(f"time cannot go back: {t} < {self.now}")
        done = []
        hint, self._due_at = self._due_at, None
        while True:
            eta, due = hint[1] if hint is not None and hint[0] == self.now else self._due()
            hint = None
            eligible = self._next_eligible()
            if eligible <= t and (due is None or eligible < eta):
                self.now = max(self.now, eligible)  # a requeued job's begin time: Slurm's pass may start it
                self._progress_running()
                self.schedule_pending()
                continue
            # A job whose last 1e-11 of work ends a hair after t (float round-off) finishes at t: otherwise a tick
            # grid that rounds its end down to t would wait for it forever.
            if due is None or eta > t + _ROUND_OFF_S:
                break
            self.now = max(self.now, min(eta, t))
            self._progress(due)
            due.work_done = due.work_total
            self._free(due)
            self._end(due, JobState.COMPLETED)
            done.append(due)
            self.schedule_pending()
        self.now = t
        self._progress_running()
        return done

    def _progress_running(self) -> None:
        """``_progress`` for every running job, its body inline (the same arithmetic in the same order): every
        tick brings every running job up to ``now``, and a method call per job was 2 % of a LAS run's profile."""
        now, running = self.now, JobState.RUNNING
        for job in self.running.values():
            if job.state is not running:
                continue
            last, restore = job.last_update, job.restore_until
            busy_from = restore if restore > last else last  # max(last, restore), without the call
            if now > busy_from and job.rate > 0:
                done = job.work_done + job.rate * (now - busy_from)
                job.work_done = done if done < job.work_total else job.work_total  # min(work_total, done)
            elapsed = now - last
            job.run_seconds += elapsed
            job.gpu_seconds += elapsed * (job.gpus_per_node * job.node_count)
            job.last_update = now

    def work_snapshot(self) -> Mapping[JobId, float]:
        return {j.job_id: j.work_done for j in self.jobs.values()}


def _with_used(node: Node, gpus_used: int) -> Node:
    """``replace(node, gpus_used=...)`` without ``replace``'s per-field work (Node is a frozen dataclass without
    ``__post_init__``): every node a tick's starts and stops touched, every tick."""
    return frozen_from(Node, {**node.__dict__, "gpus_used": gpus_used})


_HANDLERS: dict[ActionKind, Callable[[SimBackend, SimJob, Action], str]] = {
    ActionKind.HOLD: SimBackend._hold,
    ActionKind.RELEASE: SimBackend._release,
    ActionKind.UPDATE: SimBackend._update,
    ActionKind.ANNOTATE: SimBackend._annotate,
    ActionKind.SIGNAL: SimBackend._signal,
    ActionKind.REQUEUE: SimBackend._requeue_action,
    ActionKind.REQUEUE_HOLD: SimBackend._requeue_action,
    ActionKind.CANCEL: SimBackend._cancel,
}
