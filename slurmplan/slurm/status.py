"""What ``slurmplan status`` shows: GPUs per type, nodes by state, jobs with their GPU requests.

Pure functions from a :class:`~slurmplan.domain.Snapshot` to a JSON-able summary and to text laid out like
sinfo/squeue, so an admin reads it at a glance and a script reads the same facts with ``--json``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from slurmplan.domain import Job, Node, Snapshot, ValidationError
from slurmplan.formats import split_admin_comment
from slurmplan.progress import JobProgress, read_progress, report_file, short_text
from slurmplan.slurm.parse import compress_hostlist


def check_slurm_conf(conf: str | None) -> None:
    """Refuse a slurm.conf that is not there, before any Slurm command runs.

    Given a missing file, sinfo keeps retrying for about a minute before it fails; ``--slurm-conf`` (or
    ``$SLURM_CONF`` when no option names one) is checked here so a typo fails at once, naming the file.
    """
    source, path = ("--slurm-conf", conf) if conf else ("$SLURM_CONF", os.environ.get("SLURM_CONF"))
    if not path:
        return
    p = Path(path)
    if not p.is_file():
        why = "is a directory" if p.is_dir() else "does not exist"
        raise ValidationError(source, path, f"an existing slurm.conf file (this path {why})", "status")
    if not os.access(p, os.R_OK):
        raise ValidationError(source, path, "a slurm.conf this user can read", "status")


def gpu_summary(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """Per GPU type: total (all nodes), usable (nodes that can run jobs), used and free."""
    out: dict[str, dict[str, int]] = {}
    for node in snapshot.cluster.nodes:
        if not node.gpu_type:
            continue
        row = out.setdefault(node.gpu_type, {"total": 0, "usable": 0, "used": 0, "free": 0})
        row["total"] += node.gpus
        row["used"] += node.gpus_used
        if node.state.schedulable:
            row["usable"] += node.gpus
        row["free"] += node.gpus_free
    return dict(sorted(out.items()))


def _node_dict(node: Node) -> dict[str, Any]:
    data = asdict(node)
    data["state"] = node.state.value
    data["gpus_free"] = node.gpus_free
    return data


def _job_dict(job: Job) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    data["gpus"] = job.gpus
    return data


def job_progress(snapshot: Snapshot, report_dir: Path | None) -> dict[int, JobProgress]:
    """The progress each unfinished job's launcher reported in ``report_dir`` (``$SLURMPLAN_REPORT_DIR``)."""
    if report_dir is None:
        return {}
    live = (j for j in snapshot.jobs if not j.state.finished)
    found = {j.job_id: read_progress(report_file(report_dir, j.job_id, j.cluster)) for j in live}
    return {job_id: p for job_id, p in found.items() if p is not None}


def _reason(job: Job) -> str:
    """Slurm's reason, and for a held managed job without a decision yet, that it waits for slurmplan's round."""
    reason = job.state_reason or "None"
    comment = split_admin_comment(job.admin_comment)
    if job.held and comment.hints and not comment.decision:
        reason += ": waits for slurmplan's next round, see `slurmplan explain`"
    return f"({reason})"


def status_dict(
    snapshot: Snapshot, include_finished: bool = False, progress: dict[int, JobProgress] | None = None
) -> dict[str, Any]:
    jobs = [j for j in snapshot.jobs if include_finished or not j.state.finished]
    progress = progress or {}
    return {
        "time": snapshot.time,
        "gpus": gpu_summary(snapshot),
        "nodes_by_state": dict(sorted(Counter(n.state.value for n in snapshot.cluster.nodes).items())),
        "nodes": [_node_dict(n) for n in snapshot.cluster.nodes],
        "jobs": [
            {**_job_dict(j), "progress": asdict(progress[j.job_id]) if j.job_id in progress else None} for j in jobs
        ],
    }


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def gpu_request_text(job: Job) -> str:
    """``a100:2 x 2 nodes``, ``gpu:1`` (any type) or ``-`` (no GPUs)."""
    if not job.gpus_per_node:
        return "-"
    text = f"{job.gpu_type or 'gpu'}:{job.gpus_per_node}"
    return text + (f" x {job.node_count} nodes" if job.node_count > 1 else "")


def render_status(
    snapshot: Snapshot, include_finished: bool = False, progress: dict[int, JobProgress] | None = None
) -> str:
    """sinfo/squeue-like text: GPU table, node states, node table, job table (with each job's reported steps and
    predicted finish when ``progress`` has them)."""
    progress = progress or {}
    lines = ["GPUS"]
    summary = gpu_summary(snapshot)
    lines += _table(
        ["TYPE", "TOTAL", "USED", "FREE", "UNUSABLE"],
        [
            [t, str(r["total"]), str(r["used"]), str(r["free"]), str(r["total"] - r["usable"])]
            for t, r in summary.items()
        ],
    )
    by_state: dict[str, list[str]] = {}
    for node in snapshot.cluster.nodes:
        by_state.setdefault(node.state.value, []).append(node.name)
    lines += ["", "NODES BY STATE"]
    lines += _table(
        ["STATE", "COUNT", "NODELIST"], [[s, str(len(n)), compress_hostlist(n)] for s, n in sorted(by_state.items())]
    )
    lines += ["", "NODES"]
    lines += _table(
        ["NODE", "STATE", "GPU", "GPUS(USED/TOTAL)", "CPUS(USED/TOTAL)", "MEM_MB(USED/TOTAL)", "PARTITIONS"],
        [
            [
                n.name,
                n.state.value,
                n.gpu_type or "-",
                f"{n.gpus_used}/{n.gpus}",
                f"{n.cpus_used}/{n.cpus}",
                f"{n.memory_used_mb}/{n.memory_mb}",
                ",".join(n.partitions),
            ]
            for n in snapshot.cluster.nodes
        ],
    )
    jobs = [j for j in snapshot.jobs if include_finished or not j.state.finished]
    lines += ["", "JOBS"]
    lines += _table(
        ["JOBID", "NAME", "USER", "STATE", "GPUS", "STEP", "NODES(REASON)", "ADMIN_COMMENT"],
        [
            [
                str(j.job_id),
                j.name[:20],
                j.user,
                j.state.value + (" (held)" if j.held else ""),
                gpu_request_text(j),
                short_text(progress[j.job_id]) if j.job_id in progress else "-",
                compress_hostlist(j.nodes) if j.nodes else _reason(j),
                j.admin_comment,
            ]
            for j in jobs
        ],
    )
    return "\n".join(lines) + "\n"
