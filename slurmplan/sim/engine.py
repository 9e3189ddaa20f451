"""The simulation loop: the daemon's tick over the in-memory backend, with a clock that jumps event to event.

Every iteration is the daemon's own tick, ``slurmplan.pipeline.run_tick``, over the simulated backend, an
in-memory journal and the virtual clock (observe -> managed jobs -> ``tick.decide`` -> shape -> apply),
followed by a jump of the virtual clock to the next thing that can change a decision: a round boundary, an
arrival or a completion. Nothing advances second by second, so a two-week trace costs as many ticks as it has
events, and the decision code (shared with the daemon) is the only expensive part. Determinism: no wall clock,
no unordered iteration, the seed lives in the trace.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

from slurmplan.domain import Action, ActionKind, Candidate, Cluster, Hints, Job, Policy, Reason
from slurmplan.mechanism.engine import ON_TIME_S
from slurmplan.pipeline import MemJournal, Observed, run_tick
from slurmplan.rules import NEWEST, rules_named
from slurmplan.sim.backend import SimBackend, SimJob
from slurmplan.sim.cluster import ClusterSpec
from slurmplan.sim.result import JobRecord, SimResult
from slurmplan.sim.workload import Workload
from slurmplan.tick import ManagedJob, SchedulerState, TickConfig, TickInput, TickOutput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimOptions:
    """Knobs of one run; ``reconfig_cost_s=0`` is the zero-cost mode used to compare with Gavel."""

    reconfig_cost_s: float = TickConfig.reconfig_cost_s
    round_s: float | None = None
    """Round length; None takes the daemon's default (``TickConfig.round_s``, 360 s)."""
    reconfig_threshold: float = TickConfig.reconfig_threshold
    """Rubick's rule, as the daemon's ``reconfig_threshold`` (the policy file's value is not read)."""
    event_ticks: bool = True
    """Tick at arrivals and completions too (a daemon with a short interval), not only at round boundaries."""
    arrival_ticks: bool = True
    """Tick when a job arrives. Off, an arrival is first seen at the next round or completion tick (Gavel's
    rule for arrivals); it saves the ticks that only note a new held job, at some cost in fidelity."""
    tick_s: float = 0.0
    """The daemon's tick interval: events are seen at the next tick of this grid (0: at the event itself)."""
    stop_when_window_done: bool = False
    """Stop once every ``in_window`` job finished (Gavel measures a window while later jobs keep arriving)."""
    requeue_delay_s: float = TickConfig.requeue_delay_s
    """Seconds a requeued job waits before it may start again on a node it just left
    (``SlurmRules.requeue_start_delay_s``): the daemon's default, ``TickConfig.requeue_delay_s`` (Slurm's 121 s);
    ``--zero-cost`` sets 0 (Gavel's moves are instant)."""
    signal_min_run_s: float = TickConfig.signal_min_run_s
    """Least seconds a job runs before the checkpoint signal: the daemon's default, ``TickConfig.signal_min_run_s``
    (10 s); ``--zero-cost`` sets 0."""
    slurm_version: str = NEWEST.label
    """Whose rules for changing a job the simulated Slurm enforces (``slurmplan.rules``; default the newest)."""
    start_latency_s: float = 0.0
    """Seconds from a job's start to it training, paid at every start (Slurm's launch: ~3.5 s on the dev
    cluster). 0 by default: Gavel's starts are instant, and at real time scales a few seconds are noise."""
    lead_s: float = 0.0
    """Seconds the daemon started before the first arrival: its first tick (an empty round) and its rounds' and
    ticks' grids begin then. 0: the first arrival opens round 1. Shifting it measures how much an outcome depends
    on the rounds' phase (issue 23, nineteenth session: a real daemon ticks from its own start)."""
    max_time_s: float = math.inf
    idle_rounds: int = 3
    """Stop after this many round ticks in a row with nothing running and nothing left to arrive."""
    progress: bool = False


