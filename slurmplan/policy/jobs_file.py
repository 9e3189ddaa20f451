"""Reading ``slurmplan allocate``'s inputs: a jobs JSON file and a ``type:count,...`` cluster string.

A job gives either measured throughputs per GPU type (Gavel's form, at its ``scale_factor`` GPUs)::

    {"id": "j1", "throughputs": {"v100": 40, "k80": 10}, "scale_factor": 1, "weight": 1, "steps_remaining": 1000}

or model hints for the performance model, whose candidates (Cells with their best plans) become its columns::

    {"id": 7, "hints": "slurmplan:model=gpt2-350m;gpus=4;min=2;max=8"}

Optional per job: ``account``, ``weight``, ``steps_remaining``, ``submit_time``, ``time_since_start``,
``attained_time``, ``deadline`` (seconds from now), ``class`` (``guaranteed``/``best-effort``),
``sla_throughput``, ``requested`` and ``current`` (a Cell as ``v100x2`` or ``a100x8 pp2``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slurmplan.domain import AllocationProblem, Candidate, Cell, GpuType, JobClass, ValidationError

_CELL = re.compile(r"^\s*([a-z0-9][a-z0-9_-]*)x(\d+)(?:\s+pp(\d+))?\s*$")
_NUMBER_FIELDS = ("weight", "steps_remaining", "submit_time", "time_since_start", "attained_time", "deadline")
_FIELDS = frozenset(
    {"id", "throughputs", "scale_factor", "hints", "account", "class", "sla_throughput", "requested", "current"}
    | set(_NUMBER_FIELDS)
)


@dataclass(frozen=True)
class JobsInput:
    """The problem built from a file, with the job names as the file wrote them (for printing)."""

    problem: AllocationProblem
    names: tuple[str, ...]


def parse_mapping(text: str, field: str, kind: type = int) -> dict[str, Any]:
    """``"v100:36,k80:36"`` -> ``{"v100": 36, "k80": 36}``; counts must be >= 0, prices > 0."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition(":")
        try:
            number = kind(value)
        except ValueError:
            number = None
        if not sep or not key.strip() or number is None or number < 0 or (kind is float and number == 0):
            raise ValidationError(field, part, f"comma-separated name:{kind.__name__} pairs, e.g. v100:36")
        out[key.strip().lower()] = number
    if not out:
        raise ValidationError(field, text, "at least one name:value pair")
    return out


def parse_cell(text: str, where: str) -> Cell:
    m = _CELL.match(str(text))
    if not m:
        raise ValidationError("cell", text, "a Cell such as 'v100x2' or 'a100x8 pp2'", where)
    return Cell(m.group(1), int(m.group(2)), int(m.group(3) or 1))


def load_jobs(path: str | Path, capacity: Mapping[GpuType, int]) -> JobsInput:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError("jobs", str(path), f"a readable JSON file ({exc})") from exc
    jobs = data.get("jobs") if isinstance(data, dict) else data
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise ValidationError("jobs", type(jobs).__name__, "a list of job objects (or {'jobs': [...]})", str(path))
    return build_input(jobs, capacity, str(path))


def _columns(
    job: Mapping[str, Any], capacity: Mapping[GpuType, int], where: str
) -> tuple[dict[Cell, Candidate], Cell | None]:
    """The job's Cells with their candidates, and the Cell of its own request when it can be told."""
    if ("throughputs" in job) == ("hints" in job):
        raise ValidationError("throughputs/hints", None, "exactly one of 'throughputs' or 'hints'", where)
    if "hints" in job:
        from slurmplan.formats import parse_hints
        from slurmplan.perf.candidates import job_candidates

        hints = parse_hints(str(job["hints"]))
        cols = {c.cell: c for c in job_candidates(hints, capacity, ())}
        return cols, _requested_cell(cols, hints.gpus, hints.gpu_types)
    thr, sf = job["throughputs"], job.get("scale_factor", 1)
    if not isinstance(sf, int) or isinstance(sf, bool) or sf < 1:
        raise ValidationError("scale_factor", sf, "a positive integer", where)
    if not isinstance(thr, dict):
        raise ValidationError("throughputs", thr, "a mapping of GPU type to throughput", where)
    out = {}
    for gpu_type, value in thr.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 or not np.isfinite(value):
            raise ValidationError(f"throughputs.{gpu_type}", value, "a finite number >= 0", where)
        cell = Cell(str(gpu_type).lower(), sf)
        out[cell] = Candidate(cell, float(value))
    return out, next(iter(out)) if len(out) == 1 else None


