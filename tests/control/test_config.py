"""The daemon's YAML config: defaults, a full file, and errors that name file, field and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmplan.control.config import DaemonConfig, load_config
from slurmplan.control.trust import HintTrust
from slurmplan.domain import ValidationError


def test_full_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "slurmplan.yaml"
    path.write_text(
        "managed_partitions: [gpu, debug]\npolicy: fifo\nround_s: 20\ncheckpoint_signal: SIGUSR1\n"
        f"grace_s: 5\ndatabase: {tmp_path}/j.db\nreport_dir: {tmp_path}/r\nshadow: true\n"
    )
    cfg = load_config(path)
    assert cfg.managed_partitions == ("gpu", "debug")
    assert cfg.policy == "fifo"
    assert cfg.round_s == 20.0
    assert cfg.checkpoint_signal == "USR1"
    assert cfg.shadow is True and cfg.dry_run is False
    assert cfg.lock_path == Path(f"{tmp_path}/j.db.lock")
    tick = cfg.tick_config()
    assert tick.round_s == 20.0 and tick.grace_s == 5.0 and tick.checkpoint_signal == "USR1"


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == DaemonConfig(source=str(path))


@pytest.mark.parametrize(
    ("text", "field_name"),
    [
        ("round_s: -3\n", "round_s"),
        ("round_len: 3\n", "round_len"),
        ("checkpoint_signal: KILL\n", "checkpoint_signal"),
        ("dry_run: yes please\n", "dry_run"),
        ("managed_partitions: 7\n", "managed_partitions"),
        ("reconfig_threshold: 1.5\n", "reconfig_threshold"),
        ("priority_reset_s: -1\n", "priority_reset_s"),
        ("reconfig_cost_s: fast\n", "reconfig_cost_s"),
        ("requeue_delay_s: -5\n", "requeue_delay_s"),
        ("signal_min_run_s: -1\n", "signal_min_run_s"),
        ("hints_from_comment: no thanks\n", "hints_from_comment"),
        ("guaranteed_accounts: 7\n", "guaranteed_accounts"),
        ("deadline_qos: [ok, 3]\n", "deadline_qos"),
        ("steps_account: [a]\n", "steps_account"),
        ("trust: {}\n", "trust"),
    ],
)
def test_bad_field_is_named_with_file(tmp_path: Path, text: str, field_name: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as info:
        load_config(path)
    assert info.value.field == field_name
    assert str(path) in str(info.value)
    assert info.value.allowed


def test_trust_keys_are_flat_in_yaml_and_held_as_one_hint_trust(tmp_path: Path) -> None:
    """The site's YAML keeps one flat key per rule list; the config holds them as the trust module's ``HintTrust``
    (declared once), which is also what `site install` renders into job_submit.lua."""
    path = tmp_path / "trust.yaml"
    path.write_text("hints_from_comment: false\nguaranteed_accounts: gold, silver\nunmanaged_qos: [batchonly]\n")
    cfg = load_config(path)
    assert cfg.trust == HintTrust(False, guaranteed_accounts=("gold", "silver"), unmanaged_qos=("batchonly",))
    assert cfg.trust.rules()[:2] == (("guaranteed", ("gold", "silver"), None), ("unmanaged", None, ("batchonly",)))
    assert DaemonConfig().trust == HintTrust()  # no keys: hints from --comment too, every rule open


def test_zero_seconds_are_allowed_where_they_mean_something(tmp_path: Path) -> None:
    # priority_reset_s: 0 resets priorities at every change of the allocation; reconfig_cost_s: 0 moves for free.
    path = tmp_path / "zero.yaml"
    path.write_text("priority_reset_s: 0\nreconfig_cost_s: 0\nrequeue_delay_s: 0\nsignal_min_run_s: 0\n")
    tick = load_config(path).tick_config()
    assert tick.priority_reset_s == 0.0 and tick.reconfig_cost_s == 0.0 and tick.requeue_delay_s == 0.0
    assert tick.signal_min_run_s == 0.0  # signal a job the moment it is decided
    path.write_text("policy: las\n")  # Slurm's default cred_expire + 1 unless the site says otherwise
    assert load_config(path).tick_config().requeue_delay_s == 121.0
    assert load_config(path).tick_config().signal_min_run_s == 10.0  # the daemon never signals a job in its first 10 s


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="existing YAML file"):
        load_config(tmp_path / "nope.yaml")


def test_syntax_error_names_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("policy: [unclosed\n")
    with pytest.raises(ValidationError, match="broken.yaml"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "field_name"),
    [
        ("interval_s: -1\n", "interval_s"),
        ("interval_s: 0\n", "interval_s"),
        ("fail_open_after_s: -5\n", "fail_open_after_s"),
        ("metrics_port: 70000\n", "metrics_port"),
        ("metrics_port: true\n", "metrics_port"),
        ("heartbeat: /tmp/x\n", "heartbeat"),
    ],
)
def test_operating_fields_are_checked(tmp_path: Path, text: str, field_name: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as info:
        load_config(path)
    assert info.value.field == field_name and str(path) in str(info.value)


def test_operating_defaults_follow_the_database_and_round(tmp_path: Path) -> None:
    path = tmp_path / "ops.yaml"
    path.write_text(f"database: {tmp_path}/db/j.db\nround_s: 100\n")
    cfg = load_config(path)
    assert cfg.heartbeat_path == tmp_path / "db" / "heartbeat"
    assert cfg.fail_open_path == tmp_path / "db" / "fail-open.json"
    assert cfg.fail_open_limit_s == 300.0
    path.write_text(
        f"database: {tmp_path}/j.db\nheartbeat_file: {tmp_path}/hb\nfail_open_after_s: 40\nmetrics_port: 9\n"
    )
    cfg = load_config(path)
    assert (cfg.heartbeat_path, cfg.fail_open_limit_s, cfg.metrics_port) == (tmp_path / "hb", 40.0, 9)


@pytest.mark.parametrize("text", ["interval_s: -30\n", "polcy: las\n"])
def test_daemon_refuses_a_bad_config_at_start_and_creates_nothing(tmp_path: Path, text: str) -> None:
    import subprocess
    import sys

    path = tmp_path / "bad.yaml"
    path.write_text(f"database: {tmp_path}/state/j.db\n" + text)
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "daemon", "--config", str(path), "--max-ticks", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert text.split(":")[0] in proc.stderr and str(path) in proc.stderr
    assert not (tmp_path / "state").exists()  # no journal, no lock, no heartbeat
