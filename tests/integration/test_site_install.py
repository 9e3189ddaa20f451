"""`slurmplan site install` into a scratch prefix, and the prolog/epilog hook outside Slurm.

No cluster needed: the install writes real files below a temporary prefix; the hook scripts run with the
environment slurmctld would give them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.control.hook import event_from_env, run_hook
from slurmplan.control.journal import Journal
from slurmplan.domain import ValidationError
from slurmplan.slurm.site import BACKUP_SUFFIX, SiteLayout, install_site, plan_env_for_job, render_job_submit

ROOT = Path(__file__).resolve().parents[2]
EVENT_OF = {"prolog_slurmctld.sh": "job-start", "epilog_slurmctld.sh": "job-end"}


def _statuses(results: list) -> dict[str, str]:
    return {str(r.dest): r.status for r in results}


def test_install_is_idempotent_and_backs_up_what_it_replaces(tmp_path: Path) -> None:
    conf = tmp_path / "etc/slurm"
    conf.mkdir(parents=True)
    (conf / "slurm.conf").write_text("ClusterName=prod\n")
    (conf / "plugstack.conf").write_text("include /etc/slurm/plugstack.conf.d/*.conf\n")
    (conf / "job_submit.lua").write_text("-- the site's old script\n")
    layout = SiteLayout(prefix=tmp_path, command="/opt/sp/bin/python -m slurmplan.cli")

    first = _statuses(install_site(layout, build=False))
    assert first["/etc/slurm/job_submit.lua"] == "updated"
    assert first["/etc/slurm/slurm.conf"] == "updated"
    assert first["/etc/slurm/plugstack.conf"] == "unchanged"  # already includes the .d directory
    assert first["/etc/systemd/system/slurmplan.service"] == "created"
    backups = list(conf.glob("job_submit.lua" + BACKUP_SUFFIX + "*"))
    assert [b.read_text() for b in backups] == ["-- the site's old script\n"]
    assert (conf / "slurm.conf").read_text().endswith("include /etc/slurm/slurmplan.conf\n")
    assert (conf / "slurmplan/prolog_slurmctld.sh").stat().st_mode & 0o777 == 0o755
    unit = (tmp_path / "etc/systemd/system/slurmplan.service").read_text()
    assert "ExecStart=/opt/sp/bin/python -m slurmplan.cli daemon --config /etc/slurmplan/slurmplan.yaml" in unit
    assert "@" not in (conf / "slurmplan.conf").read_text().replace("@SLURM", "")

    second = install_site(layout, build=False)
    assert {r.status for r in second} <= {"unchanged", "skipped"}
    assert (conf / "slurm.conf").read_text().count("include /etc/slurm/slurmplan.conf") == 1
    assert len(list(conf.glob("*" + BACKUP_SUFFIX + "*"))) == 2  # job_submit.lua and slurm.conf, once each


def test_install_fills_managed_partitions_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "etc/slurmplan").mkdir(parents=True)
    (tmp_path / "etc/slurmplan/slurmplan.yaml").write_text("managed_partitions: [gpu, debug]\n")
    subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "site", "install", "--prefix", str(tmp_path), "--no-build"],
        capture_output=True,
        check=True,
    )
    lua = (tmp_path / "etc/slurm/job_submit.lua").read_text()
    assert 'H.MANAGED_PARTITIONS = {"gpu", "debug"}' in lua
    with pytest.raises(ValidationError, match="managed_partitions"):
        render_job_submit(lua, ('x"; os.exit() --',))


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    results = install_site(SiteLayout(prefix=tmp_path), dry_run=True, build=False)
    assert any(r.status == "created" for r in results)
    assert list(tmp_path.iterdir()) == []


def test_cli_install_reports_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "site", "install", "--prefix", str(tmp_path), "--no-build", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(proc.stdout)
    assert {"dest": "/etc/slurm/job_submit.lua", "status": "created", "backup": None, "note": ""} in rows


def test_hook_journals_start_and_end_with_exit_state(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "a100n[1-2]", "SLURM_JOB_RESTART_COUNT": "1"}
    assert run_hook("job-start", db, env) == 0
    assert run_hook("job-end", db, {**env, "SLURM_JOB_EXIT_CODE2": "3:0", "SLURM_JOB_EXIT_CODE": "768"}) == 0
    with Journal(db) as j:
        events = j.events.of(42)
    assert [e["event"] for e in events] == ["job-start", "job-end"]
    assert json.loads(events[0]["detail"]) == {"nodes": "a100n[1-2]", "restart_count": "1"}
    assert json.loads(events[1]["detail"])["exit_state"] == "failed:3:0"


def test_hook_never_fails(tmp_path: Path) -> None:
    assert run_hook("job-start", tmp_path / "j.db", {}) == 0  # no job id
    (tmp_path / "dir.db").mkdir()
    assert run_hook("job-start", tmp_path / "dir.db", {"SLURM_JOB_ID": "7"}) == 0  # database unusable
    with pytest.raises(ValidationError, match="SLURM_JOB_ID"):
        event_from_env("job-start", {"SLURM_JOB_ID": "abc"})
    assert event_from_env("job-end", {"SLURM_JOB_ID": "9", "SLURM_JOB_EXIT_CODE": "0"}).exit_state == "completed"


@pytest.mark.parametrize("script", ["prolog_slurmctld.sh", "epilog_slurmctld.sh"])
def test_prolog_scripts_record_and_exit_zero_even_when_slurmplan_is_missing(tmp_path: Path, script: str) -> None:
    here = tmp_path / "conf"
    here.mkdir()
    target = here / script
    target.write_bytes((ROOT / "prolog" / script).read_bytes())
    target.chmod(0o755)
    env_file = here / "slurmplan-hook.env"
    base = {"SLURM_JOB_ID": "11", "SLURM_JOB_EXIT_CODE2": "0:0"}  # what slurmctld gives: no PATH, no HOME

    env_file.write_text(f"SLURMPLAN_CMD='{sys.executable} -m slurmplan.cli'\nSLURMPLAN_DATABASE={tmp_path}/j.db\n")
    env_file.write_text(env_file.read_text() + f"SLURMPLAN_HOOK_LOG={tmp_path}/hook.log\n")
    assert subprocess.run([str(target)], env=base, timeout=60).returncode == 0
    with Journal(tmp_path / "j.db") as j:
        assert [e["event"] for e in j.events.of(11)] == [EVENT_OF[script]]

    env_file.write_text(f"SLURMPLAN_CMD=/nonexistent/slurmplan\nSLURMPLAN_HOOK_LOG={tmp_path}/hook2.log\n")
    assert subprocess.run([str(target)], env=base, timeout=60).returncode == 0
    assert "nonexistent" in (tmp_path / "hook2.log").read_text()


def test_plan_env_from_admin_comment() -> None:
    comment = "slurmplan:gpus=8 || slurmplan: h100x8 dp2 tp4 pp1 mb2 ga8 off | round 17 | lease until 12:06"
    env = plan_env_for_job(1, comment)
    assert env["SLURMPLAN_TP"] == "4" and env["SLURMPLAN_OFFLOAD"] == "1" and env["SLURMPLAN_GPU_TYPE"] == "h100"
    assert plan_env_for_job(1, "slurmplan:gpus=8") == {}


def test_cli_checks_hints() -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "slurmplan.cli", "site", "hints", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    ok = cli("slurmplan: types=A100 ;gpus=02", "--json")
    assert ok.returncode == 0
    data = json.loads(ok.stdout)
    assert data["canonical"] == "slurmplan:gpus=2;types=a100" and data["job_class"] == "best-effort"
    bad = cli("slurmplan:gpus=0")
    assert bad.returncode == 1
    assert "invalid gpus '0': an integer from 1 to 999999999" in bad.stderr


def test_install_fills_known_models_and_types_from_the_catalogs(tmp_path: Path) -> None:
    """job_submit.lua refuses hints naming a model or GPU type outside these lists (test_slurm_site.py)."""
    install_site(SiteLayout(prefix=tmp_path), build=False)
    lua = (tmp_path / "etc/slurm/job_submit.lua").read_text()
    models = next(line for line in lua.splitlines() if line.startswith("H.KNOWN_MODELS = "))
    types = next(line for line in lua.splitlines() if line.startswith("H.KNOWN_TYPES = "))
    assert '"llama2-7b"' in models and '"gpt2"' in models and '"a100"' in types and '"tesla-t4"' in types
    with pytest.raises(ValidationError, match="gpu type"):
        render_job_submit((ROOT / "site/job_submit.lua").read_text(), (), (), ('a"..os.exit()',))
