"""Run ``sacct`` for a site's job history (the only place ``trace import`` starts a process).

Output is returned as text decoded with replacement characters: job names and comments are user bytes, and one
undecodable name must not stop a month's import (``history/sacct.py`` parses it and skips bad records).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from dataclasses import dataclass

from slurmplan.slurm.run import SlurmCommandError, slurm_env

log = logging.getLogger(__name__)

PARSABLE_FIELDS = (
    "JobIDRaw", "Account", "User", "Partition", "State", "Submit", "Eligible", "Start", "End", "ElapsedRaw",
    "TimelimitRaw", "AllocTRES", "ReqTRES", "NNodes", "NodeList", "AdminComment",
)  # fmt: skip
"""``--parsable2`` columns; the admin comment, the one free-text column, last (``history/sacct.py`` joins a
``|`` inside it back)."""
TIMEOUT_S = 600.0
"""A month of a large site's accounting can take minutes to come out of slurmdbd."""


@dataclass(frozen=True)
class HistoryQuery:
    """Which jobs to ask slurmdbd for (sacct's own syntax for times: ``2026-01-31``, ``now-30days``)."""

    start: str = "now-30days"
    end: str = "now"
    partitions: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    parsable: bool = False

    def argv(self) -> list[str]:
        argv = ["sacct", "--allusers", "--starttime", self.start, "--endtime", self.end]
        if self.partitions:
            argv += ["--partition", ",".join(self.partitions)]
        if self.accounts:
            argv += ["--accounts", ",".join(self.accounts)]
        if self.parsable:
            return [*argv, "--allocations", "--parsable2", "--format", ",".join(PARSABLE_FIELDS)]
        return [*argv, "--json"]


def read_history(query: HistoryQuery, timeout: float = TIMEOUT_S) -> str:
    """sacct's output for ``query``; a failing sacct (no slurmdbd, bad time) raises with sacct's own words."""
    argv = query.argv()
    log.info("running %s", shlex.join(argv))
    try:
        proc = subprocess.run(argv, env=slurm_env(None), capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise SlurmCommandError(argv, None, "sacct: command not found (is Slurm installed?)") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmCommandError(argv, None, f"timed out after {timeout:g} s") from exc
    out = proc.stdout.decode("utf-8", errors="replace")
    err = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        raise SlurmCommandError(argv, proc.returncode, err, out)
    return out
