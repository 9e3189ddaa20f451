"""The checkpoint signal with real processes and real signals, as a user's job meets it.

``python -m slurmplan.launch --nproc 2``: the parent catches the signal, forwards it to its workers, waits for
their checkpoint and exits with the outcome's status (75 here: checkpointed, not requeued, since no Slurm job
runs); the same when the whole process group is signalled; a signal while the processes still import torch is
remembered, not fatal; a signal during the last step finishes the job instead of requeueing it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from launch_helpers import EXAMPLE, saved, start_method, tiny_spec

from slurmplan.launch import run
from slurmplan.launch.local import start_local
from slurmplan.launch.spec import EXIT_CHECKPOINTED


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMPLAN_"))}
    env["SLURMPLAN_REPORT_DIR"] = str(tmp_path / "reports")
    return env


def _start(tmp_path: Path, *args: str, nproc: int = 2, **popen: Any) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "launch.log"
    cmd = [sys.executable, "-m", "slurmplan.launch", "--nproc", str(nproc), str(EXAMPLE), "--", *args]
    proc = subprocess.Popen(cmd, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=open(log, "w"), **popen)  # noqa: SIM115
    return proc, log


def _wait_for_text(path: Path, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s:\n{text[-2000:]}")


@pytest.mark.parametrize("to_group", [False, True], ids=["parent-only", "whole-group"])
def test_nproc_parent_forwards_the_signal_and_exits_75(tmp_path: Path, to_group: bool) -> None:
    ckpt = tmp_path / "ckpt"
    proc, log = _start(tmp_path, "--steps", "400", "--step-sleep", "0.1", "--checkpoint-dir", str(ckpt),
                       start_new_session=True)  # fmt: skip
    try:
        _wait_for_text(log, r"step 5/400", 120)
        if to_group:
            os.killpg(proc.pid, signal.SIGUSR2)  # as `scancel --signal=USR2 --full` does
        else:
            os.kill(proc.pid, signal.SIGUSR2)  # as `sbatch --signal=B:USR2@N` does to the batch script's process
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert code == EXIT_CHECKPOINTED, text[-3000:]
    state = saved(ckpt)
    assert 5 <= state["step"] < 400 and state["world_size"] == 2
    assert f"stopping after step {state['step']}" in text
    assert "Traceback" not in text
    # issue 29 item 12: exit 75 outside Slurm says how to go on; only rank 0 logs the steps
    assert text.count("run the same command again to resume") == 1
    assert text.count(" step 5/400 loss ") == 1
    assert text.count("checkpoint on SIGUSR2 (pid") == 1 and text.count("joined the gloo group") == 1
    if not to_group:
        assert "forwarding SIGUSR2 to workers" in text


@pytest.mark.parametrize("nproc", [1, 2])
def test_signal_while_starting_up_is_remembered(tmp_path: Path, nproc: int) -> None:
    """0.3 s after start the processes are still importing torch: the signal must not kill them."""
    ckpt = tmp_path / "ckpt"
    proc, log = _start(tmp_path, "--steps", "50", "--checkpoint-dir", str(ckpt), nproc=nproc)
    time.sleep(0.3)
    proc.send_signal(signal.SIGUSR2)
    code = proc.wait(180)
    text = log.read_text()
    assert code == EXIT_CHECKPOINTED, text[-3000:]
    assert "arrived while starting up" in text
    assert saved(ckpt)["step"] == 1  # stopped after the first step


class _SlowLastStep:
    """``on_step``: marks the step on disk; during the last step it waits, so the test signals right then."""

    def __init__(self, folder: str, last: int) -> None:
        self.folder, self.last = folder, last

    def __call__(self, step: int, loss: float) -> None:
        if step == self.last:
            Path(self.folder, "last-step").write_text(str(step))
            time.sleep(1.5)


def _train_and_record(steps: int, ckpt: str, out: str, overrides: dict[str, Any]) -> None:
    result = run(tiny_spec(steps, ckpt, **overrides))
    Path(out).write_text(result.outcome.value)
    sys.exit(result.outcome.exit_code)


def test_signal_during_the_last_step_finishes_without_requeue(tmp_path: Path) -> None:
    ckpt, out = tmp_path / "ckpt", tmp_path / "outcome"
    env = {"SLURM_JOB_ID": "999999"}  # inside a "job": a requeue would be attempted (and fail) if it were wrong
    group = start_local(_train_and_record, 1, (4, str(ckpt), str(out), {"on_step": _SlowLastStep(str(tmp_path), 4)}),
                        env=env, start_method=start_method())  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "last-step").exists():
        assert time.monotonic() < deadline, "the last step never came"
        time.sleep(0.02)
    os.kill(group.pids[0], signal.SIGUSR2)
    assert group.exit_codes() == [0]
    assert out.read_text() == "finished"
    assert saved(ckpt)["step"] == 4


def test_checkpointed_but_not_requeued_exits_non_zero(tmp_path: Path) -> None:
    """Outside Slurm nothing can requeue: the status says the job is not complete (75), as the parent's does."""
    proc, log = _start(tmp_path, "--steps", "400", "--step-sleep", "0.1", "--checkpoint-dir", str(tmp_path / "c"),
                       nproc=1)  # fmt: skip
    _wait_for_text(log, r"step 5/400", 120)
    proc.send_signal(signal.SIGUSR2)
    assert proc.wait(120) == EXIT_CHECKPOINTED
