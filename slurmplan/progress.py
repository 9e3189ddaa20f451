"""A training job's progress as its launcher reports it, and the predicted finish, for ``status`` and ``explain``.

The launcher's report lines (``launch/reports.py``) carry ``"step"``, ``"checkpoint_step"``, ``"total_steps"``
and ``"time"``. The newest two lines of one run give the step rate (:func:`step_rate`), and the rate the
predicted finish. There is one reader of those lines per place they are kept: ``explain`` reads the daemon's
journal (its ``job_progress`` table, which the daemon fills from the same lines on every tick, ``control/reports``;
:func:`progress_from_row`), and ``slurmplan status``, which runs without a journal, reads the tail of the report
file (:func:`read_progress`). The file is written by the job, so its bytes are hostile: only its tail is read, a
line that does not parse is skipped, and nothing here raises for a bad file.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAIL_BYTES = 64 * 1024
"""Only this much of a report file's end is read (the newest lines are all that matter)."""


@dataclass(frozen=True)
class JobProgress:
    """The newest report of a job: steps done, the step of its newest checkpoint, its total; the step rate."""

    step: int
    time: float
    checkpoint_step: int | None = None
    total_steps: int | None = None
    steps_per_s: float | None = None

    def finish_time(self) -> float | None:
        """When the job should reach ``total_steps`` at its current rate (None: no total or no rate)."""
        if self.total_steps is None or not self.steps_per_s:
            return None
        return self.time + max(0, self.total_steps - self.step) / self.steps_per_s


def step_rate(prev_step: float | None, prev_time: float | None, step: float, when: float) -> float | None:
    """Steps per second between two reports, or None when they are not of one run (a restart goes back to its
    checkpoint, so the step does not grow) or either lacks a step or a time."""
    if prev_step is None or prev_time is None or not (step > prev_step and when > prev_time):
        return None
    return (step - prev_step) / (when - prev_time)


def progress_from_row(row: Mapping[str, Any] | None) -> JobProgress | None:
    """The progress of a journal ``job_progress`` row (``step``, ``time``, ``checkpoint_step``, ``total_steps``,
    ``steps_per_s``); None without a step and a time."""
    if not row or row.get("step") is None or row.get("time") is None:
        return None
    saved, total = row.get("checkpoint_step"), row.get("total_steps")
    return JobProgress(
        int(row["step"]),
        float(row["time"]),
        None if saved is None else int(saved),
        None if total is None else int(total),
        row.get("steps_per_s"),
    )


def report_file(report_dir: Path, job_id: int, cluster: str = "") -> Path | None:
    """Where the launcher of job ``job_id`` appends its report lines: ``<cluster>.<job>.jsonl`` under Slurm
    (``launch.reports.report_path``), ``<job>.jsonl`` without a cluster name. With the cluster unknown (``explain``),
    the one ``*.<job>.jsonl`` there is; with two (clusters sharing the folder) None rather than a guess."""
    folder = Path(report_dir)
    if cluster and (folder / f"{cluster}.{job_id}.jsonl").exists():
        return folder / f"{cluster}.{job_id}.jsonl"
    if cluster:  # a launcher outside Slurm's environment (or before issue 29) wrote the plain name
        return folder / f"{job_id}.jsonl"
    keyed = sorted(folder.glob(f"*.{int(job_id)}.jsonl"))
    if len(keyed) == 1:
        return keyed[0]
    return None if keyed else folder / f"{job_id}.jsonl"


def _int(value: object) -> int | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return int(value) if ok else None  # type: ignore[arg-type]


def _points(data: bytes) -> list[tuple[int, float, dict]]:
    """(step, time, record) of each complete line that parses, in file order."""
    out = []
    for raw in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(record, dict):
            continue
        step, when = _int(record.get("step")), record.get("time")
        if step is None or not isinstance(when, int | float) or isinstance(when, bool) or not math.isfinite(when):
            continue
        out.append((step, float(when), record))
    return out


def read_progress(path: Path | None) -> JobProgress | None:
    """The job's progress from its report file, or None when there is none (no file, no line with a step)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except OSError:
        return None
    points = _points(data)
    if not points:
        return None
    step, when, record = points[-1]
    rate = step_rate(*points[-2][:2], step, when) if len(points) >= 2 else None
    return JobProgress(step, when, _int(record.get("checkpoint_step")), _int(record.get("total_steps")), rate)


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def progress_text(p: JobProgress, now: float | None = None) -> str:
    """``step 400/20000 (2.0%), checkpoint at 380, reported 12:00:05; finish ~15:10 (in 3 h 10 min)``."""
    now = time.time() if now is None else now
    total = f"/{p.total_steps} ({100.0 * p.step / p.total_steps:.1f}%)" if p.total_steps else ""
    parts = [f"step {p.step}{total}"]
    if p.checkpoint_step is not None:
        parts.append(f"checkpoint at step {p.checkpoint_step}")
    parts.append(f"reported {time.strftime('%H:%M:%S', time.localtime(p.time))} ({_span(now - p.time)} ago)")
    text = ", ".join(parts)
    finish = p.finish_time()
    if finish is not None:
        text += f"; predicted finish {time.strftime('%H:%M', time.localtime(finish))} (in {_span(finish - now)}"
        text += f" at {p.steps_per_s:.3g} steps/s while it runs)"
    elif p.total_steps is not None:
        text += "; no finish predicted yet (the rate needs two reports of one run)"
    return text


def short_text(p: JobProgress, now: float | None = None) -> str:
    """The one-cell form for ``slurmplan status``: ``400/20000 ETA 15:10``."""
    text = f"{p.step}/{p.total_steps}" if p.total_steps else str(p.step)
    finish = p.finish_time()
    return text + (f" ETA {time.strftime('%H:%M', time.localtime(finish))}" if finish is not None else "")
