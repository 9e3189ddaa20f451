"""The daemon config of a dev cluster: ``devcluster up`` writes ``<state_dir>/slurmplan.yaml``.

Without it a researcher had to guess the journal path and ``requeue_delay_s`` of the cluster, the hooks'
environment file pointed at a config that did not exist, and ``tick`` fell back to the host-wide journal that
every cluster on the host could share. The file holds the keys of ``control.config.DaemonConfig`` (this room may
not import ``control``; ``tests/slurm/test_devconfig.py`` loads it with the daemon's own reader).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import SLURM_CRED_EXPIRE_S

CONFIG_NAME = "slurmplan.yaml"
DEV_ROUND_S = 60.0
"""A round a minute: decisions show quickly on a cluster one person plays with (production default: 360 s)."""

DEV_INTERVAL_S = 10.0
"""`slurmplan daemon` ticks this often: a job submitted between rounds is seen within seconds."""


@dataclass(frozen=True)
class DevDaemonFiles:
    """Where a dev cluster's daemon keeps its state, all under the cluster's state directory."""

    config: Path
    database: Path
    report_dir: Path


def dev_daemon_files(state_dir: Path, site_journal: Path | None = None) -> DevDaemonFiles:
    """The paths for a cluster in ``state_dir`` (the ``--site`` hooks' journal when given, so both write one)."""
    state_dir = Path(state_dir).resolve()
    database = site_journal or state_dir / "journal.db"
    return DevDaemonFiles(state_dir / CONFIG_NAME, Path(database), state_dir / "reports")


def daemon_config_text(
    files: DevDaemonFiles, cred_expire: int | None, managed_partitions: tuple[str, ...], site: bool = False
) -> str:
    """The YAML text; ``requeue_delay_s`` is what this cluster makes a requeued job wait (``cred_expire + 1``).

    ``site``: the cluster runs the site's job_submit.lua (``devcluster up --site``), so the daemon reads hints only
    from the admin comment it writes (``hints_from_comment: false``, as README tells a site to set): a user's
    ``--comment`` rewritten after submission was never checked."""
    delay = (cred_expire if cred_expire is not None else SLURM_CRED_EXPIRE_S) + 1
    lines = [
        "# written by `slurmplan devcluster up` for this dev cluster; `export SLURMPLAN_CONFIG=` this file",
        f"database: {json.dumps(str(files.database))}",
        f"report_dir: {json.dumps(str(files.report_dir))}",
        f"round_s: {DEV_ROUND_S:g}",
        f"interval_s: {DEV_INTERVAL_S:g}",
        f"requeue_delay_s: {delay:g}",
    ]
    if managed_partitions:
        lines.append(f"managed_partitions: {json.dumps(list(managed_partitions))}")
    if site:
        lines.append("hints_from_comment: false  # job_submit.lua is installed: trust only the admin comment")
    return "\n".join(lines) + "\n"


def write_daemon_config(
    files: DevDaemonFiles, cred_expire: int | None, managed_partitions: tuple[str, ...] = (), site: bool = False
) -> Path:
    """Write the config (kept when it exists: the user may have edited it) and create the report folder."""
    files.report_dir.mkdir(parents=True, exist_ok=True)
    files.report_dir.chmod(0o1777)  # jobs of any user append their reports here
    if not files.config.exists():
        files.config.parent.mkdir(parents=True, exist_ok=True)
        files.config.write_text(daemon_config_text(files, cred_expire, managed_partitions, site))
    return files.config
