"""The daemon's YAML config: defaults, a full file, and errors that name file, field and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmplan.control.config import DaemonConfig, load_config
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


def test_zero_seconds_are_allowed_where_they_mean_something(tmp_path: Path) -> None:
    # priority_reset_s: 0 resets priorities at every change of the allocation; reconfig_cost_s: 0 moves for free.
    path = tmp_path / "zero.yaml"
    path.write_text("priority_reset_s: 0\nreconfig_cost_s: 0\n")
    tick = load_config(path).tick_config()
    assert tick.priority_reset_s == 0.0 and tick.reconfig_cost_s == 0.0


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="existing YAML file"):
        load_config(tmp_path / "nope.yaml")


def test_syntax_error_names_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("policy: [unclosed\n")
    with pytest.raises(ValidationError, match="broken.yaml"):
        load_config(path)
