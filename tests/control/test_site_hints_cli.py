"""``slurmplan site hints``: its own --help example is accepted, and --json says which GPU counts a job may get."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # argparse would wrap the example at its hyphen
    argv = [sys.executable, "-m", "slurmplan.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def test_the_help_example_is_accepted_by_the_command() -> None:
    text = " ".join(_cli("site", "hints", "--help").stdout.split())
    example = re.search(r'"(slurmplan:[^"]+)"', text)[1]
    proc = _cli("site", "hints", example)
    assert proc.returncode == 0, proc.stderr


def test_json_shows_the_gpu_range_a_fixed_job_keeps_its_count() -> None:
    fixed = json.loads(_cli("site", "hints", "--json", "slurmplan:model=x;gpus=4").stdout)
    assert (fixed["gpu_range"], fixed["elastic"]) == ([4, 4], False)
    elastic = json.loads(_cli("site", "hints", "--json", "slurmplan:gpus=4;min=2;max=8").stdout)
    assert (elastic["gpu_range"], elastic["elastic"]) == ([2, 8], True)


def test_tick_without_any_config_says_loudly_it_uses_the_host_wide_journal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29 item 6: `tick --dry-run` without a config quietly used /var/lib/slurmplan/journal.db. The config
    step of `tick` is called as the command calls it (a whole tick would wait on Slurm)."""
    from slurmplan.control.commands import _config
    from slurmplan.control.config import DEFAULT_CONFIG_PATH

    if DEFAULT_CONFIG_PATH.exists():
        pytest.skip(f"{DEFAULT_CONFIG_PATH} exists on this host")
    monkeypatch.delenv("SLURMPLAN_CONFIG", raising=False)
    _config(argparse.Namespace(dry_run=True, config=None, database=None), warn=True)
    err = capsys.readouterr().err
    assert "WARNING: no config" in err and "host-wide journal /var/lib/slurmplan/journal.db" in err
    assert "SLURMPLAN_CONFIG" in err
    _config(argparse.Namespace(dry_run=True, config=None, database="/tmp/x.db"), warn=True)
    assert capsys.readouterr().err == ""  # a journal named on the command line is no surprise


def test_devcluster_help_states_the_rule_not_the_install_checkouts_path() -> None:
    """Issue 29 item 12: `devcluster up --help` showed the path of the checkout slurmplan was installed from."""
    from pathlib import Path

    text = " ".join(_cli("devcluster", "up", "--help").stdout.split())
    assert "$SLURMPLAN_DEVCLUSTER_DIR" in text and ".state/devcluster in the source checkout" in text
    assert str(Path(__file__).resolve().parents[2]) not in text
