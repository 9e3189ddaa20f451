"""slurmplan as a system service: the dedicated user, enabling the systemd units, and ``site uninstall``.

``site install`` (``site.py``) writes the unit files; this module does what comes after: create the service user
(``useradd --system``) and ``systemctl enable --now`` the daemon and the watchdog timer. Both only happen on a
real root (``prefix`` = ``/``) with systemd running; otherwise each step is reported with the command to run, so
a test (or an admin preparing an image) can install below a directory without touching the real ``/etc``.
``uninstall`` removes what install wrote (only files still as slurmplan wrote them; an edited one is kept and
reported), takes the two ``include`` lines back out, and disables the units.
"""

from __future__ import annotations

import logging
import pwd
import shutil
import subprocess
from pathlib import Path

from slurmplan.slurm.site import BACKUP_SUFFIX, InstallResult, SiteLayout, site_files, source_root
from slurmplan.slurm.site_layout import STATE_DIR, ensure_state_layout

log = logging.getLogger(__name__)

UNITS_TO_ENABLE = ("slurmplan.service", "slurmplan-watchdog.timer")


def systemd_running(layout: SiteLayout) -> bool:
    return layout.prefix == Path("/") and Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def ensure_service_user(layout: SiteLayout, *, dry_run: bool = False) -> InstallResult:
    """Create the service user with ``useradd --system`` when missing (only on a real root)."""
    name = layout.service_user
    argv = ["useradd", "--system", "--home-dir", str(STATE_DIR), "--no-create-home", "--shell", "/usr/sbin/nologin"]
    argv.append(name)
    where = Path(f"user:{name}")
    if name == "root" or _user_exists(name):
        return InstallResult(where, "unchanged", note="user exists")
    if layout.prefix != Path("/") or dry_run:
        return InstallResult(where, "skipped", note=f"create it with: {' '.join(argv)}")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return InstallResult(where, "skipped", note=f"useradd failed: {proc.stderr.strip()}; run: {' '.join(argv)}")
    return InstallResult(where, "created", note="system user (give it Slurm Operator rights, see `site check`)")


def _systemctl(layout: SiteLayout, *args: str, dry_run: bool) -> InstallResult:
    argv = ["systemctl", *args]
    where = Path(f"systemctl:{' '.join(args)}")
    if dry_run or not systemd_running(layout):
        return InstallResult(where, "skipped", note=f"systemd not running here; run: {' '.join(argv)}")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return InstallResult(where, "skipped", note=f"failed: {proc.stderr.strip()}")
    return InstallResult(where, "updated")


def enable_units(layout: SiteLayout, *, dry_run: bool = False) -> list[InstallResult]:
    """``daemon-reload`` then ``enable --now`` the daemon and the watchdog timer (or say what to run)."""
    return [
        _systemctl(layout, "daemon-reload", dry_run=dry_run),
        _systemctl(layout, "enable", "--now", *UNITS_TO_ENABLE, dry_run=dry_run),
    ]


def install_service(layout: SiteLayout, *, dry_run: bool = False, create_user: bool = True) -> list[InstallResult]:
    """The service user (unless created already), its state directory below the prefix, and the enabled units.

    ``site install`` creates the user before it renders job_submit.lua (which needs the user's uid), then calls
    this with ``create_user=False`` after the files are in place.
    """
    results = [ensure_service_user(layout, dry_run=dry_run)] if create_user else []
    for line in ensure_state_layout(layout.prefix, layout.service_user, layout.slurm_user, dry_run=dry_run):
        path, _, note = line.partition(" ")
        results.append(InstallResult(Path(path), "updated", note=f"state layout {note}"))
    return results + enable_units(layout, dry_run=dry_run)


_MARKER = "# added by slurmplan site install"


def _without_added_lines(text: str) -> str:
    """``text`` minus every line install appended (each follows the ``# added by slurmplan site install`` marker)."""
    out: list[str] = []
    skip_next = False
    for line in text.splitlines():
        if skip_next:
            skip_next = False
            continue
        if line.strip() == _MARKER:
            skip_next = True
            continue
        out.append(line)
    return "\n".join(out) + ("\n" if out else "")


def uninstall_site(layout: SiteLayout, *, dry_run: bool = False) -> list[InstallResult]:
    """Disable the units, remove the files install wrote (unless edited since), take the include lines out."""
    results = [] if dry_run or not systemd_running(layout) else [
        _systemctl(layout, "disable", "--now", *UNITS_TO_ENABLE, "slurmplan-tick.timer", dry_run=dry_run)
    ]  # fmt: skip
    root = source_root()
    plugin = root / "spank" / "slurmplan_spank.so"
    for item in site_files(layout, root, plugin if plugin.is_file() else None):
        target = layout.at(item.dest)
        if not target.is_file():
            continue
        if target.read_bytes() != item.content and item.source not in ("spank/",):
            results.append(InstallResult(item.dest, "unchanged", note="edited since install: kept, remove it yourself"))
            continue
        backups = sorted(target.parent.glob(target.name + BACKUP_SUFFIX + "*"))
        if not dry_run:
            target.unlink()
            if backups:  # the site's own file from before the first install comes back
                shutil.copy2(backups[0], target)
        results.append(InstallResult(item.dest, "restored" if backups else "removed", backups[0] if backups else None))
    for dest in (layout.slurm_conf_dir / "slurm.conf", layout.slurm_conf_dir / "plugstack.conf"):
        target = layout.at(dest)
        text = target.read_text() if target.is_file() else ""
        new = _without_added_lines(text)
        if new != text:
            if not dry_run:
                target.write_text(new)
            results.append(InstallResult(dest, "updated", note="include line removed"))
    if systemd_running(layout) and not dry_run:
        results.append(_systemctl(layout, "daemon-reload", dry_run=dry_run))
    log.info("uninstalled; backups (*%s*) and the journal in %s are kept", BACKUP_SUFFIX, STATE_DIR)
    return results