class Simulation:
    """One policy over one trace on one cluster. ``run()`` returns a SimResult; ``step()`` runs one tick."""

    def __init__(
        self,
        workloads: Mapping[int, Workload],
        cluster: ClusterSpec,
        policy: Policy,
        options: SimOptions = SimOptions(),
        decide=None,
    ) -> None:
        if decide is None:
            from slurmplan.tick import decide as tick_decide

            decide = tick_decide
        self.decide = decide
        self.workloads = dict(workloads)
        self.cluster = cluster
        self.policy = policy
        self.options = options
        # Round settings have one owner, the tick's config (TickConfig): the daemon fills it from its YAML, the
        # simulator from these options. A policy file's round_s/reconfig_threshold are not read by either.
        self.tick_config = TickConfig(
            round_s=options.round_s or TickConfig.round_s,
            reconfig_cost_s=options.reconfig_cost_s,
            reconfig_threshold=options.reconfig_threshold,
            requeue_delay_s=options.requeue_delay_s,
            start_latency_s=options.start_latency_s,
            signal_min_run_s=options.signal_min_run_s,
        )
        rules = dataclasses.replace(rules_named(options.slurm_version), requeue_start_delay_s=options.requeue_delay_s)
        self.backend = SimBackend(
            nodes=cluster.nodes(),
            rate_fn=self._rate,
            reconfig_cost_s=options.reconfig_cost_s,
            start_latency_s=options.start_latency_s,
            rules=rules,
        )
        self.backend.on_finish = self._finished
        self._node_gpus = {g.gpu_type: g.gpus_per_node for g in cluster.groups}
        self.journal = MemJournal()
        self.source = WorkloadSource(self.workloads, self.backend)
        self._memo: dict[int, tuple[Job, float, ManagedJob]] = {}
        self.arrivals: Sequence[Workload] = sorted(self.workloads.values(), key=lambda w: (w.trace.arrival_s, w.job_id))
        self._next_arrival = 0
        self._origin = 0.0
        self._reasons: dict[int, Reason] = {}
        self._window_left = sum(1 for w in self.arrivals if w.trace.in_window)
        self.ticks = 0
        self.rounds = 0
        self.action_counts: Counter[str] = Counter()
        self.refused = 0
        self.decide_s = 0.0
        self.last_input: TickInput | None = None
        self.last_output: TickOutput | None = None
        self._bar = None
        self._follow_up = False
        self._follow_up_at: float | None = None

    # ------------------------------------------------------------------------------------------- plumbing

    def _rate(self, job_id: int, gpu_type: str | None, gpus: int, admin_comment: str) -> float:
        return self.workloads[job_id].rate(gpu_type, gpus, admin_comment)

    @property
    def state(self) -> SchedulerState:
        """The scheduler's state between ticks (kept by the in-memory journal, as the daemon's is in SQLite)."""
        return self.journal.state

    @state.setter
    def state(self, value: SchedulerState) -> None:
        self.journal.state = value

    def _finished(self, job: SimJob) -> None:
        self._memo.pop(job.job_id, None)
        self.source.forget(job.job_id)
        if self.workloads[job.job_id].trace.in_window:
            self._window_left -= 1
        if self._bar is not None:
            self._bar.update(1)

    def submit_arrivals(self) -> None:
        """Submit every job that has arrived by now (held, as job_submit.lua holds managed jobs)."""
        now = self.backend.now
        while self._next_arrival < len(self.arrivals) and self.arrivals[self._next_arrival].trace.arrival_s <= now:
            w = self.arrivals[self._next_arrival]
            self._next_arrival += 1
            t = w.trace
            gpu_type = t.gpu_type or (w.requested.cell.gpu_type if w.requested else None)
            per_node = min(t.gpus, self._node_gpus.get(gpu_type, t.gpus)) if gpu_type else t.gpus
            self.backend.submit(
                SimJob(
                    job_id=t.job_id,
                    submit_time=t.arrival_s,
                    work_total=w.work_total,
                    account=t.account,
                    name=t.job_type or t.model or t.name,
                    gpu_type=gpu_type,  # as --constraint: a preference the daemon may move (rules.py)
                    gpus_per_node=per_node,
                    node_count=-(-t.gpus // per_node),
                )
            )

    # ------------------------------------------------------------------------------------------------ loop

    def step(self) -> TickOutput:
        """One daemon tick at the current simulated time: ``pipeline.run_tick`` with the simulated edges."""
        self.submit_arrivals()
        report = run_tick(
            self.backend,
            lambda: self.backend.now,
            self.journal,
            self.policy,
            self.source,
            config=self.tick_config,
            decide=self.decide,
            memo=self._memo,
        )
        out, inp, results = report.output, report.tick_input, report.results
        assert out is not None and inp is not None
        snap_time = inp.now
        self.decide_s += report.decide_s
        self.last_input, self.last_output = inp, out
        self.ticks += 1
        self.rounds += bool(out.new_round)
        # each job's last reason, for its record at the end: the pairs taken in C (every job, every tick)
        self._reasons.update(zip(map(_JOB_ID, out.assignments), map(_REASON, out.assignments), strict=True))
        for r in results:
            self.action_counts[r.action.kind.value] += 1
            self.refused += not r.ok
        # A signalled job checkpoints and requeues itself at once here; the daemon notices at its next tick and
        # then starts it where the round moved it. Waiting for the next round or event instead would leave its
        # new GPUs idle for a whole round (once per instant: Gavel's moves take no time either).
        signalled = any(r.ok and r.action.kind is ActionKind.SIGNAL for r in results)
        self._follow_up = signalled and self._follow_up_at != snap_time
        self._follow_up_at = snap_time if self._follow_up else self._follow_up_at
        return out

    def next_event(self) -> float:
        """When the daemon's next tick that can matter falls: round boundary, arrival or completion."""
        now = self.backend.now
        if self._follow_up:  # the daemon's next tick (at once under Gavel's round-only rule)
            return self._on_grid(now + 1e-6) if self.options.event_ticks else now
        start = self.state.last_round_start if self.state.last_round_start is not None else now
        next_round = start + self.tick_config.round_s
        if next_round <= now:
            next_round = now + self.tick_config.round_s
        candidates = [self._on_grid(next_round)]  # the daemon notices a round is due at its next tick
        if self.options.event_ticks:
            event = self.backend.next_completion()
            if self._next_arrival < len(self.arrivals) and self.options.arrival_ticks:
                event = min(event, self.arrivals[self._next_arrival].trace.arrival_s)
            candidates.append(self._on_grid(event))
            if not self.options.arrival_ticks and not self.backend.jobs and self._next_arrival < len(self.arrivals):
                candidates.append(self._on_grid(self.arrivals[self._next_arrival].trace.arrival_s))  # idle cluster
        else:
            candidates.append(self._round_after(self.backend.next_completion(), start))
            if self._next_arrival < len(self.arrivals):
                candidates.append(self._round_after(self.arrivals[self._next_arrival].trace.arrival_s, start))
        first = min(candidates)
        # candidates less than ON_TIME_S apart are one tick: the round grid (a sum of round lengths) and an arrival's
        # tick (``_on_grid``, never before the arrival) can land an ulp apart, and two ticks there would see the
        # arrival only after the round, between rounds (off its --constraint under plain Slurm's model); the daemon
        # notices both at one tick, and the round is due ON_TIME_S early (``on_round_grid``)
        return max(max(c for c in candidates if c - first < ON_TIME_S), now)

    def _on_grid(self, t: float) -> float:
        """The daemon's first tick at or after ``t`` (ticks every ``tick_s`` from the start of the run)."""
        step = self.options.tick_s
        if step <= 0 or not math.isfinite(t):
            return t
        k = math.ceil((t - self._origin) / step - 1e-9)
        # never before ``t``: a grid point a rounding error below an arrival would tick before the arrival, forever
        # (a start before the first arrival, ``lead_s``, puts the grid off the arrivals' decimals)
        return max(self._origin + k * step, t)

    def _round_after(self, t: float, start: float) -> float:
        if not math.isfinite(t):
            return t
        k = math.ceil((t - start) / self.tick_config.round_s)
        return start + max(k, 1) * self.tick_config.round_s

    @property
    def arrivals_left(self) -> int:
        return len(self.arrivals) - self._next_arrival

    def _done(self, idle: int) -> bool:
        if self.options.stop_when_window_done and self._window_left <= 0:
            return True
        nothing_left = self._next_arrival >= len(self.arrivals)
        if nothing_left and not self.backend.jobs:
            return True
        waiting = math.isfinite(self.backend.next_begin())  # a requeued job will become startable: not stuck
        return nothing_left and not self.backend.running and not waiting and idle >= self.options.idle_rounds

    def run(self) -> SimResult:
        """Tick, jump to the next event, repeat, until the trace is done (or cannot progress)."""
        wall = time.perf_counter()
        if self.arrivals and not self.backend.jobs and not self.backend.finished:
            self.backend.start_at(self.arrivals[0].trace.arrival_s - self.options.lead_s)
        self._origin = self.backend.now
        self._bar = _progress_bar(len(self.arrivals), self.options.progress)
        idle = 0
        gc_before = _fewer_collections()
        try:
            while True:
                out = self.step()
                idle = (
                    idle + 1 if (out.new_round and not self.backend.running) else (0 if self.backend.running else idle)
                )
                if self._done(idle):
                    break
                t_next = self.next_event()
                if t_next > self.options.max_time_s or not math.isfinite(t_next):
                    log.warning("stopping at t=%.0f: next event at %s is past the limit", self.backend.now, t_next)
                    break
                self.backend.advance(t_next)
        finally:
            _restore_collections(*gc_before)
            if self._bar is not None:
                self._bar.close()
        return self._result(time.perf_counter() - wall)

    # --------------------------------------------------------------------------------------------- result

    def _result(self, wall_s: float) -> SimResult:
        records = []
        sims = {**self.backend.finished, **self.backend.jobs}
        for w in self.arrivals:
            sim = sims.get(w.job_id)
            records.append(_record_for(w, sim, self._reasons.get(w.job_id)))
        policy_name = getattr(self.policy, "name", None) or type(self.policy).__name__
        return SimResult(
            policy=str(policy_name),
            cluster=str(self.cluster),
            total_gpus=self.cluster.total_gpus,
            reconfig_cost_s=self.options.reconfig_cost_s,
            round_s=self.tick_config.round_s,
            jobs=tuple(records),
            times=tuple(p[0] for p in self.backend.series),
            busy_gpus=tuple(p[1] for p in self.backend.series),
            active_jobs=tuple(p[2] for p in self.backend.series),
            end_s=self.backend.now,
            ticks=self.ticks,
            rounds=self.rounds,
            actions=dict(sorted(self.action_counts.items())),
            refused_actions=self.refused,
            wall_s=wall_s,
            decide_s=self.decide_s,
            start_grid_s=self.options.tick_s if self.options.event_ticks else self.tick_config.round_s,
        )


_JOB_ID, _REASON = attrgetter("job_id"), attrgetter("reason")
"""An assignment's job and reason (``Simulation.step`` reads both of every assignment, every tick)."""

_GC_YOUNG = 20_000
"""Allocations between two collections of the youngest generation during a run (Python's default: 700)."""


def _fewer_collections() -> tuple[tuple[int, int, int], bool]:
    """Set the garbage collector up for a run; returns what ``_restore_collections`` puts back afterwards.

    Everything built before the run (workloads, candidates, the decision code's memos) lives until its end, and
    ticks make little cyclic garbage: on ``bench_sim --days 2`` the collector found ~850 cycles while walking
    the heap ~3,200 times, 5 % of the run's CPU (the full collections walk every candidate of every job). So
    those objects are frozen (no collection walks them again) and the young generation may grow to 20,000
    objects: 0.08 s of collection instead of 1.3 s there. Only when to collect changes, never what a tick sees.
    A process that froze objects itself (``gc.freeze`` before forking) keeps its own freeze as it was.
    """
    old = gc.get_threshold()
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    if old[0]:  # 0: the caller turned automatic collection off; leave it off
        gc.set_threshold(max(old[0], _GC_YOUNG), max(old[1], 10), max(old[2], 10))
    return old, froze


def _restore_collections(threshold: tuple[int, int, int], froze: bool) -> None:
    gc.set_threshold(*threshold)
    if froze:
        gc.unfreeze()


def _record_for(w: Workload, sim: SimJob | None, reason: Reason | None) -> JobRecord:
    t = w.trace
    base = JobRecord(
        job_id=t.job_id,
        arrival_s=t.arrival_s,
        gpus=t.gpus,
        account=t.account,
        job_class=t.job_class.value,
        in_window=t.in_window,
        dedicated_s=w.dedicated_s,
        fastest_s=w.fastest_s,
        best_s=w.best_s,
        deadline_s=t.deadline_s,
        state="not-arrived",
        last_reason=reason.value if reason else "",
    )
    if sim is None:
        return base
    return replace(
        base,
        first_start_s=sim.first_start,
        finish_s=sim.finish_time,
        state=sim.state.value,
        restarts=sim.restart_count,
        reconfigurations=sim.reconfigurations,
        run_s=sim.run_seconds,
        gpu_s=sim.gpu_seconds,
        configs=tuple(sim.configs),
    )


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="job", desc="simulating", leave=False)


