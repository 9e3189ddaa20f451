"""A pytest plugin: SIGTERM stops the run the way Ctrl-C does, so fixtures still tear down.

Without it, a run killed with SIGTERM (a CI timeout, ``kill``, ``timeout``) died at once and left its dev
clusters' slurmctld, slurmds, MariaDB and slurmdbd running. As ``KeyboardInterrupt``, pytest ends the session
normally and runs every finalizer, which stops those daemons.
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once, as before
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
