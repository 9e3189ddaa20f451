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
import stat
import time
from pathlib import Path
from typing import Any

import torch

from slurmplan.domain import SlurmplanError

log = logging.getLogger(__name__)


class CheckpointError(SlurmplanError):
    """A checkpoint folder that cannot be written, or no checkpoint in it that can be read."""


def describe_mismatch(saved: dict[str, Any], current: dict[str, Any], limit: int = 5) -> str:
    """Which keys of a saved ``state_dict`` differ from the model's ("" when they match): missing, unexpected,
    and shapes that differ, each list cut to ``limit`` names."""

    def names(keys: list[str]) -> str:
        return ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")

    missing = [k for k in current if k not in saved]
    unexpected = [k for k in saved if k not in current]
    shapes = [
        f"{k} {tuple(saved[k].shape)} saved vs {tuple(current[k].shape)} now"
        for k in current
        if k in saved and hasattr(saved[k], "shape") and tuple(saved[k].shape) != tuple(current[k].shape)
    ]
    parts = []
    if missing:
        parts.append(f"{len(missing)} keys the model has but the checkpoint lacks ({names(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} keys the checkpoint has but the model lacks ({names(unexpected)})")
    if shapes:
        parts.append(f"{len(shapes)} shapes differ ({names(shapes)})")
    return "; ".join(parts)


def untrusted(path: Path) -> str:
    """Why ``path`` may not be loaded ("" when it may): it must be this user's own (a link is judged by what it
    points to and must be too) and writable by nobody else (no o+w; g+w only for this user's own group)."""
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != os.geteuid():
                return f"{path} is a link owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
            st = path.stat()
    except OSError as exc:
        return f"{path} cannot be checked ({exc.strerror or exc})"
    if st.st_uid != os.geteuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getegid()):
        return f"{path} can be written by other users (mode {stat.filemode(st.st_mode)}): chmod go-w it"
    return ""


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

    def check_writable(self) -> None:
        """Create the folder and write a probe file in it, so that a folder the job cannot write is found at
        start, not at the final save after all the work."""
        probe = self.root / f"{_TMP_PREFIX}probe-{os.getpid()}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(probe, "wb") as fh:
                fh.write(b"ok")
            probe.unlink()
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint_dir {self.root} is not writable ({exc.strerror or exc}): the job could not save; "
                "give a folder this job can write"
            ) from None

    def _read(self, folder: Path, map_location: str | torch.device) -> dict[str, Any]:
        path = folder / STATE_FILE
        for part in (self.root, folder, path):
            refusal = untrusted(part)
            if refusal:
                raise CheckpointError(f"checkpoint {path} not loaded: {refusal}")
        try:
            # weights_only=True: tensors and plain containers only, never pickled code (issue 24 item 5): a file
            # planted in the folder must not run code as the job's owner. RNG states are stored as tensors.
            state = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as exc:  # truncated: OSError/RuntimeError, garbage: UnpicklingError, empty: EOFError
            raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc})") from None
        return state

    def load_newest_intact(self, map_location: str | torch.device = "cpu") -> tuple[Path, dict[str, Any]] | None:
        """The newest checkpoint that reads, as (folder, state); None (logged: where it looked) when there is none.

        A checkpoint that cannot be read is named in a warning and the previous one is tried; if none reads,
        :class:`CheckpointError` names every file tried.
        """
        done = self.complete()
        if not done:
            why = "the folder does not exist" if not self.root.exists() else "no complete step-* checkpoint in it"
            log.info("starting fresh at step 0: looked for checkpoints in %s (%s)", self.root.resolve(), why)
            return None
        failures = []
        for _, folder in reversed(done):
            try:
                state = self._read(folder, map_location)
            except CheckpointError as exc:
                log.warning("%s; trying an older checkpoint", exc)
                failures.append(str(exc))
                continue
            if failures:
                log.warning(
                    "resuming from %s, the newest intact checkpoint (%d newer unreadable)", folder, len(failures)
                )
            else:
                log.info("resuming from %s", folder)
            return folder, state
        raise CheckpointError(f"no readable checkpoint in {self.root}: " + "; ".join(failures))

    def load(self, folder: Path | None = None, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
        """The state saved in ``folder`` (default: the newest intact checkpoint), or None if there is none."""
        if folder is None:
            found = self.load_newest_intact(map_location)
            return found[1] if found else None
        return self._read(folder, map_location)

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
