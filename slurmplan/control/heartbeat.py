"""The daemon's heartbeat: a small file replaced atomically at the end of every completed tick.

It is the one signal that lets the cluster fall back to plain Slurm when slurmplan is down: the watchdog
(``slurmplan watchdog``, run by a timer outside the daemon) and job_submit.lua (inside slurmctld, plain Lua
without a JSON or stat library) both read it. Hence its format: ``key=value`` lines, numbers in decimal,
so a Lua ``string.match(text, "time=(%d+)")`` reads it. ``stale_after_s`` travels in the file so the Lua side
needs no copy of the daemon's config.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Heartbeat:
    """What the last completed tick left behind."""

    time: float
    tick_id: int
    round_index: int
    stale_after_s: float
    pid: int

    def age(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.time

    def stale(self, now: float | None = None) -> bool:
        return self.age(now) > self.stale_after_s


def write_heartbeat(
    path: Path, *, tick_id: int, round_index: int, stale_after_s: float, now: float | None = None
) -> None:
    """Replace ``path`` atomically (temp file + ``os.replace``): a reader never sees half a heartbeat."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.time() if now is None else now
    text = (
        f"time={stamp:.3f}\ntick={tick_id}\nround={round_index}\nstale_after_s={stale_after_s:.0f}\npid={os.getpid()}\n"
    )
    fd, tmp = tempfile.mkstemp(prefix=".heartbeat.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # slurmctld (another user) reads it
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The heartbeat at ``path``; None when there is none (the daemon never completed a tick) or it is garbled."""
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    try:
        return Heartbeat(
            time=float(values["time"]),
            tick_id=int(values.get("tick", 0)),
            round_index=int(values.get("round", 0)),
            stale_after_s=float(values["stale_after_s"]),
            pid=int(values.get("pid", 0)),
        )
    except (KeyError, ValueError):
        return None
