"""CLI of the daemon room: ``slurmplan tick``, ``daemon``, ``explain`` and ``history``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmplan.control.config import DEFAULT_CONFIG_PATH, DaemonConfig, load_config
from slurmplan.domain import Action, ValidationError

if TYPE_CHECKING:  # the daemon's modules are imported by the commands that run them, not by every `slurmplan`
    from slurmplan.control.journal import Journal
    from slurmplan.control.runner import Daemon
    from slurmplan.pipeline import TickReport

log = logging.getLogger(__name__)


def config_path(args: argparse.Namespace) -> str | None:
    """``--config``, else ``$SLURMPLAN_CONFIG`` (set by the site install, as ``hook`` reads it), else the default."""
    return getattr(args, "config", None) or os.environ.get("SLURMPLAN_CONFIG") or None


def _config(args: argparse.Namespace, *, warn: bool = False) -> DaemonConfig:
    path = config_path(args)
    cfg = load_config(path)
    if warn and path is None and not DEFAULT_CONFIG_PATH.exists() and getattr(args, "database", None) is None:
        _warn_host_wide(cfg)
    return cfg.with_overrides(
        dry_run=True if getattr(args, "dry_run", False) else None,
        shadow=True if getattr(args, "shadow", False) else None,
        database=getattr(args, "database", None),
    )


def _warn_host_wide(cfg: DaemonConfig) -> None:
    """No config anywhere: say loudly which journal is used, since every cluster on this host may share it."""
    print(
        f"slurmplan: WARNING: no config (--config, $SLURMPLAN_CONFIG, {DEFAULT_CONFIG_PATH}): using the host-wide"
        f" journal {cfg.database}, which every cluster on this host may share. For a dev cluster, export the"
        " SLURMPLAN_CONFIG that `slurmplan devcluster up` prints.",
        file=sys.stderr,
    )


def _add_common(p: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    p.add_argument("--config", help=f"the daemon's YAML file (default $SLURMPLAN_CONFIG, else {DEFAULT_CONFIG_PATH})")
    p.add_argument("--database", help="override the journal path from the config")
    if json_flag:
        p.add_argument("--json", action="store_true", help="machine-readable output")


def _action_text(a: Action) -> str:
    parts = [f"{a.kind.value:<12} job {a.job_id}"]
    if a.gpu_type or a.gpus_per_node:
        gres = f"gpu:{a.gpu_type}:{a.gpus_per_node}" if a.gpu_type else f"gpu:{a.gpus_per_node}"  # Slurm's spelling
        parts.append(f"{gres} x{a.node_count or 1} nodes={','.join(a.nodelist or ())}")
    if a.signal:
        parts.append(f"signal {a.signal}")
    if a.admin_comment:
        parts.append(f"comment {a.admin_comment!r}")
    if a.reason:
        parts.append(f"({a.reason})")
    return " ".join(parts)


def report_dict(r: TickReport) -> dict[str, Any]:
    return {
        "mode": r.mode,
        "tick_id": r.tick_id,
        "round": r.round_index,
        "new_round": r.new_round,
        "managed": r.managed,
        "unmanaged": r.unmanaged,
        "refused": {str(o.job.job_id): o.error for o in r.refused},
        "decisions": [
            {
                "job_id": a.job_id,
                "reason": a.reason.value,
                "cell": a.cell.short() if a.cell else None,
                "plan": a.plan.short() if a.plan else None,
                "nodes": list(a.nodes),
                "detail": a.detail,
            }
            for a in r.assignments
        ],  # fmt: skip
        "actions": [_action_text(a) for a in r.actions],
        "rolled_forward": r.rolled_forward.applied,
        "applied": r.applied.applied,
        "failed": r.applied.failed + r.rolled_forward.failed,
        "timing_s": {"observe": r.observe_s, "decide": r.decide_s, "act": r.act_s},
        "skipped": r.skipped or None,
    }


def format_report(r: TickReport) -> str:
    if r.skipped:
        return f"tick skipped: {r.skipped}"
    head = (
        f"[{r.mode}] round {r.round_index}{' (new)' if r.new_round else ''}: {r.managed} managed, "
        f"{r.unmanaged} unmanaged, {len(r.refused)} left alone; observe {r.observe_s:.2f}s "
        f"decide {r.decide_s:.2f}s act {r.act_s:.2f}s"
    )
    lines = [head]
    for a in r.assignments:
        where = f"{a.cell.short()} {a.plan.short() if a.plan else ''} on {','.join(a.nodes) or '-'}" if a.cell else ""
        lines.append(f"  job {a.job_id:>6}: {a.reason.value:<12} {where} {a.detail}".rstrip())
    for o in r.refused:
        lines.append(f"  job {o.job.job_id:>6}: left alone: {o.error}")
    for a in r.actions:
        lines.append(f"  -> {_action_text(a)}")
    if r.rolled_forward.applied or r.rolled_forward.stale:
        lines.append(f"  rolled forward {r.rolled_forward.applied} pending actions ({r.rolled_forward.stale} stale)")
    return "\n".join(lines)


def cmd_tick(args: argparse.Namespace) -> int:
    from slurmplan.control.runner import Daemon

    report = Daemon(_config(args, warn=True)).tick()
    print(json.dumps(report_dict(report), indent=2) if args.json else format_report(report))
    return 1 if report.skipped else 0


def tick_changed(report: TickReport) -> bool:
    """Whether a tick did or decided anything an admin watching the daemon's output should see."""
    return bool(report.new_round or report.actions or report.skipped or report.rolled_forward.applied or report.refused)


