"""The tick's data: what goes into one decision, what comes out, and what is remembered between ticks.

Kept apart from ``tick.py`` so that the mechanism (which computes the decision) and ``tick.decide`` (its one
entry point) can both import these types without importing each other: ``tick -> mechanism -> tick_types``
is a line, not a cycle. Imports only ``domain``. ``slurmplan.tick`` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmplan.domain import (
    SLURM_REQUEUE_DELAY_S,
    Action,
    Allocation,
    Assignment,
    Candidate,
    Cell,
    Cluster,
    GpuType,
    Hints,
    Job,
    JobId,
    ValidationError,
)

DEV_START_LATENCY_S = 3.5
"""Slurm's start latency measured on the dev cluster (release -> Started 0.7 s, PrologSlurmctld ~2 s, slurmd's
launch ~1 s): the simulator's default ``--start-latency`` and the replay's prediction (sim/RESULTS.md 6.2)."""
DAEMON_INTERVAL_S = 30.0
"""Seconds between the daemon's ticks (``DaemonConfig.interval_s``), which the simulator's and the replay's
``--tick`` emulate by default."""
DEV_RESTART_COST_S = 78.0
"""delta, one restart's own cost beyond Slurm's latency and delay (checkpoint, requeue, the payload's start-up
until its first reported step): Rubick's measured 78 s, which the replay's payload also emulates; the daemon
replaces it per job size with what its journal measured end to end (``control.calibration``)."""


@dataclass(frozen=True)
class ManagedJob:
    """A job slurmplan decides for, with what the decision needs beyond Slurm's view of it."""

    job: Job
    hints: Hints
    candidates: tuple[Candidate, ...]
    """Every configuration it may run in (from ``perf.candidates``), with predicted throughput."""
    steps_done: float = 0.0
    """Progress reported by the job or simulated; used by finish-time policies."""


@dataclass(frozen=True)
class JobState:
    """What the scheduler remembers about one job between ticks (journaled by the daemon)."""

    attained_s: float = 0.0
    """Wall-clock seconds the job has held GPUs (Gavel's time received)."""
    attained_by_cell: Mapping[Cell, float] = field(default_factory=dict)
    epoch_by_cell: Mapping[Cell, float] = field(default_factory=dict)
    """Seconds in each Cell since the priorities were last reset (``SchedulerState.epoch_start``)."""
    deficit_by_cell: Mapping[Cell, float] = field(default_factory=dict)
    """Seconds the job should have had in each Cell by X but did not, summed over past epochs (tie-breaker)."""
    rounds_scheduled: int = 0
    current: Assignment | None = None
    """The assignment the job runs under now (None when pending)."""
    signalled_at: float | None = None
    """When the checkpoint signal was sent; the grace period counts from here."""
    first_seen: float | None = None
    reconfigurations: int = 0
    planned: Assignment | None = None
    """What the latest round decided for the job (replayed between rounds; None before its first round)."""
    sent: str = ""
    """Key of the last desired state actions were emitted for: the same decision is not re-sent every tick."""
    ran_on: tuple[str, ...] = ()
    """The nodes the job was last seen running on, kept after it leaves them: its restart's RELEASE names them
    (``Action.previous_nodes``), so a cron tick's new backend knows whether the restart goes elsewhere."""
    moved_at: float | None = None
    """When a decision last sent the job the checkpoint signal (moved, resized or stopped): the hysteresis of
    ``mechanism.pricing`` charges a change within ``TickConfig.move_hold_s`` of it for both moves."""
    requeued_at: float | None = None
    """When the job was first seen pending again after running (requeued), while Slurm's requeue delay
    (``TickConfig.requeue_delay_s``) may still hold it on ``ran_on``; None once that delay is over. Placement
    keeps such a job off ``ran_on`` where the same configuration fits elsewhere (``mechanism.placement``)."""


@dataclass(frozen=True)
class SchedulerState:
    round_index: int = 0
    last_round_start: float | None = None
    jobs: Mapping[JobId, JobState] = field(default_factory=dict)
    last_tick: float | None = None
    """``now`` of the previous tick: attained time grows by the time since then for running jobs."""
    allocation: Allocation | None = None
    """The policy's X of the current round; between rounds it fills GPUs freed by finished jobs."""
    epoch_start: float | None = None
    """When the priorities' memory of time received was last reset (Gavel resets it when X changes)."""
    finished_lengths: tuple[float, ...] = ()
    """Seconds of GPUs held by each managed job that ran and left the tick's input (finished), oldest first, the
    newest ``mechanism.lengths.KEEP_FINISHED``: what the expected remaining time is learned from (issue 23)."""


