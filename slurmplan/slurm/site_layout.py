"""The installed state layout that the daemon and the controller hooks share, and the interpreter they run.

Issue 24 items 8 and 9. Two writers meet in ``/var/lib/slurmplan`` and ``/var/log/slurmplan``: the daemon (its
service user) and the PrologSlurmctld/EpilogSlurmctld hooks, which slurmctld runs as SlurmUser. With both
folders the service user's own and mode 0755 the hooks could write nothing (their start/end events were lost
without a word), and where SlurmUser is root, root could create the journal first and lock the daemon out. So
``site install`` lays out, and ``site check`` verifies:

* the state folder ``slurmplan:<SlurmUser's group>`` mode 2771 (group-writable, setgid so every file made
  in it keeps that group; others may only pass through, to the report folder);
* the journal ``slurmplan:<group>`` 0660, created by the daemon (``UMask=0007`` in the setgid folder); a hook
  never creates it in a folder it does not own, so root or SlurmUser cannot create it first;
* the report folder 1733 (every job writes its own file; the sticky bit stops a user removing or replacing
  another's; nobody lists it), the plan folder SlurmUser's 0755, the log folder 2770.

The systemd units run as ``User=slurmplan`` ``Group=<group>`` with ``UMask=0007`` and these modes, so systemd
keeps the layout as it is. Every unit and hook runs one Python: install refuses one that anyone but root can
change (a user's virtualenv would run its code with the service's rights).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = Path("/var/lib/slurmplan")
LOG_DIR = Path("/var/log/slurmplan")


@dataclass(frozen=True)
class LayoutEntry:
    path: Path
    owner: str
    group: str
    mode: int
    is_dir: bool = True


def slurm_group(slurm_user: str) -> str:
    """The primary group of SlurmUser (the group the hooks write with); the user's name when unknown."""
    try:
        return grp.getgrgid(pwd.getpwnam(slurm_user).pw_gid).gr_name
    except KeyError:
        return slurm_user


def state_layout(service_user: str, slurm_user: str) -> list[LayoutEntry]:
    """Every path of the shared layout with its owner, group and mode (see the module docstring)."""
    group = slurm_group(slurm_user)
    return [
        LayoutEntry(STATE_DIR, service_user, group, 0o2771),
        LayoutEntry(STATE_DIR / "journal.db", service_user, group, 0o660, is_dir=False),
        LayoutEntry(STATE_DIR / "reports", service_user, group, 0o1733),
        LayoutEntry(STATE_DIR / "plans", slurm_user, group, 0o755),
        LayoutEntry(LOG_DIR, service_user, group, 0o2770),
    ]


def controller_slurm_user(env: dict[str, str] | None = None, default: str = "slurm") -> str:
    """SlurmUser of the running controller (``scontrol show config``), or ``default`` when it cannot be read."""
    from slurmplan.slurm.run import SlurmCommandError, run_slurm

    try:
        proc = run_slurm(["scontrol", "show", "config"], env, check=False, timeout=30)
    except SlurmCommandError:
        return default
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SlurmUser" and value.strip():
            return value.strip().split("(")[0]
    return default


def _ids(owner: str, group: str) -> tuple[int, int] | None:
    try:
        return pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError:
        return None


def ensure_state_layout(prefix: Path, service_user: str, slurm_user: str, *, dry_run: bool = False) -> list[str]:
    """Create what is missing and set owner, group and mode of every entry below ``prefix``; returns what it did
    (or would do). Owners are set only where both exist and this process may (root)."""
    done = []
    for e in state_layout(service_user, slurm_user):
        target = prefix / e.path.relative_to("/")
        ids = _ids(e.owner, e.group)
        done.append(f"{target} {e.owner}:{e.group} {stat.filemode(e.mode | (stat.S_IFDIR if e.is_dir else 0))}")
        if dry_run:
            continue
        if e.is_dir:
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            continue  # the journal: the daemon creates it
        if ids is not None and os.geteuid() == 0:
            os.chown(target, *ids, follow_symlinks=False)
        os.chmod(target, e.mode)
    return done


def check_state_layout(prefix: Path, service_user: str, slurm_user: str) -> list[str]:
    """What differs from the layout below ``prefix`` ([] when all is as it should be)."""
    problems = []
    for e in state_layout(service_user, slurm_user):
        target = prefix / e.path.relative_to("/")
        try:
            st = target.lstat()
        except FileNotFoundError:
            if e.is_dir:
                problems.append(f"{target} is missing")
            continue
        ids = _ids(e.owner, e.group)
        if ids is not None and (st.st_uid, st.st_gid) != ids:
            problems.append(f"{target} is owned by {st.st_uid}:{st.st_gid}, not {e.owner}:{e.group}")
        if stat.S_IMODE(st.st_mode) != e.mode:
            problems.append(f"{target} has mode {oct(stat.S_IMODE(st.st_mode))}, not {oct(e.mode)}")
    return problems


def untrusted_interpreter(executable: str | None = None, package: Path | None = None) -> str:
    """Why the Python (``sys.executable``) or the slurmplan package may not run root's or the operator's services
    ("" when they may): every file and folder on their paths must be root's and writable by no one else (a
    sticky folder such as /tmp counts as safe only as a parent of root's own folder)."""
    import slurmplan

    exe = Path(executable or sys.executable).resolve()
    pkg = (package or Path(slurmplan.__file__).parent).resolve()
    for path in (exe, pkg):
        for p in [path, *path.parents]:
            why = _unsafe(p, p is path)
            if why:
                return why
    for module in pkg.rglob("*.py"):
        why = _unsafe(module, True)
        if why:
            return why
    return ""


def _unsafe(p: Path, leaf: bool) -> str:
    st = p.stat()
    if st.st_uid != 0:
        return f"{p} is owned by uid {st.st_uid}, not root"
    sticky = bool(st.st_mode & stat.S_ISVTX) and not leaf
    if st.st_mode & stat.S_IWOTH and not sticky:
        return f"{p} can be written by every user (mode {stat.filemode(st.st_mode)})"
    if st.st_mode & stat.S_IWGRP and st.st_gid != 0 and not sticky:
        return f"{p} can be written by group {st.st_gid} (mode {stat.filemode(st.st_mode)})"
    return ""
