"""The ``slurmplan`` command itself, run as a user runs it: a real process, a real pipe, a real terminal (tmux)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import slurmplan

ROOT = Path(slurmplan.__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CLI = f"{sys.executable} -m slurmplan.cli"


def _sh(command: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=ENV, timeout=120, **kw)


@pytest.mark.parametrize("args", ["policies", "policies --json", "trace check --json {trace}", "--help"])
def test_output_piped_to_a_reader_that_stops_early_ends_quietly(args: str, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 3 --out {trace}").returncode == 0
    # ``head -n 0`` exits without reading, so every write of ours meets a closed pipe.
    r = _sh(f"set -o pipefail; {CLI} {args.format(trace=trace)} | head -n 0")
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.stderr == ""


def test_json_piped_to_head_in_a_terminal(tmp_path: Path) -> None:
    """The case the issue met: ``... --json | head -1`` typed in a terminal, progress bar on the terminal."""
    if not shutil.which("tmux"):
        pytest.fail("tmux is needed (site/quickstart/test.sh installs it)")
    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 30 --rate 20 --out {trace}").returncode == 0
    session = f"sp-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "done"
    cmd = (
        f"cd {ROOT} && PYTHONPATH={ROOT} {CLI} simulate --policy las --cluster v100:4,k80:4 --trace {trace} "
        f"--json | head -1; echo rc=${{PIPESTATUS[0]}} > {done}"
    )
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash", "--norc"], check=True)
    try:
        subprocess.run(["tmux", "send-keys", "-t", session, cmd, "Enter"], check=True)
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.3)
        capture = ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"]
        pane = subprocess.run(capture, capture_output=True, text=True)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    assert done.exists(), pane.stdout
    assert "Traceback" not in pane.stdout and "BrokenPipe" not in pane.stdout, pane.stdout
    lines = [line.strip() for line in pane.stdout.splitlines()]
    assert "[" in lines and "Running HiGHS" not in pane.stdout  # head's one line is the JSON's first


def test_simulate_json_stdout_is_only_json(tmp_path: Path) -> None:
    """HiGHS prints a banner on fd 1 the first time it is used; it must not land in --json output."""
    import json

    trace = tmp_path / "t.jsonl"
    assert _sh(f"{CLI} trace generate gavel-single --jobs 4 --out {trace}").returncode == 0
    r = _sh(f"{CLI} simulate --policy las --cluster v100:2,k80:2 --trace {trace} --json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["policy"] == "las"


def test_version() -> None:
    r = _sh(f"{CLI} --version")
    assert r.returncode == 0 and r.stdout.strip() == f"slurmplan {slurmplan.__version__}"
