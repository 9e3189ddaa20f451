"""CLI: ``slurmplan site install`` (put the Slurm-side files in place) and ``slurmplan hook`` (prolog/epilog)."""

from __future__ import annotations

import argparse
import enum
import json
import logging
import os
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path

from slurmplan.control.hook import EVENTS, run_hook
from slurmplan.domain import Hints, ValidationError
from slurmplan.formats import format_hints, parse_hints
from slurmplan.slurm.site import DEFAULT_CONFIG, DEFAULT_PLUGIN_DIR, SiteLayout, install_site, plan_env_for_job

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    site = subparsers.add_parser("site", help="install slurmplan's Slurm-side files on a controller")
    site_sub = site.add_subparsers(dest="site_command", metavar="SUBCOMMAND")
    inst = site_sub.add_parser(
        "install",
        help="put job_submit.lua, the SPANK plugin, prolog/epilog, slurm.conf/plugstack.conf lines, cron and "
        "systemd units in place (idempotent; backs up what it replaces)",
    )
    inst.add_argument("--prefix", type=Path, default=Path("/"), help="install below this root (default /)")
    inst.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")
    inst.add_argument("--slurm-conf-dir", type=Path, default=Path("/etc/slurm"), help="where slurm.conf lives")
    inst.add_argument("--plugin-dir", type=Path, default=DEFAULT_PLUGIN_DIR, help="Slurm's plugin directory")
    inst.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="slurmplan config the units and hooks use")
    inst.add_argument("--no-build", action="store_true", help="do not run `make -C spank` first")
    inst.add_argument("--json", action="store_true", help="print the results as JSON")
    inst.add_argument("--service-user", default="slurmplan", help="user the systemd units run as (default slurmplan)")
    inst.add_argument(
        "--admin-level",
        choices=("Administrator", "Operator"),
        default="Administrator",
        help="Slurm AdminLevel given to the service user with sacctmgr (needs slurmdbd). Operator may hold, update, "
        "release, signal and requeue jobs but not write AdminComment, where the daemon records its decisions "
        "(default Administrator)",
    )
    inst.add_argument("--no-service", action="store_true", help="do not create the user nor enable the units")
    inst.add_argument("--slurm-user", help="slurmctld's SlurmUser, who runs the hooks (default: from scontrol)")
    inst.set_defaults(func=_install)

    uninst = site_sub.add_parser(
        "uninstall", help="disable the units and remove what `site install` wrote (edited files are kept)"
    )
    uninst.add_argument("--prefix", type=Path, default=Path("/"), help="uninstall below this root (default /)")
    uninst.add_argument("--slurm-conf-dir", type=Path, default=Path("/etc/slurm"), help="where slurm.conf lives")
    uninst.add_argument("--plugin-dir", type=Path, default=DEFAULT_PLUGIN_DIR, help="Slurm's plugin directory")
    uninst.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="slurmplan config install used")
    uninst.add_argument("--service-user", default="slurmplan", help="the units' user install used")
    uninst.add_argument("--dry-run", action="store_true", help="show what would be removed, remove nothing")
    uninst.add_argument("--json", action="store_true", help="print the results as JSON")
    uninst.set_defaults(func=_uninstall)
    site.set_defaults(func=lambda _args: site.print_help() or 2)

    sc = site_sub.add_parser(
        "check",
        help="read the controller's configuration and report what would make slurmplan work badly, each with its "
        "fix (exit 1 on problems)",
    )
    sc.add_argument("--config", type=Path, default=None, help=f"slurmplan config (default {DEFAULT_CONFIG})")
    sc.add_argument("--daemon-user", help="the user the daemon runs as (default: the current user)")
    sc.add_argument("--json", action="store_true", help="print the findings as JSON")
    sc.add_argument(
        "--layout", action="store_true", help="also check owners and modes of /var/lib/slurmplan and /var/log/slurmplan"
    )
    sc.set_defaults(func=_site_check)

    check = site_sub.add_parser(
        "hints",
        help="check plan hints with the grammar job_submit.lua uses; print the canonical form (exit 1 if invalid)",
    )
    check.add_argument("text", help='hints such as "slurmplan:model=bert-large;min=2;max=8;types=a100,v100" (quote it)')
    check.add_argument(
        "--json",
        action="store_true",
        help="print the parsed fields as JSON, plus gpu_range ([min, max] GPUs the daemon may give; null: the"
        " job's own --gres count) and elastic (false: the job keeps its count)",
    )
    check.set_defaults(func=_check_hints)

    env = site_sub.add_parser(
        "plan-env",
        help="print the job's assigned plan as SLURMPLAN_* variables (for job scripts on clusters without the "
        'SPANK plugin): eval "$(slurmplan site plan-env --shell)"',
    )
    env.add_argument("--job-id", type=int, default=None, help="the job (default $SLURM_JOB_ID)")
    env.add_argument("--shell", action="store_true", help="print `export NAME=value` lines")
    env.add_argument("--json", action="store_true", help="print a JSON object")
    env.set_defaults(func=_plan_env)

    hook = subparsers.add_parser(
        "hook",
        help="journal a job's start or end (run by PrologSlurmctld/EpilogSlurmctld; always exits 0)",
        description="Reads SLURM_JOB_ID and the exit codes from the environment Slurm gives its "
        "controller prolog/epilog and records the event in the daemon's journal. Never fails.",
    )
    hook.add_argument("event", choices=EVENTS, help="job-start (PrologSlurmctld) or job-end (EpilogSlurmctld)")
    hook.add_argument("--config", type=Path, default=None, help="slurmplan config (default $SLURMPLAN_CONFIG)")
    hook.add_argument("--database", type=Path, default=None, help="journal path (default: the config's database)")
    hook.set_defaults(func=_hook)


