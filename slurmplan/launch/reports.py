"""Throughput reports: what this job achieved with its plan, for the daemon's performance model.

Rank 0 appends one JSON line per report to ``$SLURMPLAN_REPORT_DIR/<job_id>.jsonl`` (CONTRIBUTING.md's format,
read by ``control.reports.ingest_reports``). Without ``SLURMPLAN_REPORT_DIR`` the folder is the site's
``/var/lib/slurmplan/reports`` inside a Slurm job, and ``./slurmplan-reports`` (the working directory) outside
one, so a local run, even as root, never writes into a system folder.

Each line also carries the job's progress, for ``status``/``explain`` and the daemon's finish-time estimate:
``"step"`` (global steps done), ``"checkpoint_step"`` (the step of the newest checkpoint, or null) and
``"total_steps"`` (the job's step count, or null where not known); the measurement reader ignores them.

A line is written with one ``write`` call on a file opened for appending, so the daemon sees either the whole
line or none of it. A failed report is logged, never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from slurmplan.domain import Measurement
from slurmplan.perf.measurements import measurement_to_dict

log = logging.getLogger(__name__)

DEFAULT_REPORT_DIR = "/var/lib/slurmplan/reports"
"""Where the daemon reads reports from, by default; used inside a Slurm job only."""
LOCAL_REPORT_DIR = "slurmplan-reports"
"""Outside a Slurm job: this folder under the working directory."""


def report_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    folder = Path(env.get("SLURMPLAN_REPORT_DIR") or (DEFAULT_REPORT_DIR if job else Path.cwd() / LOCAL_REPORT_DIR))
    return folder / f"{job or 'local'}.jsonl"


@dataclass(frozen=True)
class Progress:
    """How far the job is, as written into each report line (field names are the JSON keys)."""

    step: int
    checkpoint_step: int | None = None
    total_steps: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {"step": self.step, "checkpoint_step": self.checkpoint_step, "total_steps": self.total_steps}


def report_line(m: Measurement, progress: Progress | None = None) -> str:
    """One report line: the measurement, plus the progress keys when known."""
    record = measurement_to_dict(m)
    if progress is not None:
        record.update(progress.to_dict())
    return json.dumps(record, sort_keys=True) + "\n"


def append_report(m: Measurement, path: Path, progress: Progress | None = None) -> bool:
    """Append one line; returns False (and logs) when the folder cannot be written."""
    line = report_line(m, progress)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("cannot write throughput report to %s: %s", path, exc)
        return False
    return True


def peak_memory_gb(device: torch.device) -> float:
    """Peak GPU memory allocated by torch, or the process's peak resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


class ThroughputMeter:
    """Samples per second over the steps since the last report, excluding the first (warm-up) step."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self._since = time.perf_counter()
        self._samples = 0
        self._warm = False

    def step_done(self, samples: int) -> None:
        if not self._warm:  # the first step pays for allocation and process-group warm-up
            self._warm = True
            self._since = time.perf_counter()
            return
        self._samples += samples

    def due(self) -> bool:
        return self._samples > 0 and time.perf_counter() - self._since >= self.every_s

    def take(self) -> float | None:
        """Samples per second since the last take, or None when nothing was measured; restarts the window."""
        now = time.perf_counter()
        if self._samples == 0 or now <= self._since:
            return None
        rate = self._samples / (now - self._since)
        self._since, self._samples = now, 0
        return rate
