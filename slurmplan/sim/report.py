"""Writing results: JSON, CSV, a comparison table with ratios to the first policy, and matplotlib plots.

Everything here is a pure function of SimResults and their summaries, so a report can be rebuilt from a saved
JSON result without re-simulating. Plots use the Agg backend (no display on a cluster's login node).
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from slurmplan.sim.metrics import HOUR, measured_jobs, utilization_series
from slurmplan.sim.result import SimResult

log = logging.getLogger(__name__)

TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct_h", "avg JCT h", "{:.2f}"),
    ("bound_h", "bound h", "{:.2f}"),
    ("excess_h", "excess h", "{:.2f}"),
    ("elastic_bound_h", "elastic bound h", "{:.2f}"),
    ("median_jct_h", "median h", "{:.2f}"),
    ("p99_jct_h", "p99 h", "{:.1f}"),
    ("makespan_h", "makespan h", "{:.1f}"),
    ("avg_queue_h", "queue h", "{:.2f}"),
    ("utilization", "util", "{:.3f}"),
    ("ftf_mean", "FTF rho", "{:.2f}"),
    ("restarts_per_job", "restarts/job", "{:.2f}"),
    ("sla_misses", "SLA miss", "{:d}"),
    ("deadline_misses", "DL miss", "{:d}"),
    ("unfinished", "unfinished", "{:d}"),
)
RATIO_COLUMNS = ("avg_jct_h", "median_jct_h", "p99_jct_h", "makespan_h")


NA = "n/a"
"""What a table prints for a value that does not exist (nan: no finished job) or is not finite (inf: a bound when
a job's request cannot run as submitted): never ``inf`` or ``nan``."""


def _fmt(fmt: str, value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return NA
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def format_table(summaries: Sequence[Mapping[str, object]]) -> str:
    """One row per policy; ``x first`` columns give each policy's value divided by the first policy's."""
    head = ["policy", *(label for _, label, _ in TABLE_COLUMNS), *(f"{k.split('_')[0]} x1st" for k in RATIO_COLUMNS)]
    rows = [head]
    base = summaries[0] if summaries else {}
    for s in summaries:
        row = [str(s["policy"])] + [_fmt(fmt, s.get(key, math.nan)) for key, _, fmt in TABLE_COLUMNS]
        for key in RATIO_COLUMNS:
            a, b = s.get(key, math.nan), base.get(key, math.nan)
            ok = isinstance(a, float | int) and isinstance(b, float | int) and b and math.isfinite(b)
            row.append(_fmt("{:.2f}", a / b) if ok else NA)
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for r in rows:
        cells = (c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def format_dropped(dropped: Sequence[str], cluster: str) -> str:
    """The line under the table that names the jobs ``--drop-infeasible`` left out (at most 20 by name)."""
    names = ", ".join(dropped[:20]) + (f" and {len(dropped) - 20} more" if len(dropped) > 20 else "")
    return f"dropped {len(dropped)} jobs that no GPU type of {cluster} can run (--drop-infeasible): {names}"


def _jsonable(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def to_json(summaries: Sequence[Mapping[str, object]]) -> str:
    """Summaries as strict JSON (NaN and infinity become null)."""
    return json.dumps(_jsonable(list(summaries)), indent=2)


def write_summary_csv(summaries: Sequence[Mapping[str, object]], path: Path) -> None:
    keys = list(dict.fromkeys(k for s in summaries for k in s))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for s in summaries:
            writer.writerow(s)


def write_jobs_csv(result: SimResult, path: Path) -> None:
    """One row per job: times in seconds, as measured (inf written as empty)."""
    fields = [
        "job_id",
        "arrival_s",
        "first_start_s",
        "finish_s",
        "jct_s",
        "queue_s",
        "gpus",
        "account",
        "job_class",
        "in_window",
        "state",
        "dedicated_s",
        "deadline_s",
        "restarts",
        "reconfigurations",
        "run_s",
        "gpu_s",
        "last_reason",
    ]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(fields)
        for j in result.jobs:
            row = []
            for f in fields:
                v = getattr(j, f)
                row.append("" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v)
            writer.writerow(row)


def write_result_json(result: SimResult, summary: Mapping[str, object], path: Path) -> None:
    path.write_text(json.dumps(_jsonable({"summary": dict(summary), "result": result.to_dict()})))


# ----------------------------------------------------------------------------------------------------- plots


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_jct_cdf(results: Sequence[SimResult], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        jct = np.sort([j.jct_s / HOUR for j in measured_jobs(r) if j.finished])
        if len(jct):
            ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=r.policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_utilization(results: Sequence[SimResult], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r in results:
        t, u = utilization_series(r)
        ax.plot(t / HOUR, u, label=r.policy, linewidth=1)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("GPU utilization")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_bars(summaries: Sequence[Mapping[str, object]], path: Path) -> None:
    plt = _pyplot()
    keys = [("avg_jct_h", "avg JCT (h)"), ("p99_jct_h", "p99 JCT (h)"), ("makespan_h", "makespan (h)")]
    keys += [("utilization", "utilization"), ("restarts_per_job", "restarts / job")]
    fig, axes = plt.subplots(1, len(keys), figsize=(3 * len(keys), 3.5))
    names = [str(s["policy"]) for s in summaries]
    for ax, (key, label) in zip(axes, keys, strict=True):
        values = [float(s.get(key, math.nan)) for s in summaries]
        ax.bar(range(len(values)), values, color=[f"C{i}" for i in range(len(values))])
        ax.set_xticks(range(len(values)), names, rotation=45, ha="right", fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(
    results: Sequence[SimResult], summaries: Sequence[Mapping[str, object]], out_dir: Path, plots: bool = True
) -> list[Path]:
    """Everything at once: summary JSON and CSV, per-job CSVs, and (optionally) the three plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "summary.json", out_dir / "summary.csv"]
    written[0].write_text(to_json(summaries))
    write_summary_csv(summaries, written[1])
    for r in results:
        path = out_dir / f"jobs_{_slug(r.policy)}.csv"
        write_jobs_csv(r, path)
        written.append(path)
    if plots:
        for name, fn in (("jct_cdf.png", plot_jct_cdf), ("utilization.png", plot_utilization)):
            fn(results, out_dir / name)
            written.append(out_dir / name)
        plot_bars(summaries, out_dir / "policies.png")
        written.append(out_dir / "policies.png")
    log.info("wrote %s", ", ".join(str(p) for p in written))
    return written


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
