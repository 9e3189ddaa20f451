"""`slurmplan devcluster up --site`: the whole site on one machine through the CLI, and `down` stops it all."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from site_cluster import unusable_reason

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(unusable_reason() is not None, reason=str(unusable_reason()))]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_devcluster_up_site_configures_the_controller_and_down_stops_everything(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    up = cli("devcluster", "up", "--site", "--managed-partition", "debug", "--state-dir", str(state), "--json")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        conf = (state / "conf" / "slurm.conf").read_text()
        assert "JobSubmitPlugins=lua" in conf and "PrologSlurmctld=" in conf and "EpilogSlurmctld=" in conf
        assert "slurmplan_spank.so" in (state / "conf" / "plugstack.conf").read_text()
        env = {**os.environ, "SLURM_CONF": str(state / "conf" / "slurm.conf")}
        assert "--plan-model" in subprocess.run(["sbatch", "--help"], env=env, capture_output=True, text=True).stdout
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\ntrue\n")
        os.chmod(tmp_path, 0o755)
        sub = ["sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:a100:1"]
        held = subprocess.run([*sub, "--plan-model=llama2-7b", str(script)], env=env, capture_output=True, text=True)
        assert held.returncode == 0, held.stderr
        job_id = held.stdout.strip()
        shown = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True).stdout
        assert "AdminComment=slurmplan:model=llama2-7b;asked=a100:1" in shown and "Priority=0" in shown
        refused = subprocess.run([*sub, "--plan-gpu-types=z9", str(script)], env=env, capture_output=True, text=True)
        assert refused.returncode != 0 and 'invalid types "z9"' in refused.stderr
        _daemon_config_is_written_and_printed(state)
        partition = subprocess.run([*sub, "-p", "debug", str(script)], env=env, capture_output=True, text=True)
        assert partition.returncode == 0, partition.stderr
        # the prolog hook journals into the site's journal once the daemon (here: an admin) releases a job
        subprocess.run(["scontrol", "release", job_id], env=env, check=True, capture_output=True)
        deadline = time.monotonic() + 60
        journal = state / "site" / "journal.db"
        while time.monotonic() < deadline and not journal.exists():
            time.sleep(0.5)
        assert journal.exists(), (state / "site" / "hook.log").read_text() if (state / "site/hook.log").exists() else ""
    finally:
        down = cli("devcluster", "down", "--state-dir", str(state), "--json")
    assert down.returncode == 0, down.stderr
    status = cli("devcluster", "status", "--state-dir", str(state), "--json")
    assert '"running": true' not in status.stdout


def _daemon_config_is_written_and_printed(state: Path) -> None:
    """Issue 29 item 6: `up` writes the daemon's config for this cluster (the hooks' env file names it) and the
    text output says what to export."""
    from slurmplan.control.config import load_config

    config = state / "slurmplan.yaml"
    cfg = load_config(config)
    assert cfg.database == (state / "site" / "journal.db").resolve() and cfg.report_dir == (state / "reports").resolve()
    assert (cfg.round_s, cfg.requeue_delay_s, cfg.managed_partitions) == (60.0, 11.0, ("debug",))
    assert cfg.trust.hints_from_comment is False  # job_submit.lua is installed: hints only from the admin comment
    hook_env = (state / "conf" / "slurmplan-hook.env").read_text()
    assert f"SLURMPLAN_CONFIG={config.resolve()}" in hook_env
    shown = cli("devcluster", "status", "--state-dir", str(state))
    assert f"export SLURMPLAN_CONFIG={config.resolve()}" in shown.stdout, shown.stdout + shown.stderr
    assert f"export SLURMPLAN_REPORT_DIR={(state / 'reports').resolve()}" in shown.stdout
