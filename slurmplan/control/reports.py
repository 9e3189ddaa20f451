"""Throughput reports from jobs: ``$SLURMPLAN_REPORT_DIR/<job_id>.jsonl`` -> the journal's measurements.

Jobs never write the daemon's database; the launcher appends one JSON line per measurement to its own file and
the daemon ingests new complete lines on each tick, remembering a byte offset per file so a line is ingested
exactly once and a half-written last line waits for the next tick. A bad line is logged and skipped: a job's
report must never stop the scheduler.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from slurmplan.control.codec import plan_from_dict, plan_to_dict
from slurmplan.control.journal import Journal
from slurmplan.domain import Measurement, Plan
from slurmplan.perf.measurements import PROGRESS_FIELDS, measurement_from_dict, measurement_to_dict

log = logging.getLogger(__name__)


def ingest_reports(journal: Journal, report_dir: Path) -> int:
    """Read new lines of every ``*.jsonl`` in ``report_dir`` into ``measurements``; returns how many."""
    if not report_dir.is_dir():
        return 0
    offsets = journal.measurements.offsets()
    added = 0
    for path in sorted(report_dir.glob("*.jsonl")):
        start = offsets.get(path.name, 0)
        try:
            size = path.stat().st_size
            if size < start:  # the file was truncated or replaced: read it again from the start
                start = 0
            if size == start:
                continue
            with path.open("rb") as f:
                f.seek(start)
                data = f.read(size - start)
        except OSError as exc:
            log.warning("cannot read report %s: %s", path, exc)
            continue
        end = data.rfind(b"\n") + 1  # only complete lines
        rows, progress = [], {}
        for lineno, raw in enumerate(data[:end].splitlines(), 1):
            row = _parse_line(raw, path, lineno)
            if row is not None:
                rows.append(row)
                step = {k: row.pop(k) for k in PROGRESS_FIELDS if k in row}
                if step and row.get("job_id") is not None:  # the job's latest progress (issue 23)
                    progress[row["job_id"]] = {"job_id": row["job_id"], "time": row["time"], **step}
        journal.measurements.add(rows, path.name, start + end, list(progress.values()))
        added += len(rows)
    return added


def _parse_line(raw: bytes, path: Path, lineno: int) -> dict[str, object] | None:
    if not raw.strip():
        return None
    try:
        m = measurement_from_dict(json.loads(raw), f"{path}:{lineno}")
    except ValueError as exc:  # ValidationError and JSONDecodeError both are ValueErrors
        log.warning("skipping bad report line %s:%d: %s", path, lineno, exc)
        return None
    if m.job_id is None and path.stem.isdigit():
        m = dataclasses.replace(m, job_id=int(path.stem))
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
        )
        for r in journal.measurements.rows(model)
    ]
