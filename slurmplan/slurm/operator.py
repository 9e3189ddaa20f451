"""The daemon's service user as a Slurm operator: what lets a non-root slurmplan hold, update, release, signal
and requeue other users' jobs and write their AdminComment.

Slurm grants those rights to root, to SlurmUser, and to users whose AdminLevel in slurmdbd is Operator or
Administrator; AdminLevel needs accounting. Checked on Slurm 22.05 with slurmdbd (tests/accounting): an Operator
may hold, update (GPU request, nodes), release, signal and requeue any job, but changing a job's AdminComment
needs Administrator (slurmctld's ``validate_super_user``: "Attempt to change admin_comment"), and the daemon
writes its decision there. ``site install --service-user NAME`` therefore grants ``Administrator`` unless told
``--admin-level Operator`` (see README "Running with accounting"). ``site check`` reads :func:`admin_level`.
Both go through ``sacctmgr`` and never raise for a refusal: the result says what happened and what to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from slurmplan.domain import ValidationError
from slurmplan.slurm.run import SlurmCommandError, run_slurm
from slurmplan.slurm.site import InstallResult

OPERATOR_LEVELS = ("Operator", "Administrator")
"""Levels that may hold, update, release, signal and requeue other users' jobs."""
ADMIN_COMMENT_LEVELS = ("Administrator",)
"""Levels that may also change a job's AdminComment (Slurm 22.05)."""


def accounting_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether the controller stores accounting in slurmdbd (AdminLevel exists only then)."""
    try:
        proc = run_slurm(["scontrol", "show", "config"], env, check=False, timeout=30)
    except SlurmCommandError:
        return False
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() == "accounting_storage/slurmdbd"
    return False


def admin_level(user: str, env: Mapping[str, str] | None = None) -> str:
    """The user's AdminLevel in slurmdbd ("" when unknown to it or when accounting cannot be read)."""
    try:
        proc = run_slurm(["sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel"], env, check=False)
    except SlurmCommandError:
        return ""
    return proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""


def operator_commands(user: str, exists: bool, level: str = "Operator") -> list[list[str]]:
    """``sacctmgr`` lines that give ``user`` AdminLevel ``level``: a user unknown to slurmdbd is added under the
    root account (it submits nothing, but slurmdbd keeps AdminLevel on a user record, which needs an
    association)."""
    if exists:
        return [["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", f"AdminLevel={level}"]]
    return [["sacctmgr", "-i", "add", "user", user, "Account=root", f"AdminLevel={level}"]]


def grant_operator(
    user: str,
    env: Mapping[str, str] | None = None,
    *,
    level: str = "Operator",
    dry_run: bool = False,
    apply: bool = True,
) -> InstallResult:
    """Give ``user`` AdminLevel ``level`` (Operator or Administrator) unless it has it or more (or is root).
    ``apply=False`` (an install below a prefix, not on the real system) and ``dry_run`` only report the command."""
    if level not in OPERATOR_LEVELS:
        raise ValidationError("admin level", level, f"one of {', '.join(OPERATOR_LEVELS)}", "site install")
    where = Path(f"sacctmgr:{user}")
    if user == "root":
        return InstallResult(where, "unchanged", note="root needs no Slurm admin level")
    if dry_run or not apply:
        add, modify = (" ".join(operator_commands(user, exists, level)[0]) for exists in (False, True))
        return InstallResult(where, "skipped", note=f"make it an operator with: {add} (if it exists: {modify})")
    current = admin_level(user, env)
    if current == level or current == "Administrator":
        return InstallResult(where, "unchanged", note=f"already a Slurm {current}")
    commands = operator_commands(user, bool(current), level)
    text = "; ".join(" ".join(c) for c in commands)
    if not accounting_enabled(env):
        return InstallResult(
            where, "skipped", note=f"no slurmdbd accounting here: run the daemon as root, or enable it and run {text}"
        )
    for argv in commands:
        proc = run_slurm(argv, env, check=False, timeout=60)
        if proc.returncode != 0:
            message = " ".join((proc.stderr or proc.stdout).split())
            return InstallResult(where, "skipped", note=f"sacctmgr refused: {message}; run: {text}")
    current = admin_level(user, env)
    if current != level:
        return InstallResult(where, "skipped", note=f"sacctmgr accepted but AdminLevel is {current!r}; run: {text}")
    return InstallResult(where, "updated", note=f"AdminLevel={level}")
