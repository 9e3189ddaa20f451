"""Throughput reports from jobs: ``$SLURMPLAN_REPORT_DIR/<cluster>.<job_id>.jsonl`` -> the journal's measurements.

Jobs never write the daemon's database; the launcher appends one JSON line per measurement to its own file and
the daemon ingests new complete lines on each tick, remembering a byte offset per file so a line is ingested
exactly once and a half-written last line waits for the next tick.

The report folder is shared by every user's jobs, so everything in it is hostile (issue 24 item 3):

* a file is read only when it is a regular file (not a link) owned by the user Slurm says runs its job, and is
  named after a job of this cluster (``<ClusterName>.<job_id>.jsonl``, so that two clusters sharing a host and a
  folder never read each other's job 17; a name without a cluster, ``<job_id>.jsonl``, is the format before
  issue 29 and is still read, with the same owner check);
* every line must name that job (or none), and its numbers must be finite and within :data:`LIMITS`
  (``Infinity``, ``NaN`` or ``1e308`` samples/s would stall or skew every allocation of the model);
* at most :data:`MAX_READ_BYTES` are read from a file per tick, and a line longer than :data:`MAX_LINE_BYTES`
  is skipped whole, so a file with no newline is not read again and again.

A bad line or file is logged (once) and skipped: a job's report must never stop the scheduler.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pwd
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from slurmplan.control.codec import plan_from_dict, plan_to_dict
from slurmplan.control.journal import Journal
from slurmplan.domain import Job, Measurement, Plan, ValidationError
from slurmplan.perf.measurements import PROGRESS_FIELDS, measurement_from_dict, measurement_to_dict
from slurmplan.progress import step_rate

log = logging.getLogger(__name__)

MAX_READ_BYTES = 1 << 20
"""Bytes read from one report file per tick (a report line is about 300 bytes, one a minute)."""
MAX_LINE_BYTES = 64 << 10
"""A longer line is not a report: skipped whole."""
LIMITS = {"samples_per_s": 1e9, "memory_gb": 1e5, "gpus": 1_000_000, "nodes": 100_000}
"""Upper bounds of a report's numbers (samples/s beyond 1e9 is no training job)."""
_NAME = re.compile(r"^(?:(?P<cluster>[A-Za-z0-9_-]{1,64})\.)?(?P<job>[0-9]{1,12})\.jsonl$")
_LOGGED: set[str] = set()


def report_name(cluster: str | None, job_id: int | str) -> str:
    """The report file of a job: ``<cluster>.<job_id>.jsonl`` (``<job_id>.jsonl`` when the cluster is unknown)."""
    return f"{cluster}.{job_id}.jsonl" if cluster else f"{job_id}.jsonl"


def ingest_reports(
    journal: Journal,
    report_dir: Path,
    jobs: Mapping[int, Job] | None = None,
    cluster: str | None = None,
) -> int:
    """Read new lines of this cluster's report files into ``measurements``; returns how many.

    ``jobs`` (job id -> the job as Slurm shows it, for its user) and ``cluster`` (Slurm's ClusterName) come from
    the tick's snapshot; a job Slurm no longer shows is looked up in the journal's job rows. A file of a job
    neither knows is left for a later tick; one named after another cluster is never read.
    """
    if not report_dir.is_dir():
        return 0
    offsets = journal.measurements.offsets()
    users = {j: job.user for j, job in (jobs or {}).items() if job.user}
    added = 0
    for path in sorted(report_dir.glob("*.jsonl")):
        match = _NAME.match(path.name)
        if match is None or (match["cluster"] and match["cluster"] != cluster):
            continue  # not a report, or another cluster's (or, with the cluster unknown, maybe another's)
        job_id = int(match["job"])
        if job_id not in users:  # gone from Slurm (MinJobAge): its user as the journal last saw it
            row = journal.jobs.get(job_id)
            if row and row.get("user"):
                users[job_id] = row["user"]
        data, start = _read_new(path, offsets.get(path.name, 0), users.get(job_id), job_id)
        if data is None:
            continue
        rows, end = _parse_chunk(data, path, job_id)
        if end:
            journal.measurements.add(rows, path.name, start + end, _latest_progress(journal, rows))
            added += len(rows)
    return added


