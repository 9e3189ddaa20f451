"""The tick lock: an exclusive ``fcntl`` lock on a file, so two ticks never overlap.

``flock`` is released by the kernel when the holder dies (even by SIGKILL), so a crashed daemon never leaves a
stale lock behind; the holder's pid and start time are written into the file only to make the refusal message
useful to an operator.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from slurmplan.domain import SlurmplanError


class TickLocked(SlurmplanError):
    """Another tick holds the lock; this one must not run."""


class TickLock:
    """``with TickLock(path):`` runs the body only if no other process holds the lock; else raises TickLocked."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            os.close(fd)
            raise TickLocked(
                f"another slurmplan tick is running ({holder}; lock file {self.path}); this one exits without acting"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> TickLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
