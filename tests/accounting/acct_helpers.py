"""Submitting and inspecting jobs of real unprivileged users on the session's accounting cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from conftest import ClusterHandle
from unixusers import run_as

SLURM_COMMANDS = ("scontrol", "scancel", "squeue", "sinfo", "sacctmgr", "sshare", "sprio", "sacct")
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sbatch_as(handle: ClusterHandle, user: str, script_text: str, *opts: str) -> int:
    """Submit ``script_text`` as ``user`` (a real Unix user of the layout's accounts); returns the job id."""
    if not script_text.startswith("#!"):
        script_text = "#!/bin/bash\n" + script_text
    handle._scripts += 1
    script = handle.jobs_dir / f"{user}-script{handle._scripts}.sh"
    script.write_text(script_text)
    os.chmod(script, 0o644)
    proc = run_as(user, ["sbatch", "--parsable", *opts, str(script)], handle.env, cwd=handle.jobs_dir)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch as {user} {' '.join(opts)} failed ({proc.returncode}): {proc.stderr.strip()}")
    job_id = int(proc.stdout.strip().split(";")[0])
    handle.submitted.append(job_id)
    return job_id


def sbatch_as_result(handle: ClusterHandle, user: str, *opts: str) -> subprocess.CompletedProcess:
    """``sbatch`` as ``user`` of a trivial script, returning the finished process (for refusals)."""
    script = handle.jobs_dir / "trivial.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    os.chmod(script, 0o644)
    return run_as(user, ["sbatch", "--parsable", *opts, str(script)], handle.env, cwd=handle.jobs_dir)


def job_field(handle: ClusterHandle, job_id: int, field: str) -> Any:
    job = handle.squeue_job(job_id)
    return None if job is None else job.get(field)


def commands_as(user: str, directory: Path, names: tuple[str, ...] = SLURM_COMMANDS) -> dict[str, str]:
    """An environment whose Slurm commands run as ``user``: a ``PATH`` directory of wrappers that ``runuser``
    the real command. A process given this environment (the daemon's backend in a test) acts on Slurm with
    ``user``'s identity, which is all Slurm's permission checks look at (munge carries the caller's uid). Used
    because the test interpreter may live where an unprivileged user cannot run it (a root-only pyenv)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        real = shutil.which(name, path=_SYSTEM_PATH)
        wrapper = directory / name
        wrapper.write_text(f'#!/bin/sh\nexec runuser -u {user} -- env SLURM_CONF="$SLURM_CONF" {real} "$@"\n')
        os.chmod(wrapper, 0o755)
    return {"PATH": f"{directory}:{_SYSTEM_PATH}"}