def _latest_progress(journal: Journal, rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each job's newest progress among ``rows`` (whose progress fields move out of the measurement rows), with the
    step rate from the report before it: in ``rows``, or the one the journal kept from an earlier tick."""
    points: dict[int, list[dict[str, object]]] = {}
    for row in rows:
        step = {k: row.pop(k) for k in PROGRESS_FIELDS if k in row}
        if step and row.get("job_id") is not None:  # the job's latest progress (issue 23)
            points.setdefault(int(row["job_id"]), []).append({"job_id": row["job_id"], "time": row["time"], **step})
    out = []
    for job_id, seen in points.items():
        last = seen[-1]
        prev = seen[-2] if len(seen) >= 2 else journal.measurements.progress_of(job_id) or {}
        rate = None
        if last.get("step") is not None and last.get("time") is not None:
            rate = step_rate(prev.get("step"), prev.get("time"), last["step"], last["time"])  # type: ignore[arg-type]
        out.append({**last, "steps_per_s": rate})
    return out


def _once(key: str, message: str, *args: object) -> None:
    if key in _LOGGED:
        return
    if len(_LOGGED) > 100_000:
        _LOGGED.clear()
    _LOGGED.add(key)
    log.warning(message, *args)


def _read_new(path: Path, start: int, user: str | None, job_id: int) -> tuple[bytes | None, int]:
    """The unread bytes of a report (at most MAX_READ_BYTES) and where they start, or None when it is not to be read:
    unknown job, not a regular file, or not owned by the job's user."""
    if user is None:
        return None, start  # the job is not known (yet): try again next tick
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        _once(f"open {path}", "cannot read report %s: %s", path, exc)
        return None, start
    try:
        st = os.fstat(fd)
        owner = _uid(user)
        if not stat.S_ISREG(st.st_mode) or owner is None or st.st_uid != owner:
            _once(f"owner {path} {st.st_uid}", "ignoring report %s: not a regular file owned by %s, the user of job %d",
                  path, user, job_id)  # fmt: skip
            return None, start
        if st.st_size < start:  # truncated or replaced: read it again from the start
            start = 0
        if st.st_size == start:
            return None, start
        os.lseek(fd, start, os.SEEK_SET)
        return os.read(fd, min(st.st_size - start, MAX_READ_BYTES)), start
    except OSError as exc:
        _once(f"read {path}", "cannot read report %s: %s", path, exc)
        return None, start
    finally:
        os.close(fd)


def _uid(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def _parse_chunk(data: bytes, path: Path, job_id: int) -> tuple[list[dict[str, object]], int]:
    """Rows of the complete lines in ``data`` and how many bytes they took (a too-long line is consumed whole)."""
    end = data.rfind(b"\n") + 1
    if end == 0:
        if len(data) >= MAX_LINE_BYTES:  # no newline in a long run of bytes: not a report line, skip past it
            _once(f"long {path}", "skipping %d bytes of report %s without a newline", len(data), path)
            return [], len(data)
        return [], 0  # a half-written line: wait for the rest
    rows = []
    for lineno, raw in enumerate(data[:end].splitlines(), 1):
        if len(raw) > MAX_LINE_BYTES:
            _once(f"long {path}", "skipping a %d-byte line of report %s", len(raw), path)
            continue
        row = _parse_line(raw, path, lineno, job_id)
        if row is not None:
            rows.append(row)
    return rows, end


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a report may hold")


def _check_bounds(m: Measurement, where: str) -> None:
    numbers = {"samples_per_s": m.samples_per_s, "memory_gb": m.memory_gb, "gpus": m.gpus, "nodes": m.nodes}
    for name, value in numbers.items():
        if value is not None and not (math.isfinite(value) and 0 <= value <= LIMITS[name]):
            raise ValidationError(name, value, f"a finite number from 0 to {LIMITS[name]:g}", where)
    if m.time is not None and not math.isfinite(m.time):
        raise ValidationError("time", m.time, "a finite Unix time", where)


def _parse_line(raw: bytes, path: Path, lineno: int, job_id: int) -> dict[str, object] | None:
    if not raw.strip():
        return None
    where = f"{path}:{lineno}"
    try:
        m = measurement_from_dict(json.loads(raw, parse_constant=_reject_constant), where)
        _check_bounds(m, where)
        if m.job_id is not None and m.job_id != job_id:
            raise ValidationError("job_id", m.job_id, f"the job the file is named after ({job_id})", where)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # ValidationError, JSONDecodeError too
        log.warning("skipping bad report line %s: %s", where, ascii(str(exc))[:300])
        return None
    m = dataclasses.replace(m, job_id=job_id)
    return {**measurement_to_dict(m), "plan": json.dumps(plan_to_dict(m.plan))}


def load_measurements(journal: Journal, model: str | None = None) -> list[Measurement]:
    """Measurements from the journal (all, or one model's), oldest first."""
    return [
        Measurement(
            model=r["model"],
            gpu_type=r["gpu_type"],
            gpus=r["gpus"],
            plan=plan_from_dict(json.loads(r["plan"])) or Plan(),
            samples_per_s=r["samples_per_s"],
            nodes=r["nodes"] or 1,
            memory_gb=r["memory_gb"],
            job_id=r["job_id"],
            time=r["time"],
            stack=r.get("stack"),
        )
        for r in journal.measurements.rows(model)
    ]