def _layout(args: argparse.Namespace) -> SiteLayout:
    from slurmplan.control.config import load_config

    layout = SiteLayout(
        prefix=args.prefix,
        slurm_conf_dir=args.slurm_conf_dir,
        plugin_dir=args.plugin_dir,
        config=args.config,
        service_user=args.service_user,
    )
    config_file = layout.at(args.config)
    if config_file.is_file():  # job_submit.lua holds the jobs of the partitions the daemon manages
        cfg = load_config(config_file)
        layout = replace(
            layout,
            managed_partitions=cfg.managed_partitions,
            heartbeat_file=cfg.heartbeat_path,
            trust=cfg.trust.rules(),
        )
    return layout


def _uninstall(args: argparse.Namespace) -> int:
    from slurmplan.slurm.site_service import uninstall_site

    return _print_results(args, _layout(args), uninstall_site(_layout(args), dry_run=args.dry_run))


def _install(args: argparse.Namespace) -> int:
    from slurmplan.slurm.site_layout import controller_slurm_user, untrusted_interpreter
    from slurmplan.slurm.site_service import ensure_service_user, install_service

    layout = replace(_layout(args), slurm_user=args.slurm_user or controller_slurm_user())
    refusal = untrusted_interpreter()
    if refusal:  # the units and hooks run this Python with the service's rights (issue 24 item 9)
        allowed = f"a Python and slurmplan that only root can change ({refusal})"
        raise ValidationError("interpreter", sys.executable, allowed, "site install")
    results = [] if args.no_service else [ensure_service_user(layout, dry_run=args.dry_run)]
    results += install_site(layout, dry_run=args.dry_run, build=not args.no_build)
    if not args.no_service:  # the service user may hold and release other users' jobs (needs accounting)
        from slurmplan.slurm.operator import grant_operator

        real = layout.prefix == Path("/")
        level = args.admin_level
        results.append(grant_operator(layout.service_user, level=level, dry_run=args.dry_run, apply=real))
        results += install_service(layout, dry_run=args.dry_run, create_user=False)
    return _print_results(args, layout, results)


def _print_results(args: argparse.Namespace, layout: SiteLayout, results: list) -> int:
    if args.json:
        print(json.dumps([{**asdict(r), "dest": str(r.dest), "backup": r.backup and str(r.backup)} for r in results]))
        return 0
    verb = "would be " if args.dry_run else ""
    for r in results:
        extra = f" (backup {r.backup})" if r.backup else (f" ({r.note})" if r.note else "")
        where = layout.at(r.dest) if r.dest.is_absolute() else r.dest  # user:NAME, systemctl:ARGS
        print(f"{verb}{r.status:9} {where}{extra}")
    return 0


def _site_check(args: argparse.Namespace) -> int:
    from slurmplan.control.config import load_config
    from slurmplan.slurm.site_check import Finding, format_findings, site_check
    from slurmplan.slurm.site_layout import check_state_layout, controller_slurm_user

    cfg = load_config(args.config)
    findings = site_check(cfg.managed_partitions, args.daemon_user)
    if args.layout:  # the installed layout the daemon and the hooks share (issue 24 item 8)
        wrong = check_state_layout(Path("/"), args.daemon_user or "slurmplan", controller_slurm_user())
        fix = "run `slurmplan site install` again (it sets owners and modes), or see README 'Security model'"
        findings.append(Finding("state-layout", not wrong, "; ".join(wrong) or "owners and modes as installed", fix))
    print(json.dumps([f.to_dict() for f in findings], indent=2) if args.json else format_findings(findings))
    return 0 if all(f.ok for f in findings) else 1


def _gpu_range(hints: Hints) -> dict[str, object]:
    """The GPU counts the daemon may choose, by the rule in README: no min/max given, the count is kept."""
    if hints.gpus is None and hints.min_gpus is None and hints.max_gpus is None:
        return {"gpu_range": None, "elastic": False}
    from slurmplan.perf.candidates import count_range  # the performance model imports scipy: not for --help

    _, low, high = count_range(hints)
    return {"gpu_range": [low, high], "elastic": low != high}


def _check_hints(args: argparse.Namespace) -> int:
    """Raises ValidationError on bad hints; the CLI prints it (field, value, allowed) and exits 1."""
    hints = parse_hints(args.text)
    if args.json:
        fields = {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in asdict(hints).items()}
        print(json.dumps({"canonical": format_hints(hints), **fields, **_gpu_range(hints)}))
    else:
        print(format_hints(hints))
    return 0


def _plan_env(args: argparse.Namespace) -> int:
    job_id = args.job_id
    if job_id is None:
        raw = os.environ.get("SLURM_JOB_ID", "")
        if not raw.isdigit():
            raise ValidationError("--job-id", raw, "a job id, or run inside a job (SLURM_JOB_ID)", "plan-env")
        job_id = int(raw)
    values = plan_env_for_job(job_id)
    if args.json:
        print(json.dumps(values, sort_keys=True))
    else:
        prefix = "export " if args.shell else ""
        for name, value in values.items():
            print(f"{prefix}{name}={shlex.quote(value)}")
    return 0 if values else 1


def _hook(args: argparse.Namespace) -> int:
    """Resolve the journal path without ever failing: a broken config is logged and the hook exits 0."""
    database = args.database
    if database is None:
        try:
            from slurmplan.control.config import load_config

            config_path = args.config or os.environ.get("SLURMPLAN_CONFIG") or None
            database = load_config(config_path).database
        except Exception:  # noqa: BLE001 - the hook must not fail a job
            log.exception("slurmplan hook: cannot read the config; event not journaled")
            return 0
    return run_hook(args.event, database)
