"""``slurmplan trace import --sacct``: a site's job history from slurmdbd, as a trace the simulator runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from slurmplan.domain import ValidationError

_TIME = re.compile(
    r"^(today|midnight|noon|teatime|now([+-]\d+(days|hours|minutes|seconds|weeks)?)?"
    r"|\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?)$"
)
WHERE = "trace import"


def _slurm_executor():
    from slurmplan.slurm.sweep import run_on_slurm

    return run_on_slurm


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``import`` to the ``trace`` command (``sim/commands.py`` registers ``trace`` first), and the Slurm
    executor of ``compare --executor slurm`` (here, so that the simulator's room never imports Slurm code)."""
    from slurmplan.sim.executors import register_executor

    register_executor("slurm", _slurm_executor)
    trace = subparsers.choices["trace"]
    actions = [a for a in trace._actions if isinstance(a, argparse._SubParsersAction)]
    imp = actions[0].add_parser(
        "import",
        help="write a trace from the site's job history (sacct)",
        description="Read the site's job history from Slurm accounting (sacct --json, or --parsable2) and write "
        "a trace: arrival at the eligible time, duration on the GPU type and count each job was allocated, "
        "account, user, hints from the admin comment. Jobs without a model get their speed on other GPU types "
        "from a per-type table (printed; --speeds overrides it). CPU-only jobs, jobs that never started and "
        "jobs still running are counted and listed; malformed records are skipped and listed with the field. "
        "The trace is written whole or not at all.",
    )
    imp.add_argument("--sacct", action="store_true", required=True, help="read from Slurm accounting (sacct)")
    imp.add_argument(
        "--from", dest="source", default=None, metavar="FILE", help="saved sacct output (JSON or --parsable2) to read"
    )
    imp.add_argument("--start", default="now-30days", help="sacct --starttime (default %(default)s)")
    imp.add_argument("--end", default="now", help="sacct --endtime (default %(default)s)")
    imp.add_argument("--partition", action="append", default=[], help="only this partition (repeatable)")
    imp.add_argument("--accounts", default="", help="only these accounts (comma-separated)")
    imp.add_argument("--parsable2", action="store_true", help="ask sacct for --parsable2 instead of --json")
    imp.add_argument(
        "--speeds", default=None, metavar="FILE", help="per-GPU-type speeds (YAML/JSON {type: speed vs V100})"
    )
    imp.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="K",
        help="multiply every time by K: read back a `slurmplan replay --speedup K` in its trace's seconds",
    )
    imp.add_argument("--out", required=True, help="trace file to write (JSON lines)")
    imp.add_argument("--json", action="store_true", help="print the import report as JSON")
    imp.set_defaults(func=cmd_trace_import)


def _check(args: argparse.Namespace) -> None:
    for name, value in (("--start", args.start), ("--end", args.end)):
        if not _TIME.match(value):
            raise ValidationError(
                name, value, "a sacct time: YYYY-MM-DD[THH:MM[:SS]], today, midnight or now[-Ndays]", WHERE
            )
    if not args.time_scale > 0:
        raise ValidationError("--time-scale", args.time_scale, "a number > 0", WHERE)
    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise ValidationError("--out", args.out, "a file path in an existing folder", WHERE)
    if args.source and not Path(args.source).is_file():
        raise ValidationError("--from", args.source, "a readable file of sacct output", WHERE)


def _sacct_text(args: argparse.Namespace) -> str:
    if args.source:
        return Path(args.source).read_bytes().decode("utf-8", errors="replace")
    from slurmplan.slurm.sacct import HistoryQuery, read_history

    accounts = tuple(a.strip() for a in args.accounts.split(",") if a.strip())
    query = HistoryQuery(args.start, args.end, tuple(args.partition), accounts, args.parsable2)
    return read_history(query)


def write_atomic(jobs, path: Path) -> int:
    """The whole trace or nothing: written to a temporary file beside ``path``, then renamed over it."""
    from slurmplan.sim.trace import write_trace

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        count = write_trace(jobs, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return count


def cmd_trace_import(args: argparse.Namespace) -> int:
    from slurmplan.history.convert import ImportReport, to_trace
    from slurmplan.history.sacct import parse_sacct
    from slurmplan.history.speeds import load_speeds

    _check(args)
    speeds = load_speeds(args.speeds)
    parsed = parse_sacct(_sacct_text(args))
    report = ImportReport(skipped=list(parsed.skipped))
    jobs = to_trace(parsed.jobs, speeds, report, args.time_scale)
    info = report.to_dict()
    info["speeds"] = [{"gpu_type": t, "speed": v, "source": s} for t, v, s in speeds.rows()]
    if not jobs:
        what = "no records" if not report.records else "no GPU job that ran and finished"
        span = f"from {args.source}" if args.source else f"between {args.start} and {args.end}"
        print(f"{what} {span}: nothing written to {args.out}", file=sys.stderr)
        print("\n".join(report.lines()), file=sys.stderr)
        return 1
    count = write_atomic(jobs, Path(args.out))
    info["out"] = args.out
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"wrote {count} jobs to {args.out}")
    print("\n".join(report.lines()))
    if report.measured_jobs:
        print("speeds used for jobs without a model (relative to v100; --speeds FILE overrides):")
        for t, v, s in speeds.rows():
            print(f"  {t:10s} {v:6.3f}  {s}")
    return 0
