"""``slurmplan devcluster up|down|status`` and ``slurmplan status``: the Slurm room's commands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from slurmplan.domain import ValidationError
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import DevCluster, default_state_dir, install_packages
from slurmplan.slurm.devconfig import dev_daemon_files, write_daemon_config
from slurmplan.slurm.devlayout import load_layout
from slurmplan.slurm.status import check_slurm_conf, job_progress, render_status, status_dict


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dev = subparsers.add_parser(
        "devcluster",
        help="start/stop a real local Slurm cluster of virtual GPU nodes (for development and tests)",
        description="A local Slurm cluster on this host: its own munged, slurmctld and one slurmd per node, "
        "all files under one state directory. Needs root.",
    )
    dev_sub = dev.add_subparsers(dest="devcluster_command", metavar="ACTION", required=True)
    for action, text in (
        ("up", "write the configuration, start the daemons, wait until every node is idle (idempotent)"),
        ("down", "cancel jobs and stop every process this cluster started"),
        ("status", "each daemon and node of the cluster"),
    ):
        p = dev_sub.add_parser(action, help=text, description=text)
        p.add_argument("--layout", metavar="FILE", help="node layout YAML (default: site/devcluster/default.yaml)")
        p.add_argument(
            "--state-dir",
            metavar="DIR",
            help="where the cluster keeps everything (default: $SLURMPLAN_DEVCLUSTER_DIR, else .state/devcluster in"
            " the source checkout the slurmplan package is installed from, else /var/lib/slurmplan/devcluster;"
            " `up` prints the one it used)",
        )
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")
        if action == "up":
            p.add_argument("--install", action="store_true", help="apt-get install Slurm and munge first")
            p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the nodes (default 90)")
            p.add_argument(
                "--site",
                action="store_true",
                help="configure the controller as `slurmplan site install` does: SPANK plugin built and loaded, "
                "job_submit.lua, PrologSlurmctld/EpilogSlurmctld with the hook environment (journal in "
                "STATE_DIR/site/journal.db)",
            )
            p.add_argument(
                "--accounting",
                action="store_true",
                help="also run MariaDB and slurmdbd in the state directory (fairshare, QOS, limits) and create the "
                "layout's accounts: section with sacctmgr (implied by --site)",
            )
            p.add_argument("--no-accounting", action="store_true", help="with --site: no MariaDB/slurmdbd")
            p.add_argument(
                "--managed-partition",
                action="append",
                default=[],
                metavar="NAME",
                help="with --site: jobs in this partition are managed without hints (repeatable)",
            )
        p.set_defaults(func=_devcluster)

    st = subparsers.add_parser(
        "status",
        help="GPUs per type, nodes by state, and jobs with their GPU requests",
        description="A summary of the Slurm cluster as slurmplan sees it (one sinfo --json, one squeue --json). "
        "Uses $SLURM_CONF like the Slurm commands; --slurm-conf overrides it.",
    )
    st.add_argument("--json", action="store_true", help="print machine-readable JSON")
    st.add_argument("--all", action="store_true", help="include finished jobs Slurm still remembers")
    st.add_argument("--slurm-conf", metavar="FILE", help="the slurm.conf to use (e.g. a dev cluster's)")
    st.add_argument(
        "--report-dir",
        metavar="DIR",
        help="the launcher's report folder, for each job's step and predicted finish (default $SLURMPLAN_REPORT_DIR;"
        " none: no STEP figures)",
    )
    st.set_defaults(func=_status)


def _devcluster(args: argparse.Namespace) -> int:
    accounting = _accounting_flag(args)
    if getattr(args, "install", False):
        install_packages(bool(accounting))
    cluster = DevCluster(load_layout(args.layout), args.state_dir, accounting)
    journal = None
    if getattr(args, "site", False):
        cluster, journal = _site_cluster(args, cluster)
    files = dev_daemon_files(cluster.paths.root, journal)
    if args.devcluster_command == "up":
        partitions = tuple(getattr(args, "managed_partition", ()) or ())
        write_daemon_config(files, cluster.layout.cred_expire, partitions, site=journal is not None)
        status = cluster.up(timeout=args.timeout, detach=True)
    elif args.devcluster_command == "down":
        cluster.down()
        status = cluster.status()
    else:
        status = cluster.status()
    if args.json:
        json.dump(status.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0 if args.devcluster_command == "down" or status.running else 1
    print(f"cluster {status.cluster_name} in {status.state_dir}")
    for d in status.daemons:
        print(f"  {d.name:<20} {'running' if d.running else 'stopped':<8} pid {d.pid if d.pid else '-'}")
    for n in status.nodes:
        gpus = f"{n.gpus} x {n.gpu_type}" if n.gpus else "no GPUs"
        print(f"  node {n.name:<15} {n.state:<12} {gpus}")
    if status.running:
        print(f"\nexport SLURM_CONF={status.slurm_conf}")
        if files.config.exists():  # the daemon's config for this cluster (journal, reports, round_s)
            print(f"export SLURMPLAN_CONFIG={files.config}")
            print(f"export SLURMPLAN_REPORT_DIR={files.report_dir}")
    return 0 if args.devcluster_command == "down" or status.running else 1


def _site_cluster(args: argparse.Namespace, plain: DevCluster) -> tuple[DevCluster, Path]:
    """The same cluster with the site's controller configuration laid over its layout, and its journal."""
    from slurmplan.slurm.site import build_plugin, dev_site_overrides, source_root

    overrides, dev = dev_site_overrides(
        plain.paths.root,
        plain.paths.conf_dir,
        managed_partitions=tuple(args.managed_partition),
        plugin=build_plugin(source_root()),
        config=dev_daemon_files(plain.paths.root).config,
    )
    extra = [*plain.layout.slurm_conf_extra, *overrides["slurm_conf_extra"]]
    files = {**{k: str(v) for k, v in plain.layout.conf_files.items()}, **overrides["conf_files"]}
    layout = load_layout(args.layout, {"slurm_conf_extra": extra, "conf_files": files})
    print(f"site: journal {dev.journal}, plan files {dev.plan_dir}, hook log {dev.hook_log}", file=sys.stderr)
    return DevCluster(layout, plain.paths.root, plain.accounting), dev.journal