def daemon_output(report: TickReport, verbose: bool) -> str | None:
    """What the daemon prints after a tick: its decisions when something changed; for a tick that changed
    nothing, one line with -v and nothing otherwise (a line every 30 s buried the ticks that mattered)."""
    if tick_changed(report):
        return format_report(report)
    return format_report(report).splitlines()[0] if verbose else None


def cmd_daemon(args: argparse.Namespace) -> int:

    cfg = _config(args, warn=True)
    interval = args.interval if args.interval is not None else cfg.interval_s
    if interval <= 0:
        raise ValidationError("--interval", interval, "a positive number of seconds")
    stop = threading.Event()
    stopped_at: list[float] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopped_at.append(time.monotonic())
        stop.set()
        # os.write: safe in a signal handler (print or logging could deadlock on their locks)
        os.write(2, f"slurmplan daemon: {signal.Signals(signum).name}: stopping after the current tick\n".encode())

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    def show(report: TickReport) -> None:
        text = None if args.quiet else daemon_output(report, args.verbose > 0)
        if text is not None:
            print(text, flush=True)

    daemon, on_metrics = _with_metrics(cfg, args)
    ticks = daemon.run(interval, max_ticks=args.max_ticks, stop=stop, on_tick=lambda r: (on_metrics(r), show(r)))
    after = f", {time.monotonic() - stopped_at[0]:.1f} s after the signal" if stopped_at else ""
    print(f"slurmplan daemon: stopped after {ticks} ticks{after}", file=sys.stderr, flush=True)
    return 0


def _read_journal(args: argparse.Namespace) -> Journal:
    """The configured journal, opened read-only: a read never creates a database (a typo'd path is an error)."""
    from slurmplan.control.journal import Journal

    return Journal(_config(args).database, readonly=True)


def _with_metrics(cfg: DaemonConfig, args: argparse.Namespace) -> tuple[Daemon, Any]:
    """The daemon, instrumented when a metrics port or textfile is configured (issue 16)."""
    from slurmplan.control.config import config_from_mapping
    from slurmplan.control.metrics import DaemonMetrics, record_start
    from slurmplan.control.runner import Daemon

    if args.metrics_port is not None:
        config_from_mapping({"metrics_port": args.metrics_port}, "--metrics-port")  # refused with the field named
    cfg = cfg.with_overrides(metrics_port=args.metrics_port, metrics_textfile=args.metrics_textfile)
    if cfg.dry_run:
        return Daemon(cfg), lambda _r: None
    record_start(cfg.database)
    if cfg.metrics_port is None and cfg.metrics_textfile is None:
        return Daemon(cfg), lambda _r: None
    from slurmplan.policy.registry import load_policy
    from slurmplan.slurm.backend import SlurmBackend

    metrics = DaemonMetrics()
    daemon = Daemon(
        cfg, backend=metrics.wrap_backend(SlurmBackend()), policy=metrics.wrap_policy(load_policy(cfg.policy))
    )
    if cfg.metrics_port is not None:
        metrics.serve(cfg.metrics_port)

    def update(report: TickReport) -> None:
        metrics.observe_tick(report, cfg)
        if cfg.metrics_textfile is not None:
            metrics.write_textfile(cfg.metrics_textfile)

    return daemon, update


