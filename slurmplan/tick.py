"""The one decision function that both the daemon and the simulator call.

A tick is pure: ``decide(TickInput, policy, SchedulerState) -> TickOutput``. It reads no clock, runs no
Slurm command and touches no database; the daemon (``control/``) and the simulator (``sim/``) are the two
edges that observe before it and act after it. Keeping it pure is what lets the simulator predict exactly
what the daemon would do, and lets ``slurmplan explain`` replay a decision from the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmplan.domain import Action, Allocation, Assignment, Candidate, Cell, Cluster, Hints, Job, JobId


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
    rounds_scheduled: int = 0
    current: Assignment | None = None
    """The assignment the job runs under now (None when pending)."""
    signalled_at: float | None = None
    """When the checkpoint signal was sent; the grace period counts from here."""
    first_seen: float | None = None
    reconfigurations: int = 0


@dataclass(frozen=True)
class SchedulerState:
    round_index: int = 0
    last_round_start: float | None = None
    jobs: Mapping[JobId, JobState] = field(default_factory=dict)


@dataclass(frozen=True)
class TickConfig:
    round_s: float = 360.0
    checkpoint_signal: str = "USR2"
    grace_s: float = 120.0
    reconfig_threshold: float = 0.97
    """Rubick's rule: move a running job only if ``(T - N*delta)/T > threshold``."""
    reconfig_cost_s: float = 78.0
    """delta: seconds one reconfiguration costs (Rubick measured 78 s)."""


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