def _accounting_flag(args: argparse.Namespace) -> bool | None:
    """``up``: --accounting, or --site unless --no-accounting, else as the last ``up`` had it (so a plain ``up``
    of a running accounting cluster is a no-op); ``down``/``status``: as the last ``up`` had it."""
    if args.devcluster_command != "up":
        return None
    if args.accounting and args.no_accounting:
        raise ValidationError("--no-accounting", True, "either --accounting or --no-accounting, not both", "devcluster")
    if args.no_accounting:
        return False
    return True if args.accounting or args.site else None  # None: as the cluster last ran (none when new)


def _fallback_slurm_conf() -> str | None:
    """The default dev cluster's slurm.conf when nothing else names a cluster (no $SLURM_CONF, no
    /etc/slurm/slurm.conf), so ``devcluster up`` then ``status`` works without an export."""
    if os.environ.get("SLURM_CONF") or Path("/etc/slurm/slurm.conf").exists():
        return None
    conf = default_state_dir() / "conf" / "slurm.conf"
    return str(conf) if conf.exists() else None


def _status(args: argparse.Namespace) -> int:
    conf = args.slurm_conf or _fallback_slurm_conf()
    check_slurm_conf(conf)
    env = {"SLURM_CONF": conf} if conf else None
    snapshot = SlurmBackend(env).snapshot()
    reports = args.report_dir or os.environ.get("SLURMPLAN_REPORT_DIR")
    progress = job_progress(snapshot, Path(reports) if reports else None)
    if args.json:
        json.dump(status_dict(snapshot, args.all, progress), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_status(snapshot, args.all, progress))
    return 0
