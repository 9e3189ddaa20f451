"""The daemon config `devcluster up` writes (``slurm/devconfig.py``), read back with the daemon's own reader."""

from __future__ import annotations

from pathlib import Path

from slurmplan.control.config import load_config
from slurmplan.slurm.devconfig import dev_daemon_files, write_daemon_config


def test_a_site_cluster_trusts_only_the_admin_comment(tmp_path: Path) -> None:
    """``up --site`` installs job_submit.lua, so its config says ``hints_from_comment: false`` (a user's rewritten
    ``--comment`` was never checked); a plain dev cluster has no job_submit.lua and keeps reading ``--comment``."""
    site = write_daemon_config(dev_daemon_files(tmp_path / "site"), 10, ("debug",), site=True)
    plain = write_daemon_config(dev_daemon_files(tmp_path / "plain"), 10)
    assert load_config(site).trust.hints_from_comment is False
    assert load_config(site).managed_partitions == ("debug",) and load_config(site).requeue_delay_s == 11.0
    assert load_config(plain).trust.hints_from_comment is True
