"""The Slurm-side parts installed on a real local cluster: SPANK plugin, job_submit.lua, prolog/epilog.

The cluster (fixture ``site``, see site_cluster.py) is configured as `slurmplan site install` configures a
controller.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from site_cluster import SiteCluster

from slurmplan.control.hook import write_plan_file
from slurmplan.domain import Cell, Plan
from slurmplan.formats import compose_admin_comment, format_decision

pytestmark = pytest.mark.slurm

PLAN = Plan(dp=2, tp=1, pp=1, micro_batch=4, grad_accum=8, checkpointing=True)
ENV_SCRIPT = "env | grep ^SLURMPLAN_ | sort > {out}.batch\nsrun -n1 env | grep ^SLURMPLAN_ | sort > {out}.task\n"


def release_with_plan(site: SiteCluster, job_id: int, hints_text: str) -> None:
    site.release_with(job_id, compose_admin_comment(hints_text, format_decision(Cell("a100", 2), PLAN, "round 1")))


def test_sbatch_help_lists_plan_options(site: SiteCluster) -> None:
    out = site.run("sbatch", "--help", check=True).stdout
    for option in ("--plan-model", "--plan-gpus", "--plan-gpu-types", "--plan-class", "--plan-workers"):
        assert option in out
    for option in ("--plan-batch", "--plan-seq", "--plan-stack", "--plan-steps", "--plan-deadline"):
        assert option in out
    assert "elastic range MIN:MAX" in out


def test_hinted_job_is_held_with_canonical_admin_comment(site: SiteCluster) -> None:
    job_id = site.sbatch(
        "sleep 1",
        "--gres=gpu:a100:2",
        "--plan-model=llama2-7b",
        "--plan-gpus=2:4",
        "--plan-gpu-types=A100, v100",
        "--plan-class=guaranteed",
        "--plan-workers=4",
        "--plan-deadline=2030-01-02T03:04:00Z",
    )
    job = site.wait_state(job_id, "PENDING")
    assert job["admin_comment"] == (
        "slurmplan:model=llama2-7b;min=2;max=4;types=a100,v100;class=guaranteed;workers=4;deadline=2030-01-02T03:04"
        ";asked=a100:2"
    )
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:2", "a100")  # movable: type is a preference
    assert job["priority"] == 0
    assert job["state_reason"] in ("JobHeldUser", "JobHeldAdmin")
    site.run("scancel", str(job_id), check=True)


def test_comment_hints_are_accepted_and_spank_options_win(site: SiteCluster) -> None:
    job_id = site.sbatch("sleep 1", "--comment", "slurmplan: gpus=2 ; steps=0100", "--plan-gpus=1")
    job = site.wait_state(job_id, "PENDING")
    assert job["admin_comment"] == "slurmplan:gpus=1;steps=100"
    assert job["priority"] == 0
    site.run("scancel", str(job_id), check=True)


def test_unmanaged_hints_are_recorded_but_not_held(site: SiteCluster) -> None:
    job_id = site.sbatch("true", "--plan-model=bert-large", "--plan-managed=no")
    job = site.wait_state(job_id, "RUNNING", "COMPLETING", "COMPLETED")
    assert job["admin_comment"] == "slurmplan:model=bert-large;managed=no"


def test_job_in_a_managed_partition_is_held_without_hints(site: SiteCluster) -> None:
    job_id = site.sbatch("true", "--partition=debug")
    job = site.wait_state(job_id, "PENDING")
    assert (job["admin_comment"], job["priority"]) == ("slurmplan:", 0)
    site.run("scancel", str(job_id), check=True)


def test_job_without_hints_is_untouched(site: SiteCluster) -> None:
    job_id = site.sbatch("true", "--comment", "just a note")
    job = site.wait_state(job_id, "RUNNING", "COMPLETED", "COMPLETING")
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
    script = site.jobs_dir / "refused.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    proc = site.run("sbatch", *opts, str(script))
    assert proc.returncode != 0
    assert message in proc.stderr


def test_tasks_see_plan_from_admin_comment_and_journal_records_start_and_end(site: SiteCluster) -> None:
    out = site.tmp / "comment"
    job_id = site.sbatch(ENV_SCRIPT.format(out=out), "--gres=gpu:a100:2", "--plan-gpus=2")
    site.wait_state(job_id, "PENDING")
    release_with_plan(site, job_id, "slurmplan:gpus=2")
    site.wait_state(job_id, "COMPLETED", timeout=60)
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
    out = site.tmp / "file"
    job_id = site.sbatch(ENV_SCRIPT.format(out=out) + "exit 3\n", "--plan-gpus=1")
    site.wait_state(job_id, "PENDING")
    write_plan_file(site.plan_dir, job_id, Cell("v100", 4), Plan(dp=1, tp=2, pp=2, zero_stage=2))
    release_with_plan(site, job_id, "slurmplan:gpus=1")
    site.wait_state(job_id, "FAILED", timeout=60)
    env = dict(line.split("=", 1) for line in Path(f"{out}.task").read_text().splitlines())
    assert env["SLURMPLAN_PLAN_SOURCE"] == "file"
    assert (env["SLURMPLAN_GPU_TYPE"], env["SLURMPLAN_TP"], env["SLURMPLAN_PP"]) == ("v100", "2", "2")
    assert env["SLURMPLAN_ZERO_STAGE"] == "2"
    end = next(e for e in site.wait_events(job_id, "job-end") if e["event"] == "job-end")
    assert json.loads(end["detail"])["exit_state"].startswith("failed:3")


def test_owner_cannot_release_a_held_managed_job(site: SiteCluster) -> None:
    script = site.jobs_dir / "nobody.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    script.chmod(0o755)
    sub = site.run("su", "nobody", "-s", "/bin/sh", "-c", f"cd /tmp && sbatch --parsable --plan-gpus=1 {script}")
    assert sub.returncode == 0, sub.stderr
    job_id = int(sub.stdout.strip())
    site.submitted.append(job_id)
    site.wait_state(job_id, "PENDING")
    refused = site.run("su", "nobody", "-s", "/bin/sh", "-c", f"scontrol release {job_id}")
    assert refused.returncode != 0
    assert site.job(job_id)["priority"] == 0
    site.run("scontrol", "release", str(job_id), check=True)  # root (the daemon) may
    site.wait_state(job_id, "RUNNING", "COMPLETING", "COMPLETED")


def test_plan_file_writable_by_others_is_ignored(site: SiteCluster) -> None:
    out = site.tmp / "unsafe"
    job_id = site.sbatch(ENV_SCRIPT.format(out=out), "--plan-gpus=1")
    site.wait_state(job_id, "PENDING")
    write_plan_file(site.plan_dir, job_id, Cell("t4", 1), Plan(tp=1)).chmod(0o666)
    release_with_plan(site, job_id, "slurmplan:gpus=1")
    site.wait_state(job_id, "COMPLETED", timeout=60)
    env = dict(line.split("=", 1) for line in Path(f"{out}.task").read_text().splitlines())
    assert (env["SLURMPLAN_PLAN_SOURCE"], env["SLURMPLAN_GPU_TYPE"]) == ("admin-comment", "a100")


# ------------------------------------------------------------------------- typed requests made movable (issue 14)


def test_typed_request_with_constraint_keeps_the_users_constraint(site: SiteCluster) -> None:
    """The type is joined to the user's constraint (issue 24 item 7): dropping it ran the job on any type."""
    job_id = site.sbatch("sleep 1", "--gres=gpu:v100:1", "--constraint=nvlink", "--comment", "slurmplan:gpus=1")
    job = site.wait_state(job_id, "PENDING")
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:1", "nvlink&v100")
    assert job["admin_comment"] == "slurmplan:gpus=1;asked=v100:1"
    site.run("scancel", str(job_id), check=True)


