"""``slurmplan simulate``, ``slurmplan compare`` and ``slurmplan trace generate|check``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from slurmplan.domain import ValidationError
from slurmplan.rules import KNOWN as KNOWN_RULES
from slurmplan.rules import NEWEST as NEWEST_RULES
from slurmplan.sim.cluster import CRIUS_CLUSTER, DEV_CLUSTER, GAVEL_CLUSTER
from slurmplan.tick_types import DAEMON_INTERVAL_S, TickConfig

# The simulator's modules are imported by the commands that run it: every `slurmplan` start paid for them.

GAVEL_DEFAULT_RATE = {"gavel-single": 5.6, "gavel-multiple": 2.6}
"""Jobs per hour where policies differ on Gavel's cluster (the rates of Gavel's own comparison). The old default,
1.5 jobs/h for both, left the 108 GPUs mostly idle, so every policy ran every job at once and they all tied."""


SLURM_VERSIONS = tuple(r.label for r in KNOWN_RULES)
NEWEST_SLURM = NEWEST_RULES.label


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="JSON-lines trace (ours or a Gavel dump)")
    p.add_argument("--cluster", default=GAVEL_CLUSTER, help="TYPE:NODES[xGPUS],... (default %(default)s)")
    p.add_argument(
        "--round",
        type=float,
        default=None,
        help=f"round length in seconds (default: {TickConfig.round_s:g}, the daemon's round_s)",
    )
    p.add_argument("--throughputs", default=None, help="Gavel-format throughput table (default: shipped copy)")
    from slurmplan.tick_types import DEV_RESTART_COST_S, DEV_START_LATENCY_S

    p.add_argument(
        "--reconfig-cost", type=float, default=DEV_RESTART_COST_S, help="seconds per reconfiguration (default 78)"
    )
    p.add_argument(
        "--zero-cost",
        action="store_true",
        help="no reconfiguration cost, requeue delay, start latency or least run before the checkpoint signal "
        "(Gavel's simulator's model)",
    )
    p.add_argument(
        "--requeue-delay",
        type=float,
        default=TickConfig.requeue_delay_s,
        metavar="SECONDS",
        help="Slurm's wait before a requeued job may start again on a node it just left: cred_expire + 1 seconds "
        "(121 with Slurm's default cred_expire of 120); a move to another GPU type does not wait (the daemon resets "
        "the begin time). Default 121, Slurm's default; 0: only --reconfig-cost charges a move",
    )
    p.add_argument(
        "--start-latency",
        type=float,
        default=DEV_START_LATENCY_S,
        metavar="SECONDS",
        help="seconds from Slurm starting a job to it training, paid at every start (release, PrologSlurmctld, "
        "slurmd's launch; 3.5 measured on the local dev cluster, the default). 0: starts are instant, as in Gavel",
    )
    p.add_argument(
        "--slurm-version",
        default=NEWEST_SLURM,
        help="whose rules for changing a job the simulated Slurm enforces (%(choices)s; default %(default)s)",
        choices=SLURM_VERSIONS,
    )
    p.add_argument(
        "--tick", type=float, default=DAEMON_INTERVAL_S, help="daemon tick interval in seconds (0: every event)"
    )
    p.add_argument("--no-arrival-ticks", action="store_true", help="see arrivals at the next round or completion")
    p.add_argument("--round-ticks-only", action="store_true", help="tick only at round boundaries (Gavel's rule)")
    p.add_argument("--run-all", action="store_true", help="run every job, even past a measured window's end")
    p.add_argument("--max-jobs", type=int, default=None, help="use only the first N jobs of the trace")
    p.add_argument("--max-hours", type=float, default=None, help="stop at this simulated time")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", default=None, help="folder for summary.json/csv and per-job CSVs")
    p.add_argument("--plots", default=None, help="folder for the JCT CDF, utilization and per-policy plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--drop-infeasible",
        action="store_true",
        help="run the jobs that can run on --cluster and name and count the others in the summary (a site's "
        "history always has a few jobs no GPU type of the cluster can run); without it such a trace is refused",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="replay a trace through the real tick on a simulated cluster",
        description="Replay a trace (JSON lines: ours, or a Gavel dump) through the same tick the daemon runs, on a "
        "simulated cluster, and print JCT, makespan, utilisation, fairness and restarts. Every argument, the "
        "policy and whether each job can run on the cluster are checked before the simulation starts.",
    )
    sim.add_argument("--policy", required=True, help="policy name or YAML file")
    _run_options(sim)
    sim.set_defaults(func=cmd_simulate)

    cmp = subparsers.add_parser(
        "compare",
        help="run several policies on one trace and print one table",
        description="Simulate one trace under several policies (in parallel processes) and print one table with "
        "each metric and its ratio to the first policy. Options as for simulate.",
    )
    cmp.add_argument("--policies", required=True, help="comma-separated policy names or files; ratios to the first")
    cmp.add_argument("--workers", type=int, default=None, help="parallel processes (default: one per core)")
    cmp.add_argument(
        "--executor",
        default="local",
        help="where the simulations run: local (worker processes) or slurm (one Slurm job each, via submitit; "
        "same results). Default local",
    )
    cmp.add_argument("--partition", default=None, help="with --executor slurm: the partition to submit to")
    cmp.add_argument(
        "--time-limit",
        type=int,
        default=60,
        metavar="MINUTES",
        help="with --executor slurm: each simulation job's time limit (default %(default)s)",
    )
    cmp.add_argument(
        "--sweep-dir",
        default=".slurmplan-sweep",
        help="with --executor slurm: folder for job scripts, logs and results, on a file system the nodes share "
        "(default %(default)s)",
    )
    _run_options(cmp)
    cmp.set_defaults(func=cmd_compare)

    trace = subparsers.add_parser(
        "trace",
        help="generate or check traces",
        description="Generate synthetic traces (Gavel's generator, bit-exact, or an LLM-heavy mix) or validate one.",
    )
    tsub = trace.add_subparsers(dest="trace_command", metavar="ACTION")
    gen = tsub.add_parser(
        "generate",
        help="write a synthetic trace as JSON lines",
        description="Write a synthetic trace. gavel-single/gavel-multiple follow Gavel's random stream; llm draws "
        "catalog models, accounts, job classes and deadlines. The summary line says the offered load.",
    )
    gen.add_argument("kind", choices=("gavel-single", "gavel-multiple", "llm", "replay-like"), help="which generator")
    gen.add_argument("--jobs", type=int, default=1000, help="number of jobs")
    gen.add_argument(
        "--rate",
        type=float,
        default=None,
        help="arrivals per hour (default 5.6 gavel-single, 2.6 gavel-multiple, 40 llm; the summary says the load)",
    )
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--window", default=None, help="A:B marks jobs A..B-1 as measured (Gavel traces)")
    gen.add_argument("--models", default=None, help="comma-separated catalog models (llm; default 0.1B-30B)")
    gen.add_argument("--gpu-types", default="a100,a40,a10,v100", help="requested types to draw from (llm)")
    gen.add_argument("--throughputs", default=None, help="Gavel-format throughput table")
    gen.add_argument(
        "--cluster",
        default=None,
        help="the cluster the trace is for: its feasibility shapes llm requests, and --load and the summary count "
        f"its GPUs (default {CRIUS_CLUSTER} for llm, {DEV_CLUSTER} for replay-like, {GAVEL_CLUSTER} for Gavel's)",
    )
    gen.add_argument(
        "--load",
        type=float,
        default=None,
        help="scale every duration by one factor so the jobs ask for this share of --cluster's GPU-hours over "
        "their arrivals, as the summary line counts it (llm, replay-like; e.g. 0.8 for a site's month: a history "
        "holds no more work than its cluster ran). Deadlines keep their slack relative to the duration",
    )
    gen.add_argument("--out", required=True, help="output file")
    gen.set_defaults(func=cmd_trace_generate)
    check = tsub.add_parser(
        "check",
        help="validate a trace; errors name the line and field",
        description="Read a trace, report bad lines as FILE:LINE with the field, and print its job counts.",
    )
    check.add_argument("file")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_trace_check)


def _preflight(args: argparse.Namespace, policies: list[str]) -> list[str]:
    """Check every argument before any simulation or worker process starts.

    A bad policy name used to surface as a ``BrokenProcessPool`` traceback from a worker, a missing matplotlib
    after the CSVs were written, and a cluster no job fits ran to the end and exited 0 having finished nothing.
    Returns the jobs ``--drop-infeasible`` leaves out, described as ``ID (TYPE xGPUS)``.
    """
    from slurmplan.perf.gavel_table import load_gavel_table
    from slurmplan.policy.registry import load_config
    from slurmplan.sim.cluster import parse_cluster
    from slurmplan.sim.runner import RunSpec, load_jobs
    from slurmplan.sim.workload import build_workloads, describe, infeasible

    where = args.command
    for name, value, ok, allowed in (
        ("--round", args.round, args.round is None or args.round > 0, "a number of seconds > 0"),
        ("--reconfig-cost", args.reconfig_cost, args.reconfig_cost >= 0, "a number of seconds >= 0"),
        ("--requeue-delay", args.requeue_delay, args.requeue_delay >= 0, "a number of seconds >= 0 (e.g. 121)"),
        ("--start-latency", args.start_latency, args.start_latency >= 0, "a number of seconds >= 0 (e.g. 3.5)"),
        ("--tick", args.tick, args.tick >= 0, "a number of seconds >= 0 (0: every event)"),
        ("--max-jobs", args.max_jobs, args.max_jobs is None or args.max_jobs > 0, "a number of jobs > 0"),
        ("--max-hours", args.max_hours, args.max_hours is None or args.max_hours > 0, "a number of hours > 0"),
        ("--workers", getattr(args, "workers", None), (getattr(args, "workers", None) or 1) > 0, "a count > 0"),
        ("--time-limit", getattr(args, "time_limit", 1), getattr(args, "time_limit", 1) > 0, "minutes > 0"),
    ):
        if not ok:
            raise ValidationError(name, value, allowed, where)
    for option, folder in (("--out", args.out), ("--plots", args.plots)):
        if folder and Path(folder).exists() and not Path(folder).is_dir():
            raise ValidationError(option, folder, "a folder (this path is a file)", where)
    for policy in policies:
        load_config(policy)
    if args.plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValidationError(
                "--plots", args.plots, "matplotlib, which is not installed: pip install 'slurmplan[plots]'", where
            ) from None
    cluster = parse_cluster(args.cluster)
    jobs = load_jobs(RunSpec(args.trace, args.cluster, policies[0], max_jobs=args.max_jobs))
    if not jobs:
        raise ValidationError("--trace", args.trace, "a trace with at least one job", where)
    table = load_gavel_table(args.throughputs) if any(j.is_table_job for j in jobs) else None
    workloads = build_workloads(jobs, cluster, table)
    stuck = infeasible(workloads.values())
    if stuck and (args.drop_infeasible and len(stuck) < len(jobs)):
        return [describe(w) for w in stuck]
    if stuck:
        names = ", ".join(describe(w) for w in stuck[:8])
        more = f" and {len(stuck) - 8} more" if len(stuck) > 8 else ""
        hint = "" if len(stuck) == len(jobs) else "; or pass --drop-infeasible to run the others"
        raise ValidationError(
            "--cluster",
            args.cluster,
            f"a cluster where every job can run; {len(stuck)} of {len(jobs)} jobs have no throughput on any of its "
            f"GPU types ({', '.join(sorted(cluster.gpus_by_type()))}): jobs {names}{more}{hint}",
            where,
        )
    return []


def _spec(args: argparse.Namespace, policy: str, dropped: list[str] = ()):  # -> RunSpec
    from slurmplan.sim.engine import SimOptions
    from slurmplan.sim.runner import RunSpec, load_jobs

    jobs = load_jobs(RunSpec(args.trace, args.cluster, policy, max_jobs=args.max_jobs))
    gone = {int(d.split(" ", 1)[0]) for d in dropped}
    jobs = tuple(j for j in jobs if j.job_id not in gone)
    windowed = any(not j.in_window for j in jobs) and not args.run_all
    options = SimOptions(
        reconfig_cost_s=0.0 if args.zero_cost else args.reconfig_cost,
        requeue_delay_s=0.0 if args.zero_cost else args.requeue_delay,
        start_latency_s=0.0 if args.zero_cost else args.start_latency,
        signal_min_run_s=0.0 if args.zero_cost else TickConfig.signal_min_run_s,
        slurm_version=args.slurm_version,
        round_s=args.round,
        event_ticks=not args.round_ticks_only,
        tick_s=args.tick,
        arrival_ticks=not args.no_arrival_ticks,
        stop_when_window_done=windowed,
        max_time_s=args.max_hours * 3600 if args.max_hours else float("inf"),
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    return RunSpec(jobs, args.cluster, policy, options, args.throughputs)


def _emit(args: argparse.Namespace, results, summaries, dropped: list[str] = ()) -> None:
    from slurmplan.sim.report import format_dropped, format_table, to_json, write_outputs

    for s in summaries:
        s["dropped_infeasible"] = len(dropped)
        s["dropped_jobs"] = [int(d.split(" ", 1)[0]) for d in dropped]

    for s in summaries:
        if not s["arrivals_cover_window"]:
            print(
                f"warning: {s['policy']}: the trace's arrivals ended before its measured window finished, so the "
                "window's last jobs ran on a draining cluster and their JCTs are lower than under steady load "
                "(Gavel keeps adding jobs); generate more jobs after the window",
                file=sys.stderr,
            )
    if args.json:
        print(to_json(summaries))
    else:
        print(format_table(summaries))
        if dropped:
            print(format_dropped(dropped, args.cluster))
    if args.out:
        write_outputs(results, summaries, Path(args.out), plots=False)
    if args.plots:
        write_outputs(results, summaries, Path(args.plots), plots=True)


def cmd_simulate(args: argparse.Namespace) -> int:
    from slurmplan.sim.metrics import summarize
    from slurmplan.sim.runner import simulate

    dropped = _preflight(args, [args.policy])
    result = simulate(_spec(args, args.policy, dropped))
    _emit(args, [result], [summarize(result)], dropped)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from slurmplan.sim.metrics import summarize

    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not names:
        raise ValidationError("policies", args.policies, "a comma-separated list of policy names", "compare")
    from dataclasses import replace

    from slurmplan.sim.executors import ExecutorOptions, get_executor

    run = get_executor(args.executor)
    dropped = _preflight(args, names)
    options = ExecutorOptions(
        workers=args.workers,
        partition=args.partition,
        folder=args.sweep_dir,
        timeout_min=args.time_limit,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    specs = [_spec(args, name, dropped) for name in names]
    if args.executor != "local":  # a bar per simulation would only fill the jobs' logs
        specs = [replace(s, options=replace(s.options, progress=False)) for s in specs]
    results = run(specs, options)
    _emit(args, results, [summarize(r) for r in results], dropped)
    return 0


def cmd_trace_generate(args: argparse.Namespace) -> int:
    from slurmplan.perf.gavel_table import load_gavel_table
    from slurmplan.sim.cluster import parse_cluster
    from slurmplan.sim.generate import LLM_MODELS, LlmTraceConfig, at_load, gavel_trace, llm_trace, perf_feasible
    from slurmplan.sim.trace import write_trace

    cluster = args.cluster or {"llm": CRIUS_CLUSTER, "replay-like": DEV_CLUSTER}.get(args.kind, GAVEL_CLUSTER)
    gpus = parse_cluster(cluster).total_gpus  # a bad --cluster is refused before anything is written
    if args.load is not None and args.kind not in ("llm", "replay-like"):
        raise ValidationError(
            "--load", args.load, "llm or replay-like traces (Gavel's jobs are given in steps)", "trace"
        )
    if args.load is not None and not 0 < args.load < float("inf"):
        raise ValidationError("--load", args.load, "a share of the cluster's GPU-hours > 0, e.g. 0.8", "trace")

    if args.kind == "replay-like":
        from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace

        jobs = replay_like_trace(ReplayTraceConfig(num_jobs=args.jobs, rate_per_h=args.rate or 20.0, seed=args.seed))
    elif args.kind == "llm":
        config = LlmTraceConfig(
            num_jobs=args.jobs,
            rate_per_h=args.rate or 40.0,
            models=tuple(m.strip() for m in args.models.split(",")) if args.models else LLM_MODELS,
            gpu_types=tuple(t.strip().lower() for t in args.gpu_types.split(",")),
            seed=args.seed,
        )
        jobs = llm_trace(config, perf_feasible(cluster))
    else:
        window = None
        if args.window:
            try:
                a, b = (int(x) for x in args.window.split(":"))
            except ValueError:
                raise ValidationError("window", args.window, "A:B with integers A < B", "trace generate") from None
            window = (a, b)
        jobs = gavel_trace(
            load_gavel_table(args.throughputs),
            args.jobs,
            args.rate or GAVEL_DEFAULT_RATE[args.kind],
            multi_gpu=args.kind == "gavel-multiple",
            seed=args.seed,
            window=window,
        )
    if args.load is not None:
        jobs = at_load(jobs, gpus, _arrival_span_s(jobs), args.load)
    count = write_trace(jobs, args.out)
    print(f"wrote {count} jobs to {args.out}; {offered_load(jobs, cluster)}")
    return 0


def _arrival_span_s(jobs) -> float:
    """The span ``offered_load`` divides by, in seconds: (last - first arrival) x n / (n - 1), so that ``--load L``
    reads back as L in the summary line; one job's span is an hour."""
    if len(jobs) < 2 or jobs[-1].arrival_s <= jobs[0].arrival_s:
        return 3600.0
    return (jobs[-1].arrival_s - jobs[0].arrival_s) * len(jobs) / (len(jobs) - 1)