def cmd_explain(args: argparse.Namespace) -> int:
    from slurmplan.control.explain import LiveView, explain_job, format_explanation
    from slurmplan.slurm.jobctl import job_state

    cfg = _config(args)
    live = LiveView(job_state(str(args.job_id), timeout_s=5.0) or None, cfg.round_s)
    with _read_journal(args) as j:
        e = explain_job(j, args.job_id, live)
    print(json.dumps(e, indent=2, default=str) if args.json else f"journal {j.path}:\n{format_explanation(e)}")
    return 0


def history_heading(j: Journal, job_id: int | None, rows: list[dict[str, Any]], limit: int | None) -> str:
    """Which journal was read and what it held: rows shown, no rows for this job, or nothing at all."""
    if rows:
        scope = f" for job {job_id}" if job_id is not None else ""
        latest = f", the latest {limit}" if limit and len(rows) == limit else ""
        return f"journal {j.path}: {len(rows)} rows{scope}{latest}"
    if job_id is not None and not j.is_empty():
        return f"journal {j.path}: no rows for job {job_id} (other jobs have rows: `slurmplan history`)"
    return f"journal {j.path}: nothing journaled yet"


def cmd_history(args: argparse.Namespace) -> int:
    from slurmplan.control.explain import check_limit, format_history, history

    limit = check_limit(args.limit)  # before opening anything
    with _read_journal(args) as j:
        rows = history(j, args.job, limit)
        heading = history_heading(j, args.job, rows, limit)
    if args.json:
        print(heading, file=sys.stderr)  # stdout stays JSON
        print(json.dumps(rows, indent=2))
    else:
        print(heading)
        if rows:
            print(format_history(rows))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "tick",
        help="run one scheduling tick: observe Slurm, decide, act (for cron)",
        description="Run one tick: read the managed jobs and nodes from Slurm, run the policy when a round is "
        "due, journal the decisions, then hold, update, release, signal or requeue jobs to match them. Reads "
        "--config, else $SLURMPLAN_CONFIG, else the default path.",
    )
    _add_common(p)
    p.add_argument("--dry-run", action="store_true", help="print the actions and change nothing")
    p.add_argument("--shadow", action="store_true", help="decide and journal, but never act on Slurm")
    p.set_defaults(func=cmd_tick)

    p = subparsers.add_parser(
        "daemon",
        help="tick every --interval seconds until stopped (for systemd)",
        description="Tick every --interval seconds until SIGTERM or SIGINT. Prints a tick's decisions and actions "
        "only when something changed (a new round, an action, a refused job, a skipped tick); -v also prints "
        "one line for each quiet tick.",
    )
    _add_common(p, json_flag=False)
    p.add_argument("--interval", type=float, help="seconds between ticks (default: interval_s of the config)")
    p.add_argument("--shadow", action="store_true", help="decide and journal, but never act on Slurm")
    p.add_argument("--max-ticks", type=int, help="stop after this many ticks")
    p.add_argument("--quiet", action="store_true", help="no per-tick line on stdout")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT")
    p.add_argument("--metrics-textfile", type=Path, help="write Prometheus metrics to this node_exporter textfile")
    p.set_defaults(func=cmd_daemon)

    p = subparsers.add_parser(
        "explain",
        help="why a job has its configuration (candidates, share, priority, rule)",
        description="Explain the latest decision journaled for one job: its hints, candidate configurations, "
        "its share of each in the policy's allocation, its priority, and the rule that placed, kept, moved, "
        "held or preempted it.",
    )
    _add_common(p)
    p.add_argument("job_id", type=int, metavar="JOBID")
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser(
        "history",
        help="decisions, actions and job events, oldest first",
        description="Print the journal: each tick's decisions, the actions sent to Slurm and the job events "
        "(prolog, epilog, launcher reports), oldest first.",
    )
    _add_common(p)
    p.add_argument("--job", type=int, metavar="JOBID", help="only this job")
    p.add_argument(
        "--limit", type=int, default=100, help="the latest this many rows, all kinds merged (default 100; 0: all)"
    )
    p.set_defaults(func=cmd_history)
