"""The one place that runs Slurm's command-line tools.

Every call goes through :func:`run_slurm`, so a failure always looks the same to the caller: a
:class:`SlurmCommandError` that names the command, its exit status and its stderr, whether the command
failed, timed out or is not installed at all.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from slurmplan.domain import SlurmplanError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0


class SlurmCommandError(SlurmplanError):
    """A Slurm command failed; ``returncode`` is None when it could not be run or timed out."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str, stdout: str = "") -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        self.stdout = stdout
        status = "could not run" if returncode is None else f"exit status {returncode}"
        super().__init__(f"`{shlex.join(self.argv)}` failed ({status}): {self.stderr or '(no stderr)'}")


def slurm_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The process environment with ``env`` laid over it (e.g. a dev cluster's ``SLURM_CONF``)."""
    merged = dict(os.environ)
    if env:
        merged.update(env)
    return merged


def run_slurm(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    check: bool = True,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one Slurm command and return its completed process; raise :class:`SlurmCommandError` on failure.

    With ``check=False`` a non-zero exit status is returned rather than raised (a missing binary or a
    timeout still raises, since there is no answer to look at).
    """
    argv = [str(a) for a in argv]
    log.debug("running %s", shlex.join(argv))
    try:
        proc = subprocess.run(
            argv,
            env=slurm_env(env),
            capture_output=True,
            encoding="utf-8",
            errors="replace",  # Slurm prints users' bytes (job names, comments) as they are: never fail on them
            timeout=timeout,
            input=stdin,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SlurmCommandError(argv, None, f"{argv[0]}: command not found (is Slurm installed?)") from exc
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise SlurmCommandError(argv, None, f"timed out after {timeout:g} s. {err}") from exc
    if check and proc.returncode != 0:
        raise SlurmCommandError(argv, proc.returncode, proc.stderr, proc.stdout)
    return proc
