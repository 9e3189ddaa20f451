"""From accounting records to a trace, and a report of everything that did not become a job.

What a record becomes:
- arrival = the time Slurm could first start it (``eligible``; ``submit`` when eligible is unknown or earlier),
  counted from the first arrival kept; duration = end - start on the GPU type and count it was allocated;
- with a model in its hints (admin comment, else comment: ``slurmplan:model=...``) and the model in the
  catalog: a model job, its throughput elsewhere from the performance model;
- otherwise a measured job: its time on another type from the per-type speed table (``speeds.py``);
- CPU-only jobs, jobs that never started (cancelled while pending) and jobs still running at the end of the
  range are counted and listed, not silently dropped; records sacct gave malformed are listed by id and field.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from slurmplan.domain import JobClass, SlurmplanError
from slurmplan.formats import find_hints
from slurmplan.history.sacct import SacctJob, Skipped
from slurmplan.history.speeds import SpeedTable
from slurmplan.sim.trace import TraceJob

log = logging.getLogger(__name__)

LIVE_STATES = frozenset({"RUNNING", "PENDING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING", "CONFIGURING"})


@dataclass
class ImportReport:
    """Counts and names of what the import kept and left out (every record read lands in exactly one place)."""

    records: int = 0
    kept: int = 0
    model_jobs: int = 0
    measured_jobs: int = 0
    cpu_only: list[int] = field(default_factory=list)
    never_started: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)
    unknown_types: Counter[str] = field(default_factory=Counter)
    origin: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "records": self.records,
            "jobs": self.kept,
            "model_jobs": self.model_jobs,
            "measured_jobs": self.measured_jobs,
            "cpu_only": len(self.cpu_only),
            "never_started": len(self.never_started),
            "still_running": len(self.unfinished),
            "skipped": [{"job_id": s.job_id, "field": s.field, "why": s.why} for s in self.skipped],
            "final_states": dict(sorted(self.states.items())),
            "gpu_types_without_speed": dict(sorted(self.unknown_types.items())),
            "origin_unix_s": self.origin,
        }

    def lines(self) -> list[str]:
        out = [f"read {self.records} records: {self.kept} jobs ({self.model_jobs} with a model, "
               f"{self.measured_jobs} measured)"]  # fmt: skip
        for label, ids in (
            ("CPU-only (no GPU in the allocation)", self.cpu_only),
            ("never started (cancelled or failed before a start)", self.never_started),
            ("still running or pending at the end of the range", self.unfinished),
        ):
            if ids:
                out.append(f"left out {len(ids)} {label}: jobs {_ids(ids)}")
        if self.skipped:
            out.append(f"skipped {len(self.skipped)} malformed records:")
            out.extend(f"  {s}" for s in self.skipped[:50])
            if len(self.skipped) > 50:
                out.append(f"  ... and {len(self.skipped) - 50} more (--json lists all)")
        if self.unknown_types:
            names = ", ".join(f"{t} ({n} jobs)" for t, n in sorted(self.unknown_types.items()))
            out.append(f"no speed for {names}: those jobs run only on their own type (add it with --speeds)")
        if self.states:
            out.append("final states kept: " + ", ".join(f"{s} {n}" for s, n in sorted(self.states.items())))
        return out


def _ids(ids: list[int], limit: int = 20) -> str:
    text = ", ".join(str(i) for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _hint_fields(job: SacctJob) -> dict[str, object]:
    """The hints of the job's admin comment (else its comment); bad hints are logged and ignored."""
    for text in (job.admin_comment, job.comment):
        if not text:
            continue
        try:
            hints = find_hints(text)
        except SlurmplanError as exc:
            log.warning("job %s: ignoring its hints (%s)", job.job_id, exc)
            continue
        if hints is not None:
            return {"model": hints.model, "job_class": hints.job_class, "global_batch": hints.global_batch}
    return {}


def _known_model(model: str | None) -> bool:
    if not model:
        return False
    from slurmplan.perf.models import get_model

    try:
        get_model(model)
    except SlurmplanError:
        return False
    return True


def _classify(job: SacctJob, report: ImportReport) -> bool:
    """True when the record becomes a trace job; otherwise it is counted where it belongs."""
    if job.state in LIVE_STATES or (job.start is not None and job.end is None):
        report.unfinished.append(job.job_id)
    elif not job.started or job.end == job.start and job.nodes == 0:
        report.never_started.append(job.job_id)
    elif job.gpus <= 0:
        report.cpu_only.append(job.job_id)
    elif not job.gpu_type:
        report.skipped.append(Skipped(str(job.job_id), "tres.allocated", "has GPUs without a GPU type"))
    else:
        return True
    return False


def to_trace(
    jobs: Iterable[SacctJob], speeds: SpeedTable, report: ImportReport, time_scale: float = 1.0
) -> list[TraceJob]:
    """Trace jobs for every record that ran on GPUs and finished, in arrival order (ids kept).

    ``time_scale`` multiplies every time: a replay that ran its trace K times faster is read back with K.
    """
    keep: list[SacctJob] = []
    seen: set[int] = set()
    for job in jobs:
        report.records += 1
        if job.job_id in seen:
            report.skipped.append(Skipped(str(job.job_id), "job_id", "appears twice (a requeued job's older record)"))
            continue
        seen.add(job.job_id)
        if _classify(job, report):
            keep.append(job)
    arrivals = {j.job_id: max(j.submit, j.eligible or j.submit) for j in keep}
    report.origin = min(arrivals.values(), default=None)
    out = []
    for job in sorted(keep, key=lambda j: (arrivals[j.job_id], j.job_id)):
        at = (arrivals[job.job_id] - (report.origin or 0.0)) * time_scale
        out.append(_trace_job(job, at, speeds, report, time_scale))
        report.states[job.state] += 1
    report.kept = len(out)
    return out


def _trace_job(job: SacctJob, arrival: float, speeds: SpeedTable, report: ImportReport, scale: float) -> TraceJob:
    assert job.start is not None and job.end is not None and job.gpu_type
    hints = _hint_fields(job)
    common = dict(
        job_id=job.job_id,
        arrival_s=arrival,
        gpus=job.gpus,
        gpu_type=job.gpu_type,
        duration_s=max(1.0, job.end - job.start) * scale,
        account=job.account or "default",
        job_class=hints.get("job_class") or JobClass.BEST_EFFORT,
        name=job.name,
        user=job.user,
        partition=job.partition,
        time_limit_s=None if job.time_limit_s is None else job.time_limit_s * scale,
    )
    model = hints.get("model")
    if _known_model(model):  # type: ignore[arg-type]
        report.model_jobs += 1
        extra = {"global_batch": hints["global_batch"]} if hints.get("global_batch") else {}
        return TraceJob(model=model, extra_hints=extra, **common)  # type: ignore[arg-type]
    report.measured_jobs += 1
    if speeds.speed(job.gpu_type) <= 0:
        report.unknown_types[job.gpu_type] += 1
    table = {t: v for t, v in speeds.speeds.items() if v > 0}
    table.setdefault(job.gpu_type, 1.0)  # unknown type: it runs there at its measured time, nowhere else
    if speeds.speed(job.gpu_type) <= 0:
        table = {job.gpu_type: 1.0}
    return TraceJob(speeds=table, **common)  # type: ignore[arg-type]
