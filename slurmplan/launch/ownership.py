"""Who holds a checkpoint folder: one live job at a time.

Two jobs that write one folder overwrite each other's checkpoints, and a new job that finds another job's
checkpoint would silently continue that job's training. So rank 0 claims the folder at start by writing
``owner.json`` (the Slurm job id, which a requeue keeps, or ``local`` with the host and process id outside
Slurm). A folder whose owner is another job that is still live (pending, running, ...) is refused with an error
that says what to do; a folder left by a job that has ended may be taken over, and the launcher says so. The
file is the user's bytes: one that does not parse is logged and replaced, never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmplan.launch.checkpoint import CheckpointError
from slurmplan.slurm import jobctl

log = logging.getLogger(__name__)

OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class Owner:
    """The job (``"1234"``, or ``"local"`` outside Slurm) and process that claimed a checkpoint folder."""

    job: str
    host: str
    pid: int

    @classmethod
    def of_this_process(cls, env: Mapping[str, str] | None = None) -> Owner:
        env = os.environ if env is None else env
        return cls(env.get("SLURM_JOB_ID") or "local", socket.gethostname(), os.getpid())

    def describe(self) -> str:
        return f"job {self.job}" if self.job != "local" else f"a local run (process {self.pid} on {self.host})"


def read_owner(root: Path) -> Owner | None:
    """The folder's owner, or None when there is none or the file is not one (logged)."""
    path = root / OWNER_FILE
    try:
        raw = json.loads(path.read_bytes())
        owner = Owner(str(raw["job"]), str(raw["host"]), int(raw["pid"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring unreadable %s (%s: %s)", path, type(exc).__name__, exc)
        return None
    return owner


def is_live(owner: Owner) -> bool:
    """Whether ``owner`` may still write: its Slurm job is pending or running, or its local process exists."""
    if owner.job == "local":
        if owner.host != socket.gethostname():
            return False
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return owner.pid != os.getpid()
    state = jobctl.job_state(owner.job)
    if state is None:
        log.warning("cannot ask Slurm whether job %s still runs; assuming it has ended", owner.job)
        return False
    return state in jobctl.LIVE_STATES


def claim(root: Path, me: Owner, live: Callable[[Owner], bool] = is_live) -> Owner | None:
    """Make ``me`` the owner of ``root``; returns the previous owner when another job left it (None otherwise).

    Raises :class:`CheckpointError` when another live job holds the folder.
    """
    previous = read_owner(root)
    same = previous is not None and previous.job == me.job and (me.job != "local" or previous.pid == me.pid)
    if previous is not None and not same and live(previous):
        raise CheckpointError(
            f"checkpoint_dir {root} is held by {previous.describe()}, which is still pending or running: two jobs"
            " in one folder overwrite each other's checkpoints; give this job its own folder (the templates use"
            " one per job id, e.g. CKPT=$HOME/checkpoints/$SLURM_JOB_NAME-$SLURM_JOB_ID)"
        )
    tmp = root / f".tmp-owner-{os.getpid()}"
    tmp.write_text(json.dumps({"job": me.job, "host": me.host, "pid": me.pid, "time": time.time()}))
    os.replace(tmp, root / OWNER_FILE)
    if previous is None or previous.job == me.job:
        return None  # this job again: a requeue keeps the job id, a local rerun resumes its own folder
    log.warning(
        "checkpoint_dir %s was last used by %s, which has ended; %s takes it over", root, previous.describe(),
        me.describe(),
    )  # fmt: skip
    return previous
