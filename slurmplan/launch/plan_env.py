"""The plan a job was assigned, read from inside the job.

The daemon's decision reaches a running job by one of two roads: the SPANK plugin exports it as
``SLURMPLAN_*`` environment variables, or (on clusters without the plugin) it sits in the job's admin comment,
where the daemon writes ``slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | round 17 | lease until 12:06`` (a
``Cell.short()`` followed by ``Plan.short()``). Both roads end in one :class:`AssignedPlan`. Knowing which road
was taken matters: a job whose plan came from slurmplan is *managed*, so on a checkpoint it requeues held and
lets the daemon decide where it runs next.
"""

from __future__ import annotations

import enum
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from slurmplan.domain import GpuType, Plan, ValidationError
from slurmplan.slurm import hints, jobctl

log = logging.getLogger(__name__)

ENV_PREFIX = "SLURMPLAN_"
_INT_VARS = {
    "SLURMPLAN_DP": "dp",
    "SLURMPLAN_TP": "tp",
    "SLURMPLAN_PP": "pp",
    "SLURMPLAN_MICRO_BATCH": "micro_batch",
    "SLURMPLAN_GRAD_ACCUM": "grad_accum",
    "SLURMPLAN_ZERO_STAGE": "zero_stage",
    "SLURMPLAN_VIRTUAL_STAGES": "virtual_stages",
}
_BOOL_VARS = {"SLURMPLAN_CHECKPOINTING": "checkpointing", "SLURMPLAN_OFFLOAD": "offload"}
PLAN_VARS = (*_INT_VARS, *_BOOL_VARS, "SLURMPLAN_GPU_TYPE", "SLURMPLAN_GPUS")
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n", ""}

_TOKEN = re.compile(r"^(?P<key>dp|tp|pp|mb|ga|v|z)(?P<num>\d+)$")
_TOKEN_FIELDS = {
    "dp": "dp",
    "tp": "tp",
    "pp": "pp",
    "mb": "micro_batch",
    "ga": "grad_accum",
    "v": "virtual_stages",
    "z": "zero_stage",
}


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

    @property
    def managed(self) -> bool:
        return self.source.managed


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValidationError(name, text, "one of 1/0, true/false, yes/no, on/off", "environment")


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValidationError(name, text, "an integer", "environment") from None


def _complete_layout(fields: dict[str, object], gpus: int | None, present: list[str]) -> None:
    """Make a partial set of variables agree with the GPU count: ``dp`` from ``SLURMPLAN_GPUS / (tp*pp)`` when
    only the GPU count is given; an error naming what is missing or inconsistent otherwise."""
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))  # type: ignore[call-overload]
    if "dp" not in fields:
        if gpus is None:
            raise ValidationError(
                "SLURMPLAN_DP", None, f"set (or SLURMPLAN_GPUS) when other plan variables are: {present}", "environment"
            )
        if gpus % (tp * pp):
            allowed = f"a multiple of SLURMPLAN_TP*SLURMPLAN_PP = {tp * pp}"
            raise ValidationError("SLURMPLAN_GPUS", gpus, allowed, "environment")
        fields["dp"] = gpus // (tp * pp)
    elif gpus is not None and int(fields["dp"]) * tp * pp != gpus:  # type: ignore[call-overload]
        allowed = f"SLURMPLAN_DP*TP*PP = {fields['dp']}*{tp}*{pp}"
        raise ValidationError("SLURMPLAN_GPUS", gpus, allowed, "environment")


def plan_from_env(env: Mapping[str, str] | None = None) -> AssignedPlan | None:
    """The plan exported by the SPANK plugin, or None when no ``SLURMPLAN_*`` plan variable is set."""
    env = os.environ if env is None else env
    if not any(name in env for name in PLAN_VARS):
        return None
    fields: dict[str, object] = {}
    for name, field_name in _INT_VARS.items():
        if name in env:
            fields[field_name] = _parse_int(name, env[name])
    for name, field_name in _BOOL_VARS.items():
        if name in env:
            fields[field_name] = _parse_bool(name, env[name])
    gpu_type = env.get("SLURMPLAN_GPU_TYPE") or None
    gpus = _parse_int("SLURMPLAN_GPUS", env["SLURMPLAN_GPUS"]) if env.get("SLURMPLAN_GPUS") else None
    _complete_layout(fields, gpus, sorted(n for n in PLAN_VARS if n in env))
    plan = Plan(**fields)  # type: ignore[arg-type]
    return AssignedPlan(plan, PlanSource.ENV, gpu_type.lower() if gpu_type else None, gpus)


def parse_plan_short(text: str) -> Plan:
    """Inverse of :meth:`Plan.short`: ``"dp2 tp4 pp1 mb2 ga8 v2 gc z1 off"`` -> Plan.

    Fields not named keep their defaults; a repeated key (``pp`` appears in both ``Cell.short()`` and
    ``Plan.short()``) must repeat the same value.
    """
    fields: dict[str, object] = {}
    for token in text.split():
        if token == "gc":
            fields["checkpointing"] = True
            continue
        if token == "off":
            fields["offload"] = True
            continue
        match = _TOKEN.match(token)
        if not match:
            allowed = "dpN tpN ppN mbN gaN vN zN gc off"
            raise ValidationError("plan token", token, f"one of {allowed}", "plan text")
        field_name, value = _TOKEN_FIELDS[match["key"]], int(match["num"])
        if fields.get(field_name, value) != value:
            raise ValidationError(field_name, value, f"the value given before ({fields[field_name]})", "plan text")
        fields[field_name] = value
    return Plan(**fields)  # type: ignore[arg-type]


def parse_decision(admin_comment: str) -> AssignedPlan | None:
    """The daemon's decision in an admin comment (``<hints> || slurmplan: a100x8 dp2 ... | round ...``).

    One grammar for the whole project: the text is read by :func:`slurmplan.slurm.hints.parse_decision`, the
    same parser the daemon's tools and the tests of the SPANK side use.
    """
    decided = hints.parse_decision(admin_comment or "")
    if decided is None:
        return None
    cell, plan = decided
    return AssignedPlan(plan, PlanSource.ADMIN_COMMENT, cell.gpu_type, cell.gpus)


def admin_comment_from_squeue(job_id: str, squeue: str = "squeue", timeout_s: float = 20.0) -> str | None:
    """The job's admin comment via ``squeue --json -j JOB`` (one call at start-up), or None if unreadable."""
    return jobctl.admin_comment(job_id, squeue=squeue, timeout_s=timeout_s)


def load_assigned_plan(env: Mapping[str, str] | None = None, *, query_slurm: bool = True) -> AssignedPlan:
    """The plan for this job: environment first, then the admin comment, else a default single-GPU plan.

    ``query_slurm=False`` skips the ``squeue`` call (tests, and processes other than rank 0 that receive the
    plan from rank 0).
    """
    env = os.environ if env is None else env
    from_env = plan_from_env(env)
    if from_env is not None:
        return from_env
    job_id = env.get("SLURM_JOB_ID")
    if query_slurm and job_id:
        comment = admin_comment_from_squeue(job_id)
        decision = parse_decision(comment) if comment else None
        if decision is not None:
            return decision
    return AssignedPlan(Plan(), PlanSource.DEFAULT)
