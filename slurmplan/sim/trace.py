"""Traces: one job a JSON line, read with line-numbered errors and written back round-trip exact.

One format serves both kinds of job the simulator runs. A *table job* names a ``job_type`` of Gavel's measured
throughput table and a ``scale_factor`` (GPUs, ganged, one type): Gavel's own trace dumps are read as they are.
A *hint job* names a ``model`` for the performance model plus optional ``hints`` (global batch, sequence
length, elastic range, allowed GPU types, maxP workers, the ``stack`` it runs under: one of ``formats.STACKS``),
exactly what a user gives sbatch.

Fields (unknown ones are an error, so a typo never silently changes an experiment):

``job_id`` int, ``arrival_time_s`` float >= 0, ``job_type`` str | ``model`` str, ``scale_factor`` or ``gpus``
int >= 1, ``gpu_type`` str (requested type; absent = any), ``total_steps`` float > 0 or ``duration_s`` float > 0
(seconds on the requested configuration, converted to steps by the engine), ``account`` str, ``job_class``
``guaranteed``/``best-effort``, ``deadline_s`` float (absolute simulated seconds), ``priority_weight`` float > 0,
``in_window`` bool (whether the job's JCT is measured), ``hints`` object. Gavel's descriptive fields
``batch_size``, ``throughput_steps_per_s`` and ``duration_s`` are accepted.

A *measured job* (from a site's history, ``trace import``) has neither: it names the ``gpu_type`` it ran on,
its ``duration_s`` there and ``speeds`` ``{type: relative speed}``, from which its time on every other type
follows (``history/speeds.py``); it runs at its own GPU count. ``name``, ``user``, ``partition`` and
``time_limit_s`` record where it came from (not used by the simulator).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slurmplan.domain import GpuType, Hints, JobClass, ValidationError
from slurmplan.formats import STACKS

HINT_FIELDS = ("global_batch", "seq_len", "min_gpus", "max_gpus", "gpu_types", "workers", "stack")
KNOWN_FIELDS = frozenset(
    {
        "job_id",
        "arrival_time_s",
        "job_type",
        "model",
        "batch_size",
        "scale_factor",
        "gpus",
        "gpu_type",
        "total_steps",
        "duration_s",
        "account",
        "job_class",
        "deadline_s",
        "priority_weight",
        "in_window",
        "throughput_steps_per_s",
        "hints",
        "speeds",
        "name",
        "user",
        "partition",
        "time_limit_s",
    }
)


class TraceError(ValidationError):
    """A bad trace line; ``where`` is ``FILE:LINE`` so the user can jump to it."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace, as submitted: what the user asked for and how much work it is."""

    job_id: int
    arrival_s: float
    gpus: int
    job_type: str | None = None
    model: str | None = None
    gpu_type: GpuType | None = None
    total_steps: float | None = None
    duration_s: float | None = None
    account: str = "default"
    job_class: JobClass = JobClass.BEST_EFFORT
    deadline_s: float | None = None
    priority_weight: float = 1.0
    in_window: bool = True
    extra_hints: Mapping[str, object] = field(default_factory=dict)
    speeds: Mapping[str, float] = field(default_factory=dict)
    """Relative speed per GPU type for a measured job (neither ``job_type`` nor ``model``)."""
    name: str = ""
    user: str = ""
    partition: str = ""
    time_limit_s: float | None = None

    @property
    def is_table_job(self) -> bool:
        return self.job_type is not None

    @property
    def is_measured_job(self) -> bool:
        return self.job_type is None and self.model is None

    @property
    def kind(self) -> str:
        """What the job is, in words: its Gavel job type, its model, or ``measured on TYPE``."""
        return self.job_type or self.model or f"measured on {self.gpu_type}"

    def hints(self) -> Hints:
        """The hints a user would have given sbatch for this job (what the daemon would read)."""
        extra = dict(self.extra_hints)
        # the requested type is Slurm's --gres request; only an explicit gpu_types hint restricts the types
        types = tuple(extra.pop("gpu_types", ()))
        return Hints(
            managed=True,
            model=self.model,
            gpu_types=types,
            gpus=self.gpus,
            job_class=self.job_class,
            steps=int(math.ceil(self.total_steps)) if self.total_steps else None,
            deadline=self.deadline_s,
            **extra,  # type: ignore[arg-type]
        )

    def to_dict(self) -> dict[str, object]:
        """The JSON-lines form; only fields that differ from their defaults, floats written round-trip exact."""
        out: dict[str, object] = {"job_id": self.job_id, "arrival_time_s": self.arrival_s}
        if self.job_type is not None:
            out["job_type"] = self.job_type
            out["scale_factor"] = self.gpus
        elif self.model is not None:
            out["model"] = self.model
            out["gpus"] = self.gpus
        else:
            out["gpus"] = self.gpus
        optional = {
            "gpu_type": self.gpu_type,
            "total_steps": self.total_steps,
            "duration_s": self.duration_s,
            "deadline_s": self.deadline_s,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.account != "default":
            out["account"] = self.account
        if self.job_class is not JobClass.BEST_EFFORT:
            out["job_class"] = self.job_class.value
        if self.priority_weight != 1.0:
            out["priority_weight"] = self.priority_weight
        if not self.in_window:
            out["in_window"] = False
        if self.extra_hints:
            out["hints"] = dict(self.extra_hints)
        if self.speeds:
            out["speeds"] = dict(self.speeds)
        for key in ("name", "user", "partition", "time_limit_s"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


def _get(obj: Mapping[str, object], name: str, kind: type | tuple[type, ...], where: str, default: object = None):
    value = obj.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and kind is not bool:
        raise TraceError(name, value, f"a {_kind_name(kind)}", where)
    if not isinstance(value, kind):
        raise TraceError(name, value, f"a {_kind_name(kind)}", where)
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "JSON object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _positive(name: str, value: float | None, where: str, allow_zero: bool = False) -> None:
    if value is None:
        return
    bad = value < 0 if allow_zero else value <= 0
    if bad or not math.isfinite(value):
        raise TraceError(name, value, "a finite number >= 0" if allow_zero else "a finite number > 0", where)


def _hints(obj: Mapping[str, object], where: str) -> dict[str, object]:
    hints = _get(obj, "hints", dict, where, {})
    out: dict[str, object] = {}
    for key, value in hints.items():
        if key not in HINT_FIELDS:
            raise TraceError(f"hints.{key}", value, f"one of {', '.join(HINT_FIELDS)}", where)
        if key == "gpu_types":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TraceError("hints.gpu_types", value, "a list of GPU type names", where)
            out[key] = tuple(v.lower() for v in value)
        elif key == "stack":  # the framework the job runs under: the performance model predicts for it
            if value not in STACKS:
                raise TraceError("hints.stack", value, "one of " + ", ".join(STACKS), where)
            out[key] = value
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TraceError(f"hints.{key}", value, "a positive integer", where)
        else:
            out[key] = value
    return out


def job_from_dict(obj: object, where: str = "trace") -> TraceJob:
    """Validate one decoded line; every error names the field, the value and what is allowed."""
    if not isinstance(obj, dict):
        raise TraceError("line", obj, "a JSON object", where)
    for key in obj:
        if key not in KNOWN_FIELDS:
            raise TraceError(key, obj[key], f"a known field ({', '.join(sorted(KNOWN_FIELDS))})", where)
    if "job_id" not in obj:
        raise TraceError("job_id", None, "an integer (required)", where)
    job_id = _get(obj, "job_id", int, where)
    arrival = float(_get(obj, "arrival_time_s", (int, float), where, 0.0))
    _positive("arrival_time_s", arrival, where, allow_zero=True)
    job_type = _get(obj, "job_type", str, where)
    model = _get(obj, "model", str, where)
    speeds = _speeds(obj, where)
    if job_type is None and model is None and not speeds:
        allowed = "a job type of the throughput table, a 'model' for hint jobs, or 'speeds' for measured jobs"
        raise TraceError("job_type", None, allowed, where)
    if job_type is None and model is None and (obj.get("gpu_type") is None or obj.get("duration_s") is None):
        raise TraceError("gpu_type", obj.get("gpu_type"), "the type a measured job ran on, with its duration_s", where)
    gpus = _get(obj, "scale_factor", int, where) or _get(obj, "gpus", int, where, 1)
    if gpus < 1:
        raise TraceError("gpus", gpus, "a positive integer", where)
    steps = _get(obj, "total_steps", (int, float), where)
    duration = _get(obj, "duration_s", (int, float), where)
    _positive("total_steps", steps, where)
    _positive("duration_s", duration, where)
    if steps is None and duration is None:
        raise TraceError("total_steps", None, "total_steps or duration_s (one is required)", where)
    job_class = _get(obj, "job_class", str, where, JobClass.BEST_EFFORT.value)
    try:
        klass = JobClass(job_class)
    except ValueError:
        raise TraceError("job_class", job_class, "guaranteed or best-effort", where) from None
    deadline = _get(obj, "deadline_s", (int, float), where)
    weight = float(_get(obj, "priority_weight", (int, float), where, 1.0))
    _positive("priority_weight", weight, where)
    gpu_type = _get(obj, "gpu_type", str, where)
    return TraceJob(
        job_id=job_id,
        arrival_s=arrival,
        gpus=gpus,
        job_type=job_type,
        model=model if job_type is None else None,
        gpu_type=gpu_type.lower() if gpu_type else None,
        total_steps=float(steps) if steps is not None else None,
        duration_s=float(duration) if duration is not None else None,
        account=_get(obj, "account", str, where, "default"),
        job_class=klass,
        deadline_s=float(deadline) if deadline is not None else None,
        priority_weight=weight,
        in_window=_get(obj, "in_window", bool, where, True),
        extra_hints=_hints(obj, where),
        speeds=speeds,
        name=_get(obj, "name", str, where, ""),
        user=_get(obj, "user", str, where, ""),
        partition=_get(obj, "partition", str, where, ""),
        time_limit_s=_get(obj, "time_limit_s", (int, float), where),
    )


def _speeds(obj: Mapping[str, object], where: str) -> dict[str, float]:
    speeds = _get(obj, "speeds", dict, where, {})
    for key, value in speeds.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not ok:
            raise TraceError(f"speeds.{key}", value, "a finite number >= 0 (speed relative to a V100)", where)
    return {str(k).lower(): float(v) for k, v in speeds.items()}


def parse_lines(lines: Iterable[str], source: str = "trace") -> Iterator[TraceJob]:
    """Parse JSON lines; blank lines and ``#`` comments are skipped. Duplicate job ids are an error."""
    seen: set[int] = set()
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError("line", text[:60], f"valid JSON ({exc.msg} at column {exc.colno})", where) from None
        job = job_from_dict(obj, where)
        if job.job_id in seen:
            raise TraceError("job_id", job.job_id, "an id not used on an earlier line", where)
        seen.add(job.job_id)
        yield job


def read_trace(path: str | Path) -> tuple[TraceJob, ...]:
    """Read a whole trace file (ours or a Gavel dump), sorted by arrival then id."""
    file = Path(path)
    try:
        with file.open() as fh:
            jobs = list(parse_lines(fh, str(file)))
    except OSError as exc:
        raise TraceError("trace", str(file), f"a readable file ({exc.strerror})") from exc
    return tuple(sorted(jobs, key=lambda j: (j.arrival_s, j.job_id)))


def write_trace(jobs: Iterable[TraceJob], path: str | Path) -> int:
    """Write jobs as JSON lines; returns the count. ``json`` writes floats with repr, so reading back is exact."""
    count = 0
    with Path(path).open("w") as fh:
        for job in jobs:
            fh.write(json.dumps(job.to_dict()) + "\n")
            count += 1
    return count