def offered_load(jobs, cluster: str = GAVEL_CLUSTER) -> str:
    """The trace's load in words: arrivals per hour and GPU-hours asked per hour against ``cluster``'s GPUs.

    Durations are on the job's own type for model jobs and on V100s for Gavel jobs (the trace's definition), so
    1.0 means the cluster would be exactly busy if every GPU ran at that speed; slower GPUs make it busier.
    """
    from slurmplan.sim.cluster import parse_cluster

    timed = [j for j in jobs if j.duration_s]
    span_h = (jobs[-1].arrival_s - jobs[0].arrival_s) / 3600 if len(jobs) > 1 else 0.0
    if not timed or span_h <= 0:
        return "load unknown (one job, or no durations)"
    rate = (len(jobs) - 1) / span_h
    gpu_h_per_h = rate * sum(j.duration_s * j.gpus for j in timed) / len(timed) / 3600
    gpus = parse_cluster(cluster).total_gpus
    return (
        f"{rate:.2f} arrivals/h asking {gpu_h_per_h:.0f} GPU-hours per hour, offered load {gpu_h_per_h / gpus:.2f} "
        f"of the {gpus} GPUs of {cluster}"
    )


def cmd_trace_check(args: argparse.Namespace) -> int:
    from slurmplan.sim.trace import read_trace

    jobs = read_trace(args.file)
    info = {
        "jobs": len(jobs),
        "table_jobs": sum(j.is_table_job for j in jobs),
        "hint_jobs": sum(j.model is not None for j in jobs),
        "measured_jobs": sum(j.is_measured_job for j in jobs),
        "window_jobs": sum(j.in_window for j in jobs),
        "last_arrival_h": round(jobs[-1].arrival_s / 3600, 2) if jobs else 0.0,
    }
    print(json.dumps(info) if args.json else "\n".join(f"{k}: {v}" for k, v in info.items()))
    return 0
