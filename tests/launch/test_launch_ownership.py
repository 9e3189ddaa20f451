"""A checkpoint folder belongs to one live job: a second live job is refused, an ended one's folder is taken over
with a warning, and the launcher says which job wrote the checkpoint it resumes from."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import tiny_spec

from slurmplan.launch import run
from slurmplan.launch.checkpoint import CheckpointError
from slurmplan.launch.ownership import OWNER_FILE, Owner, claim, read_owner


def _owned_by(folder: Path, job: str, pid: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNER_FILE).write_text(json.dumps({"job": job, "host": socket.gethostname(), "pid": pid}))


def test_a_live_local_run_holds_its_folder_and_an_ended_one_is_taken_over(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a real, live process
    try:
        _owned_by(tmp_path, "local", other.pid)
        with pytest.raises(CheckpointError, match=r"held by a local run \(process \d+"):
            claim(tmp_path, Owner.of_this_process({}))
        assert read_owner(tmp_path).pid == other.pid  # refused: nothing changed
    finally:
        other.kill()
        other.wait()
    assert claim(tmp_path, Owner.of_this_process({})) is None  # same "job" (local), its process has ended
    assert read_owner(tmp_path) == Owner("local", socket.gethostname(), os.getpid())


def test_an_ended_slurm_jobs_folder_is_taken_over_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _owned_by(tmp_path, "4242", 1)
    with caplog.at_level(logging.WARNING):
        previous = claim(tmp_path, Owner.of_this_process({"SLURM_JOB_ID": "77"}), live=lambda o: False)
    assert previous is not None and previous.job == "4242"
    assert "last used by job 4242, which has ended; job 77 takes it over" in caplog.text
    with pytest.raises(CheckpointError, match="held by job 77, which is still pending or running"):
        claim(tmp_path, Owner.of_this_process({"SLURM_JOB_ID": "78"}), live=lambda o: True)
    assert claim(tmp_path, Owner.of_this_process({"SLURM_JOB_ID": "77"}), live=lambda o: True) is None  # requeued


def test_a_garbage_owner_file_is_logged_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / OWNER_FILE).write_bytes(b"\xff\xfe{not json")
    with caplog.at_level(logging.WARNING):
        assert claim(tmp_path, Owner.of_this_process({})) is None
    assert "ignoring unreadable" in caplog.text and read_owner(tmp_path).job == "local"


def test_resume_names_the_job_that_wrote_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    ckpt = tmp_path / "ckpt"
    run(tiny_spec(2, ckpt))
    with caplog.at_level(logging.INFO):
        result = run(tiny_spec(3, ckpt))
    assert result.resumed_from == 2
    assert f"resuming from {ckpt}/step-00000002: step 2, written by job local" in caplog.text
