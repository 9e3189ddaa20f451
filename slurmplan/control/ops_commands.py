"""CLI for operating slurmplan: ``slurmplan watchdog`` (fail-open pass) and ``slurmplan health`` (Nagios check)."""

from __future__ import annotations

import argparse
import json

from slurmplan.control.config import DEFAULT_CONFIG_PATH, load_config


def cmd_watchdog(args: argparse.Namespace) -> int:
    from slurmplan.control.watchdog import watchdog_pass
    from slurmplan.slurm.backend import SlurmBackend

    report = watchdog_pass(load_config(args.config), SlurmBackend())
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        age = "missing" if report.heartbeat_age_s is None else f"{report.heartbeat_age_s:.0f}s old"
        state = "FAIL-OPEN (daemon down)" if report.fail_open else "daemon ticking"
        print(f"watchdog: heartbeat {age} (limit {report.limit_s:.0f}s): {state}")
        if report.released:
            print(f"  released {len(report.released)} held managed jobs: {' '.join(map(str, report.released))}")
        if report.restored:
            print(f"  with their last decided configuration: {' '.join(map(str, report.restored))}")
        for job_id, why in report.failed.items():
            print(f"  job {job_id}: release failed: {why}")
        if report.cleared:
            print("  fail-open state cleared: the daemon manages the jobs again")
    return 1 if report.failed else 0


def cmd_health(args: argparse.Namespace) -> int:
    from slurmplan.control.health import check_health, format_health

    backend = None
    if not args.no_slurm:
        from slurmplan.slurm.backend import SlurmBackend

        backend = SlurmBackend(timeout=20)
    h = check_health(load_config(args.config), backend)
    print(json.dumps(h.to_dict(), indent=2, default=str) if args.json else format_health(h))
    return h.status


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "watchdog",
        help="one fail-open pass (systemd timer / cron): if the daemon's heartbeat is stale, release held managed "
        "jobs to plain Slurm",
    )
    p.add_argument("--config", help=f"the daemon's YAML file (default {DEFAULT_CONFIG_PATH})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_watchdog)

    p = subparsers.add_parser(
        "health", help="is the daemon alive and keeping up? exit 0 ok, 1 warning, 2 critical (Nagios style)"
    )
    p.add_argument("--config", help=f"the daemon's YAML file (default {DEFAULT_CONFIG_PATH})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-slurm", action="store_true", help="do not ask Slurm (held jobs are then unknown)")
    p.set_defaults(func=cmd_health)