@dataclass(frozen=True)
class TickConfig:
    """The tick's settings, and the one statement of their defaults: the daemon's ``DaemonConfig`` and the
    simulator's ``SimOptions`` take theirs from here, so both decide with the same values unless told."""

    round_s: float = 360.0
    checkpoint_signal: str = "USR2"
    grace_s: float = 120.0
    signal_min_run_s: float = 10.0
    """A running job gets the checkpoint signal only once it has run this long (since Slurm's ``start_time``); an
    earlier stop decision waits (``JobState.signalled_at`` is then the due time). A job signalled in its first
    moments, before its batch script and launcher have taken the signal over, could die of it. 0 signals at once
    (the simulator's ``--zero-cost``)."""
    reconfig_threshold: float = 0.97
    """Rubick's rule: move a running job only if ``(T - N*delta)/T > threshold``."""
    reconfig_cost_s: float = DEV_RESTART_COST_S
    """delta: seconds one reconfiguration costs (Rubick measured 78 s); the fallback for sizes not in
    ``reconfig_cost_by_gpus``."""
    reconfig_cost_by_gpus: Mapping[int, float] = field(default_factory=dict)
    """delta per job size (GPUs of the configuration the job would move to), as measured on this cluster: the
    daemon fills it from the journal's restarts (``control.calibration``); a size absent here costs
    ``reconfig_cost_s``. Empty in the simulator unless given: it charges its configured constant."""
    requeue_delay_s: float = SLURM_REQUEUE_DELAY_S
    """Slurm's wait before a requeued job may start again on a node it just left (``cred_expire + 1``, 121 s by
    default; a site with another ``cred_expire`` sets it, as ``devcluster up`` writes it). A move that keeps the
    job's GPU type may land on its own nodes, so that move is charged this too; a move to another type never does
    (the daemon resets the begin time, ``SlurmRules.may_skip_requeue_wait``)."""
    start_latency_s: float = 0.0
    """Slurm's start latency (release to the job's script running), charged in the price of a move on top of delta
    where delta leaves it out: the simulator's ``--start-latency``. The daemon's measured delta is end to end
    (``control.calibration``: signal to the first throughput report after the restart), so it keeps 0 here."""
    start_arrivals: bool = True
    """A job that arrives between rounds starts at the next tick on free GPUs of its requested size (fastest type
    first), as plain Slurm would start it, instead of waiting for the next round (``engine.with_arrivals``)."""
    move_hold_rounds: float = 3.0
    """Hysteresis (``mechanism.pricing``): a job moved, resized or stopped by a decision less than this many rounds
    ago is charged for both moves if it is to change again, so it is not moved back unless the gain pays for both."""
    account_weights: Mapping[str, float] = field(default_factory=dict)
    """Weights of Slurm accounts for hierarchical policies (empty: all equal)."""
    qos_preemption: Mapping[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    """Per Slurm QOS: its priority and the QOS Slurm lets it preempt (read each round with accounting). A running
    job is stopped, requeued or shrunk only for jobs of its own QOS, or of a QOS of at least its priority that may
    preempt it (``mechanism/qos.py``). Empty (no accounting, the simulator): no QOS rules."""
    cost_per_gpu_hour: Mapping[GpuType, float] = field(default_factory=dict)
    """Price of one GPU hour per type for cost policies (empty: unknown)."""
    priority_reset_s: float = 1920.0
    """Least seconds between resets of the priorities' memory (Gavel's ``minimum_time_between_allocation_resets``)."""

    def __post_init__(self) -> None:
        checks = (
            ("round_s", self.round_s > 0, "a number of seconds > 0"),
            ("grace_s", self.grace_s >= 0, "a number of seconds >= 0"),
            ("signal_min_run_s", self.signal_min_run_s >= 0, "a number of seconds >= 0"),
            ("reconfig_threshold", 0 < self.reconfig_threshold <= 1, "a number in (0, 1]"),
            ("reconfig_cost_s", self.reconfig_cost_s >= 0, "a number of seconds >= 0"),
            ("requeue_delay_s", self.requeue_delay_s >= 0, "a number of seconds >= 0"),
            ("start_latency_s", self.start_latency_s >= 0, "a number of seconds >= 0"),
            ("move_hold_rounds", self.move_hold_rounds >= 0, "a number of rounds >= 0"),
            ("priority_reset_s", self.priority_reset_s >= 0, "a number of seconds >= 0"),
        )
        for name, ok, allowed in checks:
            if not ok:
                raise ValidationError(name, getattr(self, name), allowed, "tick config")
        for gpus, seconds in self.reconfig_cost_by_gpus.items():
            if not isinstance(gpus, int) or gpus <= 0 or not seconds >= 0:
                raise ValidationError(
                    "reconfig_cost_by_gpus", {gpus: seconds}, "GPU counts > 0 mapped to seconds >= 0", "tick config"
                )
        if not self.checkpoint_signal or not self.checkpoint_signal.isalnum():
            raise ValidationError(
                "checkpoint_signal", self.checkpoint_signal, "a signal name such as USR2", "tick config"
            )

    def reconfig_cost_for(self, gpus: int) -> float:
        """delta for a job of ``gpus`` GPUs: this cluster's measured cost for that size, else the constant."""
        return self.reconfig_cost_by_gpus.get(gpus, self.reconfig_cost_s)

    def full_cost_for(self, gpus: int) -> float:
        """Seconds a restart into ``gpus`` GPUs costs the job end to end: delta plus Slurm's start latency."""
        return self.reconfig_cost_by_gpus.get(gpus, self.reconfig_cost_s) + self.start_latency_s

    @property
    def move_hold_s(self) -> float:
        return self.move_hold_rounds * self.round_s


@dataclass(frozen=True)
class TickInput:
    now: float
    cluster: Cluster
    """Nodes as observed; GPUs held by unmanaged jobs are already counted as used."""
    jobs: tuple[ManagedJob, ...]
    """Managed jobs that are pending or running (finished ones are dropped by the caller)."""
    config: TickConfig = TickConfig()


@dataclass(frozen=True)
class TickOutput:
    actions: tuple[Action, ...]
    assignments: tuple[Assignment, ...]
    allocation: Allocation | None
    state: SchedulerState
    new_round: bool
    """True when this tick started a new round (recomputed X and priorities)."""
    wake_at: float | None = None
    """Earliest time before the next round at which a tick has work: a grace period that expires (forced
    requeue). Jobs signalled this tick are restarted in their new configuration by the first tick after they
    have left, so a caller that learns of that (the simulator) may tick again at once."""
