"""The reconfiguration cost measured on this cluster, per job size, from what the journal recorded.

A move costs a job the time from the checkpoint signal to training again in its new configuration, end to end:
signal (the daemon's SIGNAL action, applied) -> requeued (the EpilogSlurmctld ``job-end`` event that follows)
-> running (the PrologSlurmctld ``job-start`` event after that) -> its first throughput report after that start
(the launcher's report line: the checkpoint written, Slurm's start latency, the payload's start-up and restore
until its first step are all inside; issue 23 measured ~3 s to ``running`` but ~10 s to training on the dev
cluster). A restart without a report yet (a job that reports rarely) counts to ``running``. The size is the
job's GPUs in its new configuration (the UPDATE the daemon applied in between; without one, the size it had).
Pure functions over :meth:`Journal.restart_timeline` rows, so they are tested on rows and ``slurmplan explain``
shows the result.
Those rows cover the latest ``RECENT_RESTARTS`` (500) checkpoint signals, not the journal's whole history: the
tick's cost stays flat as a site's journal grows, and restarts from long ago (another era of the cluster) age out.

What it does not measure: work done since the job's last checkpoint when it could not checkpoint on the signal
(the launcher checkpoints on it, so that is the step in flight).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmplan.tick_types import TickConfig

DEFAULT_COST_S = TickConfig.reconfig_cost_s
"""The configured cost used until the journal holds a restart of a comparable job."""

MIN_SAMPLES = 3
"""Restarts of one size the daemon needs before it trusts their median over the configured constant: one
restart that hit a slow controller or a node boot would otherwise set the cost of every later move."""


@dataclass(frozen=True)
class RestartSample:
    job_id: int
    gpus: int
    signal_at: float
    requeued_at: float
    running_at: float
    training_at: float | None = None
    """Time of the job's first throughput report after ``running_at`` (None: none seen)."""

    @property
    def total_s(self) -> float:
        """Signal to training again (its first report), or to running when no report came."""
        return (self.training_at if self.training_at is not None else self.running_at) - self.signal_at


@dataclass(frozen=True)
class Calibration:
    """Median restart seconds per GPU count, with the sample counts; ``cost_for`` picks one for a job."""

    by_gpus: Mapping[int, float] = field(default_factory=dict)
    samples: Mapping[int, int] = field(default_factory=dict)
    default_s: float = DEFAULT_COST_S
    min_samples: int = MIN_SAMPLES

    def cost_for(self, gpus: int) -> tuple[float, str]:
        """``(seconds, where it came from)``, by the rule the daemon decides with (:meth:`costs`): this size's
        median once it has ``min_samples`` restarts, else the configured default. No nearest-size guess: a
        restart's cost grows with the job's nodes and checkpoint, and ``explain`` must show what was used."""
        n = self.samples.get(gpus, 0)
        if n >= self.min_samples:
            return self.by_gpus[gpus], f"median of {n} restarts of {gpus}-GPU jobs"
        if n:
            return self.default_s, (
                f"configured default: {n} restart{'s' if n > 1 else ''} of {gpus}-GPU jobs measured, "
                f"{self.min_samples} needed"
            )
        return self.default_s, f"configured default (no restart of a {gpus}-GPU job measured yet)"

    def costs(self) -> dict[int, float]:
        """Size -> median seconds for the sizes with at least ``min_samples`` restarts (``TickConfig``'s
        ``reconfig_cost_by_gpus``; other sizes fall back to the configured constant)."""
        return {g: s for g, s in sorted(self.by_gpus.items()) if self.samples[g] >= self.min_samples}

    def to_dict(self) -> dict[str, Any]:
        return {str(g): {"median_s": round(s, 2), "samples": self.samples[g]} for g, s in sorted(self.by_gpus.items())}


def _gpus(what: str, detail: str) -> int | None:
    try:
        data = json.loads(detail or "{}")
    except json.JSONDecodeError:
        return None
    if what == "update":
        per_node, nodes = data.get("gpus_per_node"), data.get("node_count") or 1
        return int(per_node) * int(nodes) if isinstance(per_node, int) else None
    gpus = data.get("gpus")  # job-start: SLURM_JOB_GPUS, the GPU indices
    return len([g for g in str(gpus).split(",") if g]) if gpus else None


def restart_samples(rows: Sequence[Mapping[str, Any]]) -> list[RestartSample]:
    """Every complete signal -> job-end -> job-start sequence of one job in the rows (ordered by job, time), each
    ended by the job's first ``report`` row after its start when there is one."""
    out: list[RestartSample] = []
    by_job: dict[int, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_job.setdefault(int(r["job_id"]), []).append(r)
    for job_id, events in by_job.items():
        events = sorted(events, key=lambda r: float(r["time"]))
        signal_at = requeued_at = None
        gpus: int | None = None
        last_gpus: int | None = None
        open_sample: int | None = None  # index in ``out`` of a sample still waiting for its first report
        for r in events:
            what, at = r["what"], float(r["time"])
            if what == "report":
                if open_sample is not None:
                    out[open_sample] = dataclasses.replace(out[open_sample], training_at=at)
                    open_sample = None
            elif what == "signal":
                signal_at, requeued_at, gpus, open_sample = at, None, None, None
            elif what == "update" and signal_at is not None:
                gpus = _gpus(what, r["detail"]) or gpus
            elif what == "job-end" and signal_at is not None and requeued_at is None:
                requeued_at = at
            elif what == "job-start":
                size = gpus or _gpus(what, r["detail"]) or last_gpus
                if signal_at is not None and requeued_at is not None and size:
                    out.append(RestartSample(job_id, size, signal_at, requeued_at, at))
                    open_sample = len(out) - 1
                last_gpus = _gpus(what, r["detail"]) or size or last_gpus
                signal_at = requeued_at = None
    return out


def calibrate(
    samples: Sequence[RestartSample], default_s: float = DEFAULT_COST_S, min_samples: int = MIN_SAMPLES
) -> Calibration:
    """Median seconds per size; a negative or day-long sample (clock step, a job held for days) is dropped."""
    by: dict[int, list[float]] = {}
    for s in samples:
        if 0 <= s.total_s < 86_400:
            by.setdefault(s.gpus, []).append(s.total_s)
    return Calibration(
        by_gpus={g: statistics.median(v) for g, v in by.items()},
        samples={g: len(v) for g, v in by.items()},
        default_s=default_s,
        min_samples=min_samples,
    )
