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

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """This boot of this host ('' when unknown): monotonic times compare only within one boot."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def uptime() -> float:
    """Seconds since boot (CLOCK_BOOTTIME, what /proc/uptime shows): steps of the wall clock do not move it."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass(frozen=True)
class Heartbeat:
    """What the last completed tick left behind.

    ``time`` is the wall clock; ``boot``/``uptime`` are the monotonic clock of the host that wrote it. A reader on
    the same boot of the same host (the watchdog, job_submit.lua on the controller) measures the age on the
    monotonic clock, so a step of the wall clock (NTP, an admin's ``date -s``) neither fails open early (forward)
    nor keeps a dead daemon's heartbeat fresh (backward). Another host falls back to the wall clock.
    """

    time: float
    tick_id: int
    round_index: int
    stale_after_s: float
    pid: int
    boot: str = ""
    uptime: float | None = None

    def age(self, now: float | None = None) -> float:
        """Seconds since the tick; ``now`` (wall clock) is for tests and replays: given, the wall clock is used."""
        if now is None and self.uptime is not None and self.boot and self.boot == boot_id():
            return uptime() - self.uptime
        return (time.time() if now is None else now) - self.time

    def stale(self, now: float | None = None) -> bool:
        return self.age(now) > self.stale_after_s


def write_heartbeat(
    path: Path, *, tick_id: int, round_index: int, stale_after_s: float, now: float | None = None
) -> None:
    """Replace ``path`` atomically (temp file + ``os.replace``): a reader never sees half a heartbeat."""
    path.parent.mkdir(parents=True, exist_ok=True)
    wall = time.time()
    stamp = wall if now is None else now
    up = uptime() - (wall - stamp)  # a given ``now`` (tests) moves both clocks alike
    text = (
        f"time={stamp:.3f}\ntick={tick_id}\nround={round_index}\nstale_after_s={stale_after_s:.0f}\npid={os.getpid()}\n"
        f"boot={boot_id()}\nuptime={up:.3f}\n"
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
            boot=values.get("boot", "").strip(),
            uptime=float(values["uptime"]) if "uptime" in values else None,
        )
    except (KeyError, ValueError):
        return None
