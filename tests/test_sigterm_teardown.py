"""SIGTERM to a pytest run still runs its fixtures' teardown (where the dev clusters are stopped), and stops the
run even when the code under test swallows the interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

INNER = """
import time, pytest
from pathlib import Path

@pytest.fixture
def resource():
    yield
    Path(r"{tearing}").write_text("tearing down")
    time.sleep({teardown_s})  # a teardown that takes a while (stopping a cluster), long enough for a 2nd signal
    Path(r"{marker}").write_text("torn down")

def test_waits(resource):
    Path(r"{started}").write_text("started")
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        if {swallow}:  # as a CLI called in-process does: Ctrl-C becomes its exit status
            return
        raise

def test_after():
    Path(r"{after}").write_text("ran")
"""


@pytest.mark.parametrize(
    ("swallow", "twice"),
    [(False, False), (True, False), (False, True)],
    ids=["raised", "swallowed-by-the-test", "sent-twice-during-teardown"],
)
def test_sigterm_runs_fixture_teardown_and_stops_the_run(tmp_path: Path, swallow: bool, twice: bool) -> None:
    marker, started, after = tmp_path / "teardown", tmp_path / "started", tmp_path / "after"
    tearing = tmp_path / "tearing"
    text = INNER.format(
        marker=marker, started=started, after=after, swallow=swallow, tearing=tearing, teardown_s=3 if twice else 0
    )
    (tmp_path / "test_inner.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sigterm_teardown", "test_inner.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists(), proc.communicate()[0]
    proc.send_signal(signal.SIGTERM)
    if twice:  # as ``timeout`` forwarding its SIGTERM while a process-group kill reaches pytest too
        while not tearing.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert tearing.exists(), proc.communicate()[0]
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert marker.exists(), out  # without the plugin the process dies and the finalizer never runs
    assert not after.exists(), out  # the run stops: no test starts after the signal
    assert proc.returncode != 0, out  # an interrupted run is not green
