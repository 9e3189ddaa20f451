"""From trace jobs to what the simulator runs: candidates (computed once per job), work and dedicated time.

A table job's candidates come from Gavel's measured table (steps/s, source TABLE); a hint job's from the
performance model (``perf.candidates``), in samples/s. Work is kept in the candidates' own unit so that a job's
progress in a configuration is ``throughput * seconds`` with no conversion on the hot path; ``unit_per_step``
converts back to training steps (the global batch for hint jobs, 1 for table jobs).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

from slurmplan.domain import Candidate, Cell, Cluster, GpuType, Hints, ValidationError
from slurmplan.formats import parse_decision
from slurmplan.perf.gavel_table import GavelTable
from slurmplan.sim.cluster import ClusterSpec
from slurmplan.sim.trace import TraceJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Workload:
    """One trace job made runnable: its hints, candidates, total work and the time it needs alone."""

    trace: TraceJob
    hints: Hints
    candidates: tuple[Candidate, ...]
    work_total: float
    unit_per_step: float
    requested: Candidate | None
    """The user's own configuration (its type, or the fastest type when none was named, at its GPU count)."""

    @property
    def job_id(self) -> int:
        return self.trace.job_id

    @property
    def dedicated_s(self) -> float:
        """Seconds the job needs alone on its requested configuration (inf when that cannot run)."""
        if self.requested is None or self.requested.throughput <= 0:
            return float("inf")
        return self.work_total / self.requested.throughput

    @property
    def fastest_s(self) -> float:
        """Seconds the job needs alone on its fastest configuration at its own GPU count (the physical limit a
        scheduler cannot beat; inf when nothing at that count can run it)."""
        thr = max((c.throughput for c in self.candidates if c.cell.gpus == self.trace.gpus), default=0.0)
        return self.work_total / thr if thr > 0 else self.dedicated_s

    @property
    def best_s(self) -> float:
        """Seconds the job needs alone on its fastest candidate of any size, type and plan (the physical limit
        for a scheduler that may resize it: an elastic job, or any model job whose candidates span N/2..2N)."""
        thr = max((c.throughput for c in self.candidates), default=0.0)
        return self.work_total / thr if thr > 0 else self.fastest_s

    def rate(self, gpu_type: GpuType | None, gpus: int, admin_comment: str = "") -> float:
        """Throughput of the configuration the job was started in (its admin comment may name the stages)."""
        matches = [c for c in self.candidates if c.cell.gpu_type == gpu_type and c.cell.gpus == gpus]
        if not matches:
            return 0.0
        decided = parse_decision(admin_comment) if admin_comment else None
        if decided is not None:
            staged = [c for c in matches if c.cell.stages == decided[0].stages]
            matches = staged or matches
        return max(c.throughput for c in matches)


def requested_candidate(candidates: Iterable[Candidate], gpu_type: GpuType | None, gpus: int) -> Candidate | None:
    """The candidate for the user's request: its GPU type, or the fastest type at that count."""
    same = [c for c in candidates if c.cell.gpus == gpus and (gpu_type is None or c.cell.gpu_type == gpu_type)]
    same = [c for c in same if c.throughput > 0]
    if not same:
        return None
    if gpu_type is not None:
        return max(same, key=lambda c: (c.cell.stages == 1, c.throughput))
    return max(same, key=lambda c: c.throughput)


def table_workload(job: TraceJob, table: GavelTable, gpu_types: Iterable[GpuType]) -> Workload:
    """A Gavel job: candidates at its own scale factor on every cluster type the table knows."""
    assert job.job_type is not None
    cands = table.candidates(job.job_type, job.gpus, gpu_types)
    if job.total_steps is not None:
        work = job.total_steps
    else:  # duration is defined on V100s in Gavel's traces, else on the fastest type
        ref = table.throughput(job.job_type, job.gpus, job.gpu_type or "v100") if cands else 0.0
        work = float(job.duration_s or 0.0) * (ref or max((c.throughput for c in cands), default=0.0))
    return Workload(job, job.hints(), cands, work, 1.0, requested_candidate(cands, job.gpu_type, job.gpus))


def hint_workload(job: TraceJob, cluster: Cluster, candidates_fn) -> Workload:
    """A model job: candidates from the performance model; duration converted at the requested configuration."""
    hints = job.hints()
    cands = tuple(candidates_fn(hints, cluster))
    requested = requested_candidate(cands, job.gpu_type, job.gpus)
    batch = hints.global_batch or next((c.plan.global_batch for c in cands if c.plan is not None), 1)
    if job.total_steps is not None:
        work = job.total_steps * batch
    elif requested is not None:
        work = float(job.duration_s or 0.0) * requested.throughput
    else:
        work = float(job.duration_s or 0.0) * max((c.throughput for c in cands), default=0.0)
    if work <= 0:
        log.info("job %s (%s) has no runnable configuration on this cluster", job.job_id, job.model)
        work = 1.0
    return Workload(job, hints, cands, work, float(batch), requested)


def perf_candidates_fn():
    """``perf.candidates.job_candidates(hints, cluster, measurements)``, imported late (another room's module)."""
    try:
        from slurmplan.perf.candidates import job_candidates
    except ImportError as exc:  # the performance model is another room's; say what is missing
        raise ValidationError("model", "hint jobs", f"slurmplan.perf.candidates to be importable ({exc})") from exc

    def call(hints: Hints, cluster: Cluster) -> tuple[Candidate, ...]:
        return tuple(job_candidates(hints, cluster, ()))

    return call


def build_workloads(
    jobs: Iterable[TraceJob], spec: ClusterSpec, table: GavelTable | None, candidates_fn=None
) -> dict[int, Workload]:
    """Every job's workload, computed once (candidates never change during a simulation).

    ``candidates_fn(hints, cluster)`` prices hint jobs; by default the performance model's ``job_candidates``
    against the idle cluster (candidates describe what a job could run in, not what is free now).
    """
    gpu_types = spec.gpus_by_type()
    cluster = Cluster(spec.nodes())
    out: dict[int, Workload] = {}
    memo: dict[Hints, tuple[Candidate, ...]] = {}
    for job in jobs:
        if job.is_table_job:
            if table is None:
                raise ValidationError("job_type", job.job_type, "a throughput table (--throughputs)", "workload")
            out[job.job_id] = table_workload(job, table, gpu_types)
        else:
            candidates_fn = candidates_fn or perf_candidates_fn()
            out[job.job_id] = hint_workload(job, cluster, _memoised(candidates_fn, memo))
    return out


def _memoised(fn, memo: dict[Hints, tuple[Candidate, ...]]):
    """Jobs that differ only in length or deadline share candidates (the search is the costly part)."""

    def call(hints: Hints, cluster: Cluster) -> tuple[Candidate, ...]:
        key = replace(hints, steps=None, deadline=None)
        if key not in memo:
            memo[key] = tuple(fn(hints, cluster))
        return memo[key]

    return call


def infeasible(workloads: Iterable[Workload]) -> list[Workload]:
    """The jobs no candidate of the cluster can run (no GPU type with throughput at any size)."""
    return [w for w in workloads if not any(c.throughput > 0 for c in w.candidates)]


def describe(w: Workload) -> str:
    """``ID (TYPE xGPUS)``: how the CLI names a job it leaves out or refuses (the id first, for parsing back)."""
    return f"{w.job_id} ({w.trace.job_type or w.trace.model} x{w.trace.gpus})"


def cells_of(workloads: Iterable[Workload]) -> set[Cell]:
    return {c.cell for w in workloads for c in w.candidates}
