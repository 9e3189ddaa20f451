"""The plan a job was assigned, read from inside the job.

The daemon's decision reaches a running job by one of two roads: the SPANK plugin exports it as
``SLURMPLAN_*`` environment variables, or (on clusters without the plugin) it sits in the job's admin comment,
where the daemon writes ``slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | since round 17`` (a
``Cell.short()`` followed by ``Plan.short()``). Both roads end in one :class:`AssignedPlan`. Knowing which road
was taken matters: a job whose plan came from slurmplan is *managed*, so on a checkpoint it requeues held and
lets the daemon decide where it runs next.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from slurmplan import formats
from slurmplan.domain import GpuType, Hints, Plan, ValidationError
from slurmplan.slurm import jobctl

log = logging.getLogger(__name__)

ENV_PREFIX = "SLURMPLAN_"
PLAN_VARS = formats.PLAN_VARS


class PlanSource(enum.Enum):
    """Where the plan came from; ENV and ADMIN_COMMENT mean slurmplan manages the job."""

    ENV = "env"
    ADMIN_COMMENT = "admin-comment"
    DEFAULT = "default"

    @property
    def managed(self) -> bool:
        return self is not PlanSource.DEFAULT


@dataclass(frozen=True)
class AssignedPlan:
    """The plan plus the Cell it was chosen for (GPU type and count), when known."""

    plan: Plan
    source: PlanSource
    gpu_type: GpuType | None = None
    gpus: int | None = None
    workers: int | None = None
    """The job's ``workers`` hint (``--plan-workers``), when the admin comment could be read: the launcher checks
    the training script's ``max_p`` against it, so a mismatch fails at start with what to change."""
    model: str | None = None
    """The job's ``model`` hint: the name its throughput reports carry, so the daemon matches them to the job's
    model (a model not in the catalog is priced from them, ``perf/unknown.py``)."""
    stack: str | None = None
    """The job's ``stack`` hint: the framework the scheduler predicted its plan for (``launch-args`` checks that
    the adapter runs it, ``adapters.check_stack``)."""

    @property
    def managed(self) -> bool:
        return self.source.managed


def plan_from_env(env: Mapping[str, str] | None = None) -> AssignedPlan | None:
    """The plan exported by the SPANK plugin, or None when no ``SLURMPLAN_*`` plan variable is set."""
    found = formats.plan_from_environment(os.environ if env is None else env)
    if found is None:
        return None
    plan, gpu_type, gpus = found
    env = os.environ if env is None else env
    plan = _consistent_layout(plan, gpus, "SLURMPLAN_DP" in env, sorted(n for n in PLAN_VARS if n in env))
    return AssignedPlan(plan, PlanSource.ENV, gpu_type, gpus)


def _consistent_layout(plan: Plan, gpus: int | None, dp_given: bool, present: list[str]) -> Plan:
    """Make a partial set of variables agree with the GPU count: ``dp`` from ``SLURMPLAN_GPUS / (tp*pp)`` when
    only the GPU count is given; an error naming what is missing or inconsistent otherwise (a silent dp=1
    would start one process on an 8-GPU allocation)."""
    tp_pp = plan.tp * plan.pp
    if not dp_given:
        if gpus is None:
            allowed = f"set (or SLURMPLAN_GPUS) when other plan variables are: {present}"
            raise ValidationError("SLURMPLAN_DP", None, allowed, "environment")
        if gpus % tp_pp:
            raise ValidationError("SLURMPLAN_GPUS", gpus, f"a multiple of SLURMPLAN_TP*SLURMPLAN_PP = {tp_pp}", "env")
        return dataclasses.replace(plan, dp=gpus // tp_pp)
    if gpus is not None and plan.dp * tp_pp != gpus:
        log.warning("SLURMPLAN_DP*TP*PP = %d*%d*%d but SLURMPLAN_GPUS = %d", plan.dp, plan.tp, plan.pp, gpus)
    return plan


parse_plan_short = formats.parse_plan_short
"""Inverse of :meth:`Plan.short` (kept here for the launcher's callers; the grammar is in ``formats``)."""


def parse_decision(admin_comment: str) -> AssignedPlan | None:
    """The daemon's decision in an admin comment (``<hints> || slurmplan: a100x8 dp2 ... | round ...``).

    One grammar for the whole project: the text is read by :func:`slurmplan.formats.parse_decision`, the
    same parser the daemon's tools and the tests of the SPANK side use.
    """
    decided = formats.parse_decision(admin_comment or "")
    if decided is None:
        return None
    cell, plan = decided
    return AssignedPlan(plan, PlanSource.ADMIN_COMMENT, cell.gpu_type, cell.gpus)


def admin_comment_from_squeue(job_id: str, squeue: str = "squeue", timeout_s: float = 20.0) -> str | None:
    """The job's admin comment via ``squeue --json -j JOB`` (one call at start-up), or None if unreadable."""
    return jobctl.admin_comment(job_id, squeue=squeue, timeout_s=timeout_s)


def load_assigned_plan(env: Mapping[str, str] | None = None, *, query_slurm: bool = True) -> AssignedPlan:
    """The plan for this job: environment first, then the admin comment, else a default single-GPU plan.

    The admin comment is read once (``squeue``) inside a Slurm job, also when the plan came from the environment,
    for the job's ``workers`` hint. ``query_slurm=False`` skips that call (tests, and processes other than rank 0
    that receive the plan from rank 0).
    """
    env = os.environ if env is None else env
    from_env = plan_from_env(env)
    job_id = env.get("SLURM_JOB_ID")
    comment = admin_comment_from_squeue(job_id) if query_slurm and job_id else None
    hints = job_hints(comment or "")
    extra = {"workers": hints.workers, "model": hints.model, "stack": hints.stack} if hints is not None else {}
    if from_env is not None:
        return dataclasses.replace(from_env, **extra)  # type: ignore[arg-type]
    decision = parse_decision(comment) if comment else None
    if decision is not None:
        return dataclasses.replace(decision, **extra)  # type: ignore[arg-type]
    return AssignedPlan(Plan(), PlanSource.DEFAULT, **extra)  # type: ignore[arg-type]


def job_hints(admin_comment: str) -> Hints | None:
    """The hints in an admin comment, or None (none given, or hints the launcher cannot read)."""
    try:
        return formats.find_hints(admin_comment)
    except ValidationError:
        return None
