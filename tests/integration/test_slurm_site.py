"""The Slurm-side parts installed on a real local cluster: SPANK plugin, job_submit.lua, prolog/epilog.

One cluster for the module, configured as `slurmplan site install` would configure a controller: the plugin
built with ``make -C spank`` and loaded from plugstack.conf, ``JobSubmitPlugins=lua`` with site/job_submit.lua
beside slurm.conf, and PrologSlurmctld/EpilogSlurmctld running the scripts from prolog/ with their hook
environment file pointing at a journal in the test's directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ClusterHandle

from slurmplan.control.hook import write_plan_file
from slurmplan.control.journal import Journal
from slurmplan.domain import Cell, Plan
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devconf import ClusterPaths
from slurmplan.slurm.devlayout import load_layout
from slurmplan.slurm.hints import compose_admin_comment, format_decision
from slurmplan.slurm.site import SiteLayout, hook_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slurm

PLAN = Plan(dp=2, tp=1, pp=1, micro_batch=4, grad_accum=8, checkpointing=True)
ENV_SCRIPT = "env | grep ^SLURMPLAN_ | sort > {out}.batch\nsrun -n1 env | grep ^SLURMPLAN_ | sort > {out}.task\n"


class SiteCluster:
    def __init__(self, handle: ClusterHandle, tmp: Path) -> None:
        self.handle = handle
        self.journal = tmp / "journal.db"
        self.plan_dir = tmp / "plans"
        self.hook_log = tmp / "hook.log"
        self.out = tmp / "out"
        self.out.mkdir()

    def events(self, job_id: int) -> list[dict]:
        if not self.journal.exists():
            return []
        with Journal(self.journal) as j:
            return j.events(job_id)

    def wait_events(self, job_id: int, *names: str, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.events(job_id)
            if all(any(e["event"] == n for e in events) for n in names):
                return events
            time.sleep(0.3)
        log = self.hook_log.read_text() if self.hook_log.exists() else "<no hook log>"
        raise AssertionError(f"job {job_id}: events {names} not journaled; got {self.events(job_id)}; log: {log}")

    def release_with_plan(self, job_id: int, hints_text: str) -> None:
        decision = format_decision(Cell("a100", 2), PLAN, "round 1")
        comment = compose_admin_comment(hints_text, decision)
        self.handle.run("scontrol", "update", f"jobid={job_id}", f"AdminComment={comment}", check=True)
        self.handle.run("scontrol", "release", str(job_id), check=True)


def _usable() -> str | None:
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root"
    for tool in ("slurmctld", "slurmd", "sbatch", "make", "gcc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteCluster]:
    reason = _usable()
    if reason:
        pytest.skip(reason)
    subprocess.run(["make", "-C", str(ROOT / "spank")], check=True, capture_output=True, timeout=120)
    tmp = tmp_path_factory.mktemp("site")
    root = tmp_path_factory.mktemp("devcluster-site")
    conf_dir = ClusterPaths(root.resolve()).conf_dir
    plugstack = tmp / "plugstack.conf"
    plugstack.write_text(f"required {ROOT / 'spank/slurmplan_spank.so'} plan_dir={tmp / 'plans'}\n")
    env_file = tmp / "slurmplan-hook.env"
    layout = SiteLayout(command=f"{sys.executable} -m slurmplan.cli", database=tmp / "journal.db")
    env_file.write_text(hook_env(layout).replace("/var/log/slurmplan/hook.log", str(tmp / "hook.log")))
    overrides = {
        "slurm_conf_extra": [
            "JobSubmitPlugins=lua",
            f"PrologSlurmctld={conf_dir / 'prolog_slurmctld.sh'}",
            f"EpilogSlurmctld={conf_dir / 'epilog_slurmctld.sh'}",
        ],
        "conf_files": {
            "job_submit.lua": str(ROOT / "site/job_submit.lua"),
            "plugstack.conf": str(plugstack),
            "prolog_slurmctld.sh": str(ROOT / "prolog/prolog_slurmctld.sh"),
            "epilog_slurmctld.sh": str(ROOT / "prolog/epilog_slurmctld.sh"),
            "slurmplan-hook.env": str(env_file),
        },
    }
    cluster = DevCluster(load_layout(None, overrides), root)
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        yield SiteCluster(handle, tmp)
        handle.cancel_all()
    finally:
        cluster.down()


def test_sbatch_help_lists_plan_options(site: SiteCluster) -> None:
    out = site.handle.run("sbatch", "--help", check=True).stdout
    for option in ("--plan-model", "--plan-gpus", "--plan-gpu-types", "--plan-class", "--plan-workers"):
        assert option in out
    for option in ("--plan-batch", "--plan-seq", "--plan-steps", "--plan-deadline"):
        assert option in out
    assert "elastic range MIN:MAX" in out


def test_hinted_job_is_held_with_canonical_admin_comment(site: SiteCluster) -> None:
    job_id = site.handle.sbatch(
        "sleep 1",
        "--gres=gpu:a100:2",
        "--plan-model=llama2-7b",
        "--plan-gpus=2:4",
        "--plan-gpu-types=A100, v100",
        "--plan-class=guaranteed",
        "--plan-workers=4",
        "--plan-deadline=2030-01-02T03:04:00Z",
    )
    job = site.handle.wait_state(job_id, "PENDING")
    assert job["admin_comment"] == (
        "slurmplan:model=llama2-7b;min=2;max=4;types=a100,v100;class=guaranteed;workers=4;deadline=2030-01-02T03:04"
    )
    assert job["priority"] == 0
    assert job["state_reason"] in ("JobHeldUser", "JobHeldAdmin")


def test_comment_hints_are_accepted_and_spank_options_win(site: SiteCluster) -> None:
    job_id = site.handle.sbatch("sleep 1", "--comment", "slurmplan: gpus=2 ; steps=0100", "--plan-gpus=1")
    job = site.handle.wait_state(job_id, "PENDING")
    assert job["admin_comment"] == "slurmplan:gpus=1;steps=100"
    assert job["priority"] == 0


def test_job_without_hints_is_untouched(site: SiteCluster) -> None:
    job_id = site.handle.sbatch("true", "--comment", "just a note")
    job = site.handle.wait_state(job_id, "RUNNING", "COMPLETED", "COMPLETING")
    assert job["admin_comment"] == ""


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (("--plan-gpus=0:4",), 'invalid min "0": an integer from 1 to 999999999'),
        (("--plan-class=gold",), 'invalid class "gold": guaranteed or best-effort'),
        (("--plan-gpus=8", "--plan-workers=4"), 'invalid workers "4": at least gpus=8'),
        (("--comment", "slurmplan:gpu=2"), 'invalid key "gpu": one of model, gpus, min, max'),
    ],
)
def test_malformed_hint_is_refused_with_the_message(site: SiteCluster, opts: tuple[str, ...], message: str) -> None:
    script = site.handle.jobs_dir / "refused.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    proc = site.handle.run("sbatch", *opts, str(script))
    assert proc.returncode != 0
    assert message in proc.stderr


def test_tasks_see_plan_from_admin_comment_and_journal_records_start_and_end(site: SiteCluster) -> None:
    out = site.out / "comment"
    job_id = site.handle.sbatch(ENV_SCRIPT.format(out=out), "--gres=gpu:a100:2", "--plan-gpus=2")
    site.handle.wait_state(job_id, "PENDING")
    site.release_with_plan(job_id, "slurmplan:gpus=2")
    site.handle.wait_state(job_id, "COMPLETED", timeout=60)
    for suffix in ("batch", "task"):
        env = dict(line.split("=", 1) for line in Path(f"{out}.{suffix}").read_text().splitlines())
        assert env["SLURMPLAN_DP"] == "2" and env["SLURMPLAN_MICRO_BATCH"] == "4" and env["SLURMPLAN_GRAD_ACCUM"] == "8"
        assert env["SLURMPLAN_CHECKPOINTING"] == "1" and env["SLURMPLAN_ZERO_STAGE"] == "0"
        assert env["SLURMPLAN_GPU_TYPE"] == "a100" and env["SLURMPLAN_GPUS"] == "2"
        assert env["SLURMPLAN_PLAN_SOURCE"] == "admin-comment"
    events = site.wait_events(job_id, "job-start", "job-end")
    start = next(e for e in events if e["event"] == "job-start")
    end = next(e for e in events if e["event"] == "job-end")
    assert start["time"] <= end["time"]
    assert json.loads(end["detail"])["exit_state"] == "completed"


def test_plan_file_wins_and_failed_job_end_is_journaled(site: SiteCluster) -> None:
    out = site.out / "file"
    job_id = site.handle.sbatch(ENV_SCRIPT.format(out=out) + "exit 3\n", "--plan-gpus=1")
    site.handle.wait_state(job_id, "PENDING")
    write_plan_file(site.plan_dir, job_id, Cell("v100", 4), Plan(dp=1, tp=2, pp=2, zero_stage=2))
    site.release_with_plan(job_id, "slurmplan:gpus=1")
    site.handle.wait_state(job_id, "FAILED", timeout=60)
    env = dict(line.split("=", 1) for line in Path(f"{out}.task").read_text().splitlines())
    assert env["SLURMPLAN_PLAN_SOURCE"] == "file"
    assert (env["SLURMPLAN_GPU_TYPE"], env["SLURMPLAN_TP"], env["SLURMPLAN_PP"]) == ("v100", "2", "2")
    assert env["SLURMPLAN_ZERO_STAGE"] == "2"
    end = next(e for e in site.wait_events(job_id, "job-end") if e["event"] == "job-end")
    assert json.loads(end["detail"])["exit_state"].startswith("failed:3")
