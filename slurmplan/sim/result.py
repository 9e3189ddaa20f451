"""What one simulation leaves behind: per-job records and the cluster's time series, as plain values.

Kept apart from the engine so metrics, reports and plots can be computed (and tested) from a saved result
without running anything, and so results cross process boundaries (``compare`` pickles them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    arrival_s: float
    gpus: int
    account: str
    job_class: str
    in_window: bool
    dedicated_s: float
    """Seconds the job needs alone on its requested configuration."""
    first_start_s: float | None = None
    finish_s: float | None = None
    state: str = "pending"
    deadline_s: float | None = None
    restarts: int = 0
    reconfigurations: int = 0
    run_s: float = 0.0
    gpu_s: float = 0.0
    last_reason: str = ""
    configs: tuple[tuple[float, str | None, int], ...] = ()
    fastest_s: float = math.nan
    """Seconds the job needs alone on its fastest GPU type at its own GPU count (for the lower bound)."""
    best_s: float = math.nan
    """Seconds the job needs alone on its fastest candidate of any size (for the elastic bound; nan: as
    ``fastest_s``)."""

    @property
    def finished(self) -> bool:
        return self.state == "completed" and self.finish_s is not None

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s if self.finished else math.inf

    @property
    def queue_s(self) -> float:
        return self.first_start_s - self.arrival_s if self.first_start_s is not None else math.inf


@dataclass(frozen=True)
class SimResult:
    policy: str
    cluster: str
    total_gpus: int
    reconfig_cost_s: float
    round_s: float
    jobs: tuple[JobRecord, ...]
    times: tuple[float, ...]
    """Instants at which the busy-GPU count changed (step function)."""
    busy_gpus: tuple[int, ...]
    active_jobs: tuple[int, ...]
    end_s: float
    ticks: int = 0
    rounds: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    refused_actions: int = 0
    wall_s: float = 0.0
    decide_s: float = 0.0
    start_grid_s: float = 0.0
    """A job can first start on this grid from the first arrival: the round under Gavel's round-only ticks,
    the daemon's tick interval otherwise (0: at its arrival)."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
