"""SIGTERM to a pytest run still runs its fixtures' teardown (where the dev clusters are stopped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent

INNER = """
import time, pytest
from pathlib import Path

@pytest.fixture
def resource():
    yield
    Path(r"{marker}").write_text("torn down")

def test_waits(resource):
    Path(r"{started}").write_text("started")
    time.sleep(60)
"""


def test_sigterm_runs_fixture_teardown(tmp_path: Path) -> None:
    marker, started = tmp_path / "teardown", tmp_path / "started"
    (tmp_path / "test_inner.py").write_text(INNER.format(marker=marker, started=started))
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sigterm_teardown", "test_inner.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists(), proc.communicate()[0]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert marker.exists(), out  # without the plugin the process dies and the finalizer never runs
    assert proc.returncode != 0, out  # an interrupted run is not green
