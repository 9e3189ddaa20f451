"""`slurmplan site install` as a service (user, units, watchdog timer) and `site uninstall`, below a scratch prefix.

systemd does not run in this container and the prefix is not ``/``, so nothing touches the real /etc: the
user creation and ``systemctl enable`` steps are reported with the command to run, which is what is checked.
"""

from __future__ import annotations

import json
import pwd
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "site", *args, "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_install_service_then_uninstall_cleanly(tmp_path: Path) -> None:
    conf = tmp_path / "etc/slurm"
    conf.mkdir(parents=True)
    (conf / "slurm.conf").write_text("ClusterName=prod\n")
    (conf / "plugstack.conf").write_text("# site plugins\n")
    (conf / "job_submit.lua").write_text("-- the site's old script\n")
    (tmp_path / "etc/slurmplan").mkdir(parents=True)
    (tmp_path / "etc/slurmplan/slurmplan.yaml").write_text("database: /var/lib/slurmplan/journal.db\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    results = _cli("install", "--prefix", str(tmp_path), "--no-build", "--service-user", "sp-test-nouser")
    by_dest = {r["dest"]: r for r in results}
    units = tmp_path / "etc/systemd/system"
    for name in ("slurmplan.service", "slurmplan-watchdog.service", "slurmplan-watchdog.timer"):
        assert (units / name).is_file(), name
    watchdog = (units / "slurmplan-watchdog.service").read_text()
    assert "User=sp-test-nouser" in watchdog and "watchdog --config /etc/slurmplan/slurmplan.yaml" in watchdog
    assert "User=sp-test-nouser" in (units / "slurmplan.service").read_text()
    assert "watchdog --config" in (tmp_path / "etc/cron.d/slurmplan").read_text()
    lua = (conf / "job_submit.lua").read_text()
    assert 'H.HEARTBEAT_FILE = "/var/lib/slurmplan/heartbeat"' in lua  # the lua fails open on the daemon's heartbeat
    user = by_dest["user:sp-test-nouser"]
    assert user["status"] == "skipped" and "useradd --system" in user["note"]
    enable = next(r for r in results if r["dest"].startswith("systemctl:enable"))
    assert "slurmplan-watchdog.timer" in enable["note"] and "systemctl enable --now" in enable["note"]
    assert (tmp_path / "var/lib/slurmplan").is_dir()
    assert not Path("/etc/systemd/system/slurmplan-watchdog.timer").exists()

    removed = _cli("uninstall", "--prefix", str(tmp_path), "--service-user", "sp-test-nouser")
    assert {r["status"] for r in removed} <= {"removed", "restored", "updated"}
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".slurmplan-bak." not in p.name}
    assert after == before  # every file as it was: old job_submit.lua back, include lines gone, units gone


def test_an_existing_service_user_may_release_held_jobs(tmp_path: Path) -> None:
    (tmp_path / "etc/slurm").mkdir(parents=True)
    results = {
        r["dest"]: r for r in _cli("install", "--prefix", str(tmp_path), "--no-build", "--service-user", "nobody")
    }
    assert results["user:nobody"]["status"] == "unchanged"
    uid = pwd.getpwnam("nobody").pw_uid
    assert f"H.DAEMON_UID = {uid}\n" in (tmp_path / "etc/slurm/job_submit.lua").read_text()
    assert "User=nobody" in (tmp_path / "etc/systemd/system/slurmplan-watchdog.service").read_text()


def test_uninstall_keeps_a_file_edited_since_install(tmp_path: Path) -> None:
    (tmp_path / "etc/slurm").mkdir(parents=True)
    _cli("install", "--prefix", str(tmp_path), "--no-build", "--no-service")
    edited = tmp_path / "etc/systemd/system/slurmplan.service"
    edited.write_text(edited.read_text() + "Environment=SITE=1\n")
    removed = {r["dest"]: r for r in _cli("uninstall", "--prefix", str(tmp_path))}
    assert removed["/etc/systemd/system/slurmplan.service"]["status"] == "unchanged" and edited.is_file()
    assert not (tmp_path / "etc/systemd/system/slurmplan-watchdog.timer").exists()
