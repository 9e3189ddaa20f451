"""Parse ``sacct --json`` (Slurm 22.05's OpenAPI v0.0.38 and the later ``{set, infinite, number}`` shapes) and
``sacct --parsable2`` into one record type.

Accounting output is user bytes (job names, comments) and a site's history is long: a record with a missing or
malformed field is skipped and counted with its job id and the field named, never the whole import. Only job
allocations are read: steps (``1.batch``) are parts of a job, not jobs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from slurmplan.domain import ValidationError
from slurmplan.slurm.reader import INFINITE32

# ``slurm/sacct.py`` asks for the admin comment as the one free-text column, last: slurmplan's own decision text
# holds ``|``, so a line with extra fields is joined back into it. With more than one free-text column
# (``JobName``, ``Comment``) such a line cannot be split and is skipped. Columns are read by header name.
FREE_TEXT = frozenset({"JobName", "Comment", "AdminComment", "SubmitLine", "WorkDir"})
REQUIRED_PARSABLE = ("JobIDRaw", "State", "Submit", "Start", "End", "AllocTRES")

_GPU_TRES = re.compile(r"^gres/gpu(?::(?P<type>[^=]+))?=(?P<count>\d+)$")


@dataclass(frozen=True)
class SacctJob:
    """One job allocation from accounting; times in Unix seconds, None when accounting has none."""

    job_id: int
    state: str
    submit: float
    start: float | None
    end: float | None
    gpus: int
    gpu_type: str | None
    nodes: int = 1
    eligible: float | None = None
    name: str = ""
    account: str = ""
    user: str = ""
    partition: str = ""
    time_limit_s: float | None = None
    admin_comment: str = ""
    comment: str = ""

    @property
    def started(self) -> bool:
        return self.start is not None and self.end is not None and self.end >= self.start and self.nodes > 0


@dataclass(frozen=True)
class Skipped:
    """A record left out: its job id (as written, or ``?``), the field at fault and why."""

    job_id: str
    field: str
    why: str

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.field} {self.why}"


@dataclass
class ParsedHistory:
    """What a sacct output held: the jobs read, the records skipped, and the output's format."""

    fmt: str
    jobs: list[SacctJob] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    steps: int = 0
    """Step records (``1.batch``) in a parsable2 file without ``-X``: parts of jobs, ignored."""


class _Bad(Exception):
    def __init__(self, field: str, why: str) -> None:
        super().__init__(field, why)
        self.field, self.why = field, why


# --------------------------------------------------------------------------------------------------- JSON


def _number(value: object, name: str, zero_is_none: bool = False) -> float | None:
    """A count or time: a plain number (v0.0.38) or ``{set, infinite, number}`` (v0.0.40 and later); Slurm's
    32-bit NO_VAL/INFINITE printed as a plain number is none too (24.11's ``time.start`` of a job that never
    started is 4294967294, where 22.05 printed its end: ``data/all_24.11.json``)."""
    if isinstance(value, Mapping):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(name, f"is {value!r}, not a number")
    if (zero_is_none and value == 0) or value >= INFINITE32:
        return None
    return float(value)


