"""Reading throughput measurements: the JSON lines the launcher appends, one ``Measurement`` each.

Format (CONTRIBUTING): ``{"job_id", "model", "gpu_type", "gpus", "nodes", "plan": {Plan fields},
"samples_per_s", "memory_gb", "time", "stack"}``; unknown keys are ignored, bad values are errors naming the line.
``stack`` (optional) is the framework that ran the plan, one of ``formats.STACKS``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from slurmplan.domain import Measurement, Plan, ValidationError
from slurmplan.formats import STACKS

PLAN_FIELDS = (
    "dp", "tp", "pp", "micro_batch", "grad_accum", "checkpointing", "zero_stage", "offload", "virtual_stages",
)  # fmt: skip


def plan_from_dict(raw: Mapping[str, object], where: str = "plan") -> Plan:
    if not isinstance(raw, Mapping):
        raise ValidationError("plan", raw, f"a mapping with fields {list(PLAN_FIELDS)}", where)
    unknown = set(raw) - set(PLAN_FIELDS)
    if unknown:
        raise ValidationError("plan field", sorted(unknown)[0], f"one of {list(PLAN_FIELDS)}", where)
    return Plan(**{k: raw[k] for k in PLAN_FIELDS if k in raw})  # type: ignore[arg-type]


PROGRESS_FIELDS = ("step", "checkpoint_step", "total_steps")
"""Optional fields of a report line: steps done, the step of the newest checkpoint, the job's step count. The
daemon reads them as the job's progress (``control.observe.SlurmJobSource.progress``); kept in ``extra``."""


def measurement_from_dict(raw: Mapping[str, object], where: str = "measurement") -> Measurement:
    """One Measurement from a decoded JSON object."""
    if not isinstance(raw, Mapping):
        raise ValidationError("measurement", raw, "a JSON object", where)
    for key in ("model", "gpu_type", "gpus", "plan", "samples_per_s"):
        if key not in raw:
            raise ValidationError(key, None, "present", where)
    gpus, nodes, sps = raw["gpus"], raw.get("nodes", 1), raw["samples_per_s"]
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValidationError("gpus", gpus, "a positive integer", where)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ValidationError("nodes", nodes, "a positive integer", where)
    if not isinstance(sps, int | float) or isinstance(sps, bool) or not sps > 0:
        raise ValidationError("samples_per_s", sps, "a positive number", where)
    plan = plan_from_dict(raw["plan"], where)  # type: ignore[arg-type]
    if plan.gpus > gpus:
        raise ValidationError("plan", plan.short(), f"at most gpus={gpus} GPUs (dp*tp*pp)", where)
    memory = raw.get("memory_gb")
    stack = raw.get("stack")
    if stack is not None and stack not in STACKS:
        raise ValidationError("stack", stack, "one of " + ", ".join(STACKS) + " (or absent)", where)
    extra = {}
    for key in PROGRESS_FIELDS:  # the job's progress (issue 23): optional, non-negative numbers
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < float("inf"):
            raise ValidationError(key, value, "a number of steps >= 0", where)
        extra[key] = float(value)
    return Measurement(
        model=str(raw["model"]),
        gpu_type=str(raw["gpu_type"]).lower(),
        gpus=gpus,
        plan=plan,
        samples_per_s=float(sps),
        nodes=nodes,
        memory_gb=float(memory) if isinstance(memory, int | float) else None,  # type: ignore[arg-type]
        job_id=raw.get("job_id") if isinstance(raw.get("job_id"), int) else None,  # type: ignore[arg-type]
        time=float(raw["time"]) if isinstance(raw.get("time"), int | float) else None,  # type: ignore[arg-type]
        extra=extra,
        stack=stack,  # type: ignore[arg-type]
    )


def load_measurements(path: str | Path) -> list[Measurement]:
    """All measurements of a JSON-lines file (blank lines skipped)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValidationError("measurements", str(path), f"a readable file ({exc.strerror})") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError("line", line[:60], f"JSON ({exc.msg})", where) from None
        out.append(measurement_from_dict(raw, where))
    return out


def measurement_to_dict(m: Measurement) -> dict[str, object]:
    """The launcher's JSON shape for one measurement (inverse of ``measurement_from_dict``)."""
    return {
        "job_id": m.job_id,
        "model": m.model,
        "gpu_type": m.gpu_type,
        "gpus": m.gpus,
        "nodes": m.nodes,
        "plan": {k: getattr(m.plan, k) for k in PLAN_FIELDS},
        "samples_per_s": m.samples_per_s,
        "memory_gb": m.memory_gb,
        "time": m.time,
        "stack": m.stack,
        **{k: m.extra[k] for k in PROGRESS_FIELDS if k in m.extra},
    }