class WorkloadSource:
    """The simulator's :class:`~slurmplan.pipeline.JobSource`: every job is managed, with its workload's hints and
    candidates (priced once per job), and its progress read from the simulated backend."""

    def __init__(self, workloads: Mapping[int, Workload], backend: SimBackend) -> None:
        self.workloads = workloads
        self.backend = backend
        self._seen: dict[int, Observed] = {}

    def classify(self, job: Job) -> Observed:
        seen = self._seen.get(job.job_id)
        if seen is None or seen.job is not job:  # the backend rebuilds a job's value only when it changed
            seen = self._seen[job.job_id] = Observed(job, self.workloads[job.job_id].hints)
        return seen

    def forget(self, job_id: int) -> None:
        self._seen.pop(job_id, None)

    def price(self, hints: Hints, job: Job, cluster: Cluster) -> tuple[Candidate, ...]:
        return self.workloads[job.job_id].candidates

    def progress(self, job: Job) -> float:
        return self.backend.jobs[job.job_id].work_done / self.workloads[job.job_id].unit_per_step

    def keep_hints(self, action: Action, job: Job | None) -> Action:
        return action  # the hints live in the workload, not in the admin comment

    def refusal_note(self, observed: Observed) -> Action | None:
        return None  # every workload prices: nothing is refused
