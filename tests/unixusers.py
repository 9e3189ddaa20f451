"""Real unprivileged Unix users for tests that must act as a cluster user, not as root.

Tests that check what a user can and cannot do (submit, change or release a job, write a report file, plant a
checkpoint) must do it as a real user: root bypasses every check they are about. :func:`ensure_user` creates a
system user with ``useradd`` (no home, no login shell, no password) once per host and is idempotent, so
several test sessions and engineers on one host can share the same name. :func:`run_as` runs one command as
that user through ``runuser`` with an explicit environment: nothing of root's environment leaks in except what
the caller passes (``SLURM_CONF`` of a dev cluster, say).

The user's commands must be able to read what they use: put job scripts and ``slurm.conf`` below a directory
that is world-readable (``tempfile.mkdtemp`` + ``chmod 0o755``, as ``tests/integration/conftest.py`` does;
pytest's own temporary directories are 0700).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_NAME = "slurmplan-t1"
"""The test user's name; a second user (``slurmplan-t2``) is for tests that need two users."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class UnixUser:
    name: str
    uid: int
    gid: int


def unusable_reason() -> str | None:
    """Why real users cannot be used here (not root, tools missing), or None."""
    if os.geteuid() != 0:
        return "creating a Unix user needs root"
    for tool in ("useradd", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def ensure_user(name: str = DEFAULT_NAME) -> UnixUser:
    """The unprivileged user ``name``, created (system user, own group, no home, nologin) if missing."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = None
    if entry is None:
        proc = subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode not in (0, 9):  # 9: created meanwhile by another session
            raise RuntimeError(f"useradd {name} failed ({proc.returncode}): {proc.stderr.strip()}")
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise RuntimeError(f"user {name} is root: refusing to use it as an unprivileged test user")
    return UnixUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def run_as(
    user: UnixUser | str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 60,
    input: str | bytes | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``user`` with exactly ``PATH``, ``HOME=/``, ``USER``/``LOGNAME`` and ``env``.

    ``runuser -u USER -- env -i ...`` so root's environment (``PYTHONPATH``, ``SLURM_*`` of the calling test)
    never reaches the user's command unless given in ``env``. Never raises on a non-zero exit: the caller
    asserts on the result (a refusal is often what the test wants).
    """
    name = user.name if isinstance(user, UnixUser) else user
    base = {"PATH": _PATH, "HOME": "/", "USER": name, "LOGNAME": name, "LANG": "C.UTF-8"}
    full = {**base, **(env or {})}
    cmd = ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in full.items()), *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=text, timeout=timeout, input=input, cwd=cwd, check=False)
