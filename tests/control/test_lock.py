"""The tick lock: a second holder is refused with a clear message, and a killed holder frees it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmplan.control.lock import TickLock, TickLocked


def test_second_lock_in_other_process_is_refused(tmp_path: Path) -> None:
    lock_path = tmp_path / "tick.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from slurmplan.control.lock import TickLock; import time\n"
            f"with TickLock({str(lock_path)!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(TickLocked, match=f"pid {holder.pid}"), TickLock(lock_path):
            pass
        holder.kill()  # SIGKILL: the kernel drops the flock, no stale lock remains
        holder.wait()
        with TickLock(lock_path) as lock:
            assert lock.held
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_lock_is_reusable_after_release(tmp_path: Path) -> None:
    lock = TickLock(tmp_path / "x" / "tick.lock")
    with lock, pytest.raises(TickLocked):
        TickLock(tmp_path / "x" / "tick.lock").acquire()
    assert not lock.held
    start = time.monotonic()
    with TickLock(tmp_path / "x" / "tick.lock"):
        pass
    assert time.monotonic() - start < 5
