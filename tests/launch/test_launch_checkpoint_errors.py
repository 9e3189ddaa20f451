"""Checkpoints that fail, as a user meets them: each error names the file or folder, a corrupted newest
checkpoint falls back to the intact one before it, and with ``--nproc 2`` an error is one line on stderr."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import EXAMPLE, assert_same_params, in_child, saved, tiny_spec, train
from torch import nn

from slurmplan.launch import run
from slurmplan.launch.checkpoint import STATE_FILE, CheckpointError, CheckpointStore


def _two_checkpoints(tmp_path: Path) -> Path:
    ckpt = tmp_path / "ckpt"
    train(1, 2, ckpt, checkpoint_every=1)  # keeps step 1 and step 2
    assert [s for s, _ in CheckpointStore(ckpt).complete()] == [1, 2]
    return ckpt


@pytest.mark.parametrize("damage", ["truncated", "random-bytes", "empty"])
def test_corrupted_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path, damage: str, caplog) -> None:  # noqa: ANN001
    ckpt = _two_checkpoints(tmp_path)
    newest = ckpt / "step-00000002" / STATE_FILE
    data = newest.read_bytes()
    newest.write_bytes({"truncated": data[: len(data) // 2], "random-bytes": os.urandom(4096), "empty": b""}[damage])
    with caplog.at_level(logging.WARNING):
        folder, state = CheckpointStore(ckpt).load_newest_intact()
    assert folder.name == "step-00000001" and state["step"] == 1
    assert str(newest) in caplog.text and "newest intact" in caplog.text

    newest.write_bytes(b"")  # both broken: one error naming both files
    (ckpt / "step-00000001" / STATE_FILE).write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="no readable checkpoint") as err:
        CheckpointStore(ckpt).load_newest_intact()
    assert "step-00000001" in str(err.value) and "step-00000002" in str(err.value)


def test_resume_after_fallback_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    ckpt = _two_checkpoints(tmp_path)
    (ckpt / "step-00000002" / STATE_FILE).write_bytes(b"")
    train(1, 4, ckpt)  # resumes from step 1
    reference = tmp_path / "reference"
    train(1, 4, reference)
    assert_same_params(saved(ckpt)["model"], saved(reference)["model"])


def _expect_error(steps: int, ckpt: str, overrides: dict, pattern: str) -> None:
    with pytest.raises(CheckpointError, match=pattern):
        run(tiny_spec(steps, ckpt, **overrides))


def test_unwritable_directory_is_found_before_training(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    in_child(_expect_error, 3, str(blocker / "ckpt"), {}, r"checkpoint_dir .*a-file/ckpt is not writable")


def test_missing_directory_says_it_starts_fresh(tmp_path: Path, caplog) -> None:  # noqa: ANN001
    with caplog.at_level(logging.INFO):
        assert CheckpointStore(tmp_path / "typo").load_newest_intact() is None
    assert f"starting fresh at step 0: looked for checkpoints in {tmp_path / 'typo'}" in caplog.text
    assert "folder does not exist" in caplog.text


def _wider_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 3))


def test_checkpoint_of_a_different_model_names_the_keys(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    train(1, 2, ckpt)
    in_child(_expect_error, 3, str(ckpt), {"model_factory": _wider_model},
             r"saved by a different model: .*keys the checkpoint has but the model lacks \(3\.weight.*shapes differ \(0\.weight \(32, 8\) saved vs \(64, 8\)")  # fmt: skip  # noqa: E501


def test_nproc_2_error_is_one_line(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "step-00000003").mkdir(parents=True)
    (ckpt / "step-00000003" / STATE_FILE).write_bytes(b"")
    (ckpt / "step-00000003" / "complete.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMPLAN_"))}
    env["SLURMPLAN_REPORT_DIR"] = str(tmp_path / "reports")
    cmd = [sys.executable, "-m", "slurmplan.launch", "--nproc", "2", str(EXAMPLE), "--", "--steps", "3",
           "--checkpoint-dir", str(ckpt)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "Connection closed" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("slurmplan.launch: error: no readable checkpoint") and "EOFError" in lines[0]
    assert str(ckpt / "step-00000003" / STATE_FILE) in lines[0]


def test_nproc_2_same_error_on_every_rank_is_printed_once(tmp_path: Path) -> None:
    """A spec error every worker hits (here max_p=1 on 2 processes) is one line, not one per rank."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMPLAN_"))}
    cmd = [sys.executable, "-m", "slurmplan.launch", "--nproc", "2", str(EXAMPLE), "--", "--steps", "3",
           "--max-p", "1"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(lines) == 1 and "world_size" in lines[0] and "max_p=1" in lines[0], proc.stderr
