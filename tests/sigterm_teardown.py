"""A pytest plugin: SIGTERM stops the run the way Ctrl-C does, so fixtures still tear down.

Without it, a run killed with SIGTERM (a CI timeout, ``kill``, ``timeout``) died at once and left its dev
clusters' slurmctld, slurmds, MariaDB and slurmdbd running. As ``KeyboardInterrupt``, pytest ends the session
normally and runs every finalizer, which stops those daemons. Code under test may catch that interrupt (a CLI
command called in-process turns Ctrl-C into its exit status), so the run also stops after the current test.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from types import FrameType

import pytest

_terminated: list[int] = []


REPEAT_GRACE_S = 30.0
"""A SIGTERM this soon after the first is the same stop delivered twice and is ignored, so teardown finishes:
``timeout`` forwards its own SIGTERM to pytest, and a kill of the process group (``pkill``, a CI runner's cancel)
reaches pytest directly as well. Seen here: the second copy arrived while the accounting cluster was being torn
down, killed pytest at once, and left slurmctld, slurmds, slurmdbd and MariaDB running. A later SIGTERM (a
teardown that hangs) kills at once, as does SIGKILL."""

_first_at: list[float] = []


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _terminated.append(signum)
    _first_at.append(time.monotonic())
    signal.signal(signal.SIGTERM, _repeat)
    raise KeyboardInterrupt(f"signal {signum}")


def _repeat(signum: int, frame: FrameType | None) -> None:
    if time.monotonic() - _first_at[0] < REPEAT_GRACE_S:
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def pytest_configure() -> None:
    signal.signal(signal.SIGTERM, _interrupt)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    yield
    if _terminated:
        item.session.shouldstop = f"stopped by signal {_terminated[0]}"