@pytest.mark.parametrize("opts", [("--comment", "just a note"), ("--plan-managed=no",)])
def test_unmanaged_typed_request_is_never_rewritten(site: SiteCluster, opts: tuple[str, ...]) -> None:
    job_id = site.sbatch("sleep 30", "--gres=gpu:t4:1", *opts)
    job = site.wait_state(job_id, "PENDING", "RUNNING", "COMPLETING", "COMPLETED")
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:t4:1", "")
    assert "asked=" not in job["admin_comment"]
    site.run("scancel", str(job_id), check=True)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (("--plan-gpu-types=a100,z9000",), 'invalid types "z9000": GPU types among a10, a100'),
        (("--comment", "slurmplan:model=llama2_7B;types=tesla-t4"), None),  # aliases, any case: accepted
        (("--plan-model=my-own-net",), None),  # not in the catalog: scheduled from a default (issue 29 item 2)
    ],
)
def test_unknown_type_is_refused_at_submission_any_model_accepted(
    site: SiteCluster, opts: tuple[str, ...], message: str | None
) -> None:
    script = site.jobs_dir / "known.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    before = site.run("squeue", "-h", "-o", "%i", check=True).stdout.split()
    proc = site.run("sbatch", "--parsable", *opts, str(script))
    if message is None:
        assert proc.returncode == 0, proc.stderr
        site.run("scancel", proc.stdout.strip().split(";")[0], check=True)
        return
    assert proc.returncode != 0
    assert f"slurmplan: hints: {message}" in proc.stderr
    after = site.run("squeue", "-h", "-o", "%i", check=True).stdout.split()
    assert set(after) <= set(before)  # nothing submitted (an earlier test's job may have left the queue meanwhile)


def test_typed_request_of_a_job_that_needs_its_type_is_left_typed(site: SiteCluster) -> None:
    job_id = site.sbatch("sleep 1", "--gres=gpu:v100:1", "--plan-gpu-types=v100", "--plan-gpus=1")
    job = site.wait_state(job_id, "PENDING")
    assert (job["tres_per_node"], job["features"]) == ("gres:gpu:v100:1", "")
    assert job["admin_comment"] == "slurmplan:gpus=1;types=v100"
    site.run("scancel", str(job_id), check=True)


def test_a_requeue_is_journaled_as_requeued_not_completed(site: SiteCluster) -> None:
    """Issue 29 item 10: the epilog of a requeued run exits 0:0 like a completed one; the journal said
    ``completed``. A requeue is told apart by the restart count the epilog already sees."""
    job_id = site.sbatch("sleep 120", "--plan-gpus=1", "--requeue")
    site.wait_state(job_id, "PENDING")
    release_with_plan(site, job_id, "slurmplan:gpus=1")
    site.wait_state(job_id, "RUNNING", timeout=60)
    site.wait_events(job_id, "job-start")
    site.run("scontrol", "requeuehold", str(job_id), check=True)
    try:
        end = next(e for e in site.wait_events(job_id, "job-end") if e["event"] == "job-end")
        assert json.loads(end["detail"])["exit_state"] == "requeued"
    finally:
        site.run("scancel", str(job_id))