def _requested_cell(cols: Mapping[Cell, Candidate], gpus: int | None, types: Sequence[GpuType]) -> Cell | None:
    """The Cell of a hinted request: its GPU count on the first listed type that has one (else the fastest)."""
    if gpus is None:
        return None
    sized = [c for c in cols if c.gpus == gpus and cols[c].throughput > 0]
    for t in types:
        typed = [c for c in sized if c.gpu_type == t]
        if typed:
            return max(typed, key=lambda c: cols[c].throughput)
    return max(sized, key=lambda c: cols[c].throughput) if sized else None


def build_input(jobs: Sequence[Mapping[str, Any]], capacity: Mapping[GpuType, int], where: str) -> JobsInput:
    """Validate every job, then lay them out as one job x Cell problem (Cells in a stable order)."""
    names, cols, numbers = [], [], {k: [] for k in _NUMBER_FIELDS}
    extra: dict[str, list] = {"account": [], "class": [], "sla": [], "requested": [], "current": []}
    for i, job in enumerate(jobs):
        here = f"{where}: job {i}"
        for key in job:
            if key not in _FIELDS:
                raise ValidationError(str(key), job[key], f"a known job field: {', '.join(sorted(_FIELDS))}", here)
        names.append(str(job.get("id", i)))
        row, default_request = _columns(job, capacity, here)
        cols.append(row)
        for key in _NUMBER_FIELDS:
            value = job.get(key, {"weight": 1.0, "steps_remaining": 1.0, "deadline": np.inf}.get(key, 0.0))
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValidationError(key, value, "a number >= 0", here)
            numbers[key].append(float(value))
        cls = job.get("class", "best-effort")
        if cls not in ("guaranteed", "best-effort"):
            raise ValidationError("class", cls, "'guaranteed' or 'best-effort'", here)
        extra["class"].append(JobClass(cls))
        extra["account"].append(str(job.get("account", "")))
        extra["sla"].append(float(job.get("sla_throughput", -1.0)))
        extra["requested"].append(parse_cell(job["requested"], here) if "requested" in job else default_request)
        extra["current"].append(parse_cell(job["current"], here) if "current" in job else None)
    if len(set(names)) != len(names):
        raise ValidationError("id", names, "unique job ids", where)
    cells = tuple(sorted({c for row in cols for c in row}, key=lambda c: (c.gpu_type, c.gpus, c.stages)))
    pos = {c: k for k, c in enumerate(cells)}
    thr = np.zeros((len(jobs), len(cells)))
    cands: list[tuple[Candidate | None, ...]] = []
    for j, row in enumerate(cols):
        for cell, cand in row.items():
            thr[j, pos[cell]] = cand.throughput
        cands.append(tuple(row.get(c) for c in cells))
    requested = np.array([pos.get(c, -1) if c else -1 for c in extra["requested"]])
    # Rubick's SLA by default: what the job's own request would run at (0 when the request is unknown).
    sla = np.array(extra["sla"])
    at_request = np.where(requested >= 0, thr[np.arange(len(jobs)), np.maximum(requested, 0)], 0.0)
    guaranteed = np.array([c is JobClass.GUARANTEED for c in extra["class"]], dtype=bool)
    sla = np.where(sla >= 0, sla, np.where(guaranteed, at_request, 0.0))
    problem = AllocationProblem(
        job_ids=tuple(range(len(jobs))),
        cells=cells,
        throughput=thr,
        capacity=dict(capacity),
        **{("weights" if k == "weight" else k): np.array(v) for k, v in numbers.items()},
        accounts=tuple(extra["account"]),
        job_class=tuple(extra["class"]),
        sla_throughput=sla,
        requested=requested,
        current=np.array([pos.get(c, -1) if c else -1 for c in extra["current"]]),
        candidates=tuple(cands),
    )
    return JobsInput(problem, tuple(names))