def _text(value: object, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Bad(name, f"is {value!r}, not a string")
    return value


def _json_state(job: Mapping[str, object]) -> str:
    state = job.get("state")
    current = state.get("current") if isinstance(state, Mapping) else state
    if isinstance(current, list):  # 23.02+: a list of flags, the base state first
        current = current[0] if current else None
    if not isinstance(current, str) or not current:
        raise _Bad("state.current", f"is {current!r}, not a job state")
    return current.upper()


def _json_gpus(tres: object, name: str) -> tuple[int, str | None]:
    """Total GPUs and the GPU type from a TRES list (``{type: gres, name: gpu:a100, count: 2}``)."""
    if tres is None:
        return 0, None
    if not isinstance(tres, list):
        raise _Bad(name, f"is {type(tres).__name__}, not a list of TRES")
    total, typed = 0, {}
    for item in tres:
        if not isinstance(item, Mapping) or item.get("type") != "gres":
            continue
        label = item.get("name") or ""
        if not isinstance(label, str) or not label.startswith("gpu"):
            continue
        count = _number(item.get("count"), name) or 0.0
        if label == "gpu":
            total = int(count)
        elif label.startswith("gpu:"):
            typed[label[4:].lower()] = int(count)
    return max(total, sum(typed.values())), _one_type(typed, name)


def _one_type(typed: Mapping[str, int], name: str) -> str | None:
    if len(typed) > 1:
        raise _Bad(name, f"names several GPU types ({', '.join(sorted(typed))}); a job runs on one")
    return next(iter(typed), None)


def _json_job(job: object) -> SacctJob:
    if not isinstance(job, Mapping):
        raise _Bad("job", "is not a JSON object")
    job_id = job.get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise _Bad("job_id", f"is {job_id!r}, not an integer")
    times = job.get("time")
    if not isinstance(times, Mapping):
        raise _Bad("time", "is missing")
    submit = _number(times.get("submission"), "time.submission", zero_is_none=True)
    if submit is None:
        raise _Bad("time.submission", "is missing")
    gpus, gpu_type = _json_gpus((job.get("tres") or {}).get("allocated"), "tres.allocated")
    req_gpus, req_type = _json_gpus((job.get("tres") or {}).get("requested"), "tres.requested")
    nodes_text = _text(job.get("nodes"), "nodes")
    started_nodes = nodes_text and nodes_text != "None assigned"
    limit_min = _number(times.get("limit"), "time.limit")
    comment = job.get("comment") if isinstance(job.get("comment"), Mapping) else {}
    return SacctJob(
        job_id=job_id,
        state=_json_state(job),
        submit=submit,
        start=_number(times.get("start"), "time.start", zero_is_none=True),
        end=_number(times.get("end"), "time.end", zero_is_none=True),
        gpus=gpus or req_gpus,
        gpu_type=gpu_type or req_type,
        nodes=int(_number(job.get("allocation_nodes"), "allocation_nodes") or 0) if started_nodes else 0,
        eligible=_number(times.get("eligible"), "time.eligible", zero_is_none=True),
        name=_text(job.get("name"), "name"),
        account=_text(job.get("account"), "account"),
        user=_text(job.get("user"), "user"),
        partition=_text(job.get("partition"), "partition"),
        time_limit_s=None if limit_min is None else limit_min * 60.0,
        admin_comment=_text(comment.get("administrator"), "comment.administrator"),
        comment=_text(comment.get("job"), "comment.job"),
    )


def parse_json(text: str) -> ParsedHistory:
    """``sacct --json`` output; a document that is not sacct's JSON at all is an error naming what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError("sacct output", text[:40], f"sacct --json output ({exc.msg})", "trace import") from None
    jobs = doc.get("jobs") if isinstance(doc, Mapping) else None
    if not isinstance(jobs, list):
        raise ValidationError("jobs", type(jobs).__name__, "a list of jobs (sacct --json)", "trace import")
    out = ParsedHistory("json")
    for raw in jobs:
        try:
            out.jobs.append(_json_job(raw))
        except _Bad as bad:
            job_id = raw.get("job_id", "?") if isinstance(raw, Mapping) else "?"
            out.skipped.append(Skipped(str(job_id), bad.field, bad.why))
    return out


# ----------------------------------------------------------------------------------------------- parsable2


def _when(value: str, name: str) -> float | None:
    """``2026-11-25T14:51:43`` in the machine's local time (sacct's), or None for Unknown/None/empty."""
    if value in ("", "Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise _Bad(name, f"is {value!r}, not a time like 2026-01-31T12:00:00") from None


def _tres_gpus(text: str, name: str) -> tuple[int, str | None]:
    """``billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,mem=1G,node=1`` -> (2, 'a100')."""
    total, typed = 0, {}
    for part in filter(None, text.split(",")):
        if not part.startswith("gres/gpu"):
            continue
        m = _GPU_TRES.match(part)
        if m is None:
            raise _Bad(name, f"has {part!r}, not gres/gpu[:TYPE]=COUNT")
        if m["type"] is None:
            total = int(m["count"])
        else:
            typed[m["type"].lower()] = int(m["count"])
    return max(total, sum(typed.values())), _one_type(typed, name)


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _Bad(name, f"is {value!r}, not an integer") from None


def _parsable_job(row: Mapping[str, str]) -> SacctJob:
    job_id = _int(row["JobIDRaw"], "JobIDRaw")
    submit = _when(row["Submit"], "Submit")
    if submit is None:
        raise _Bad("Submit", "is missing")
    state = row["State"].split()[0].upper() if row["State"].strip() else ""
    if not state:
        raise _Bad("State", "is empty")
    gpus, gpu_type = _tres_gpus(row["AllocTRES"], "AllocTRES")
    req_gpus, req_type = _tres_gpus(row.get("ReqTRES", ""), "ReqTRES")
    node_list = row.get("NodeList", "")
    nodes = _int(row["NNodes"], "NNodes") if row.get("NNodes") else 1
    limit = row.get("TimelimitRaw", "")
    return SacctJob(
        job_id=job_id,
        state=state,
        submit=submit,
        start=_when(row["Start"], "Start"),
        end=_when(row["End"], "End"),
        gpus=gpus or req_gpus,
        gpu_type=gpu_type or req_type,
        nodes=0 if node_list in ("None assigned", "") and "NodeList" in row else nodes,
        eligible=_when(row.get("Eligible", ""), "Eligible"),
        name=row.get("JobName", ""),
        account=row.get("Account", ""),
        user=row.get("User", ""),
        partition=row.get("Partition", ""),
        time_limit_s=_int(limit, "TimelimitRaw") * 60.0 if limit.isdigit() else None,
        admin_comment=row.get("AdminComment", ""),
        comment=row.get("Comment", ""),
    )


def parse_parsable(lines: Iterable[str]) -> ParsedHistory:
    """``sacct --parsable2`` output with its header line (columns read by name; steps ignored)."""
    it = iter(lines)
    header = next(it, "").rstrip("\n").split("|")
    missing = [f for f in REQUIRED_PARSABLE if f not in header]
    if missing:
        raise ValidationError(
            "sacct header", "|".join(header)[:80], f"a --parsable2 header with {', '.join(missing)}", "trace import"
        )
    out = ParsedHistory("parsable2")
    for line in it:
        cells = line.rstrip("\n").split("|")
        if not line.strip():
            continue
        job_id = cells[0] or "?"
        if "." in job_id:
            out.steps += 1
            continue
        if len(cells) > len(header) and _tail_is_free_text(header):
            cells = [*cells[: len(header) - 1], "|".join(cells[len(header) - 1 :])]
        if len(cells) != len(header):
            why = f"has {len(cells)} fields where the header has {len(header)} (a '|' inside a name or comment)"
            out.skipped.append(Skipped(job_id, "line", why))
            continue
        try:
            out.jobs.append(_parsable_job(dict(zip(header, cells, strict=True))))
        except _Bad as bad:
            out.skipped.append(Skipped(job_id, bad.field, bad.why))
    return out


def _tail_is_free_text(header: list[str]) -> bool:
    return header[-1] in FREE_TEXT and not any(h in FREE_TEXT for h in header[:-1])


def parse_sacct(text: str) -> ParsedHistory:
    """Either format, told apart by its first character (JSON starts with ``{``)."""
    if text.lstrip().startswith("{"):
        return parse_json(text)
    if not text.strip():
        return ParsedHistory("parsable2")
    return parse_parsable(text.splitlines())
