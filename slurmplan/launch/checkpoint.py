"""Atomic checkpoints on a shared file system.

A checkpoint is written into a hidden temporary folder, flushed to disk, and only then renamed to
``step-NNNNNNNN`` (submitit and adaptdl do the same). A rename within one folder is atomic, so a process killed
while writing leaves a stray temporary folder and the previous checkpoint untouched. ``latest()`` only ever
returns folders that hold the completion marker, and the next save sweeps the strays away.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
MARKER_FILE = "complete.json"
_NAME = re.compile(r"^step-(\d{8,})$")
_TMP_PREFIX = ".tmp-"


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    """The checkpoints of one job in one folder; only rank 0 writes, every rank reads."""

    def __init__(self, root: str | os.PathLike[str], keep: int = 2) -> None:
        self.root = Path(root)
        self.keep = max(1, keep)

    def complete(self) -> list[tuple[int, Path]]:
        """Complete checkpoints as (step, folder), oldest first."""
        if not self.root.is_dir():
            return []
        out = []
        for child in self.root.iterdir():
            match = _NAME.match(child.name)
            if match and (child / MARKER_FILE).is_file() and (child / STATE_FILE).is_file():
                out.append((int(match[1]), child))
        return sorted(out)

    def latest(self) -> Path | None:
        done = self.complete()
        return done[-1][1] if done else None

    def save(self, state: dict[str, Any], step: int) -> Path:
        """Write ``state`` as the checkpoint of ``step``; returns its folder once it is complete on disk."""
        started = time.perf_counter()
        self.root.mkdir(parents=True, exist_ok=True)
        self._sweep_temporaries()
        tmp = self.root / f"{_TMP_PREFIX}step-{step:08d}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        with open(tmp / STATE_FILE, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        with open(tmp / MARKER_FILE, "w") as fh:
            json.dump({"step": step, "time": time.time()}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_path(tmp)
        final = self.root / f"step-{step:08d}"
        if final.exists():  # the same step saved again (e.g. a resumed run stopped before its first step)
            old = self.root / f"{_TMP_PREFIX}old-{final.name}-{os.getpid()}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_path(self.root)
        self._prune()
        log.info("checkpoint of step %d saved to %s in %.2fs", step, final, time.perf_counter() - started)
        return final

    def load(self, folder: Path | None = None, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
        """The state saved in ``folder`` (default: the latest complete checkpoint), or None if there is none."""
        folder = folder or self.latest()
        if folder is None:
            return None
        # weights_only=False: the state holds NumPy and Python RNG states, written by this job itself.
        state = torch.load(folder / STATE_FILE, map_location=map_location, weights_only=False)
        log.info("resuming from %s", folder)
        return state

    def _prune(self) -> None:
        done = self.complete()
        for _, folder in done[: -self.keep]:
            shutil.rmtree(folder, ignore_errors=True)

    def _sweep_temporaries(self) -> None:
        """Remove folders left by writers that died mid-save (only rank 0 of one job writes here)."""
        for child in self.root.iterdir():
            if child.name.startswith(_TMP_PREFIX) and child.is_dir():
                log.info("removing incomplete checkpoint %s", child)
                shutil.rmtree(child, ignore_errors=True)
