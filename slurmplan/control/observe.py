"""Observe: from a Slurm snapshot to the managed jobs a tick decides for.

A job is managed when its hints (the job_submit.lua copy in the admin comment, or a ``slurmplan:`` prefix in
``--comment``) say so, or when its partition is managed. A hint that does not parse, or names something the
performance model cannot price, never stops the tick: the job is left alone (Slurm runs it as submitted), and
the error is returned so the caller journals it and shows it in the job's admin comment.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slurmplan.domain import (
    Action,
    ActionKind,
    Candidate,
    Cluster,
    Hints,
    Job,
    JobState,
    Measurement,
    SlurmplanError,
)
from slurmplan.formats import find_hints, split_admin_comment
from slurmplan.tick import ManagedJob

log = logging.getLogger(__name__)

CandidateFn = Callable[[Hints, Cluster, Sequence[Measurement]], tuple[Candidate, ...]]
"""Per job, every configuration it may run in. Injectable so tests and the benchmark can price jobs cheaply."""

BAD_HINTS_PREFIX = "slurmplan! bad hints:"
"""Decision text of a job left alone. Not ``slurmplan:`` on purpose, so no launcher reads it as a plan."""

_MAX_ERROR_CHARS = 200


@dataclass(frozen=True)
class Observed:
    """One job as the daemon classified it: managed (hints set), unmanaged, or refused (error set)."""

    job: Job
    hints: Hints | None = None
    error: str = ""

    @property
    def managed(self) -> bool:
        return self.hints is not None and not self.error


def classify(job: Job, managed_partitions: Sequence[str]) -> Observed:
    """Decide whether a job is slurmplan's; a malformed hint yields ``error`` instead of raising."""
    try:
        hints = find_hints(job.admin_comment) or find_hints(job.comment)
    except (SlurmplanError, ValueError) as exc:
        return Observed(job, None, _one_line(str(exc)))
    if hints is not None:
        return Observed(job, hints if hints.managed else None)
    partitions = [p for p in job.partition.split(",") if p]
    if any(p in managed_partitions for p in partitions):
        return Observed(job, Hints())
    return Observed(job, None)


def classify_all(jobs: Sequence[Job], managed_partitions: Sequence[str]) -> list[Observed]:
    return [classify(job, managed_partitions) for job in jobs]


def with_node_gpu_type(job: Job, cluster: Cluster) -> Job:
    """A running job with an untyped GPU request (``--gres=gpu:N``) uses its nodes' GPU type: say so.

    Managed jobs are best submitted untyped, because Slurm 22.05 cannot change the type of a pending job's
    request (a typed-to-other-type update leaves it "never runnable", typed<->untyped is refused); the daemon
    steers the type through the node list instead. Observed from the nodes, the type is exact.
    """
    if job.gpu_type or not job.nodes or not job.state.active:
        return job
    types = set()
    for name in job.nodes:
        try:
            types.add(cluster.node(name).gpu_type)
        except KeyError:
            return job
    return dataclasses.replace(job, gpu_type=types.pop()) if len(types) == 1 and None not in types else job


def default_candidates(hints: Hints, cluster: Cluster, measurements: Sequence[Measurement]) -> tuple[Candidate, ...]:
    """The performance room's candidates for one job (imported late: ``perf`` is heavy and optional in tests)."""
    from slurmplan.perf.candidates import job_candidates

    return tuple(job_candidates(hints, cluster, measurements))


def managed_jobs(
    observed: Sequence[Observed],
    cluster: Cluster,
    measurements: Sequence[Measurement],
    candidates_fn: CandidateFn = default_candidates,
) -> tuple[list[ManagedJob], list[Observed]]:
    """ManagedJobs for the unfinished managed jobs, plus the jobs refused because they could not be priced."""
    out: list[ManagedJob] = []
    refused: list[Observed] = []
    for ob in observed:
        if not ob.managed or ob.job.state.finished or ob.hints is None:
            continue
        job = with_node_gpu_type(ob.job, cluster)
        hints = with_request(ob.hints, ob.job)
        try:
            cands = candidates_fn(hints, cluster, measurements)
        except (SlurmplanError, ValueError, KeyError) as exc:
            log.warning("job %d: cannot price its hints: %s", ob.job.job_id, exc)
            refused.append(Observed(ob.job, None, _one_line(f"{type(exc).__name__}: {exc}")))
            continue
        out.append(ManagedJob(job=job, hints=hints, candidates=cands, steps_done=0.0))
    return out, refused


def with_request(hints: Hints, job: Job) -> Hints:
    """Hints completed from the job's own Slurm request (GPU count and type) where the user left them out.

    A job managed only by its partition has no hints at all; its ``--gres`` request is then what it asked for.
    A *typed* pending request also restricts the types: Slurm 22.05 cannot move it to another type (see
    ``with_node_gpu_type``), so offering the policy other types would only strand the job.
    """
    changes: dict[str, object] = {}
    if hints.gpus is None and job.gpus > 0:
        low, high = hints.min_gpus or job.gpus, hints.max_gpus or job.gpus
        changes["gpus"] = min(max(job.gpus, low), high)
    if job.gpu_type and job.state is JobState.PENDING and hints.gpu_types != (job.gpu_type,):
        changes["gpu_types"] = (job.gpu_type,)
    return dataclasses.replace(hints, **changes) if changes else hints  # type: ignore[arg-type]


def bad_hint_annotation(ob: Observed) -> Action | None:
    """The ANNOTATE that shows a refused job's error in its admin comment, or None if it already shows it."""
    parts = split_admin_comment(ob.job.admin_comment)
    decision = f"{BAD_HINTS_PREFIX} {ob.error}"
    if parts.decision == decision:
        return None
    hints_text = _raw_hints_part(ob.job.admin_comment)
    text = f"{hints_text} || {decision}" if hints_text else decision
    return Action(ActionKind.ANNOTATE, ob.job.job_id, admin_comment=text, reason="bad hints: job left alone")


def _raw_hints_part(admin_comment: str) -> str:
    """The user's part of an admin comment kept verbatim (even when it does not parse), without our decision."""
    text = (admin_comment or "").strip()
    if "||" in text:
        return text.partition("||")[0].strip()
    return "" if text.startswith(BAD_HINTS_PREFIX) or split_admin_comment(text).decision else text


def _one_line(text: str) -> str:
    clean = " ".join(text.replace("||", "|").split())
    return clean if len(clean) <= _MAX_ERROR_CHARS else clean[: _MAX_ERROR_CHARS - 3] + "..."
