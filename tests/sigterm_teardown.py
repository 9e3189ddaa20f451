"""A pytest plugin: SIGTERM stops the run the way Ctrl-C does, so fixtures still tear down.

Without it, a run killed with SIGTERM (a CI timeout, ``kill``, ``timeout``) died at once and left its dev
clusters' slurmctld, slurmds, MariaDB and slurmdbd running. As ``KeyboardInterrupt``, pytest ends the session
normally and runs every finalizer, which stops those daemons. Code under test may catch that interrupt (a CLI
command called in-process turns Ctrl-C into its exit status), so the run also stops after the current test.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

_terminated: list[int] = []


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _terminated.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once, as before
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    signal.signal(signal.SIGTERM, _interrupt)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    yield
    if _terminated:
        item.session.shouldstop = f"stopped by signal {_terminated[0]}"
