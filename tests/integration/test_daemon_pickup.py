"""End to end on the site cluster: a job submitted with plan options is held by job_submit.lua, the real
`slurmplan tick` picks it up, writes its decision after the hints and releases it, the SPANK plugin hands the
plan to the tasks, and the prolog/epilog journal start and end in the same journal the daemon writes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from site_cluster import SiteCluster

from slurmplan.formats import find_hints, parse_decision, split_admin_comment

pytestmark = pytest.mark.slurm


def tick(site: SiteCluster, config: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "tick", "--config", str(config)],
        env=site.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_daemon_picks_up_a_hinted_job_and_its_tasks_get_the_plan(site: SiteCluster) -> None:
    config = site.tmp / "slurmplan.yaml"
    config.write_text(f"database: {site.journal}\nreport_dir: {site.tmp / 'reports'}\nround_s: 1\n")
    out = site.tmp / "daemon-env"
    job_id = site.sbatch(
        f"srun -n1 env | grep ^SLURMPLAN_ | sort > {out}\n",
        "--gres=gpu:v100:2",
        "--plan-model=llama2-7b",
        "--plan-gpus=2",
        "--plan-gpu-types=v100",
        "--plan-batch=64",
    )
    assert site.wait_state(job_id, "PENDING")["priority"] == 0
    outputs = []
    for _ in range(10):
        outputs.append(tick(site, config))
        job = site.job(job_id)
        if job and job["job_state"] != "PENDING":
            break
        time.sleep(1.2)
    job = site.wait_state(job_id, "COMPLETED", timeout=60)
    comment = split_admin_comment(job["admin_comment"])
    assert comment.hints == "slurmplan:model=llama2-7b;gpus=2;types=v100;batch=64", outputs  # needs v100: typed
    assert find_hints(job["admin_comment"]).global_batch == 64
    cell, plan = parse_decision(job["admin_comment"])
    env = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert env["SLURMPLAN_GPU_TYPE"] == cell.gpu_type == "v100"
    assert (env["SLURMPLAN_GPUS"], env["SLURMPLAN_TP"], env["SLURMPLAN_GRAD_ACCUM"]) == (
        str(cell.gpus),
        str(plan.tp),
        str(plan.grad_accum),
    )
    events = site.wait_events(job_id, "job-start", "job-end")
    assert json.loads(events[-1]["detail"])["exit_state"] == "completed"


@pytest.mark.parametrize("request_opts", [("--gres=gpu:a100:2",), ("--gres=gpu:2", "--constraint=a100")])
def test_typed_and_constraint_managed_jobs_start_on_another_type_when_theirs_is_full(
    site: SiteCluster, request_opts: tuple[str, ...]
) -> None:
    """Issue 14: job_submit.lua turns --gres=gpu:a100:2 into gpu:2 + constraint a100, and a type named only in
    --constraint is a preference, so with every A100 taken the daemon starts the job on another type."""
    config = site.tmp / "slurmplan-move.yaml"
    config.write_text(f"database: {site.journal}\nreport_dir: {site.tmp / 'reports'}\nround_s: 1\n")
    blockers = [site.sbatch("sleep 300", "--gres=gpu:a100:4", "--comment", "not managed") for _ in range(2)]
    for b in blockers:
        site.wait_state(b, "RUNNING")
    job_id = site.sbatch("sleep 300", *request_opts, "--comment", "slurmplan:model=llama2-7b;gpus=2")
    assert site.wait_state(job_id, "PENDING")["priority"] == 0
    outputs = []
    try:
        for _ in range(12):
            outputs.append(tick(site, config))
            job = site.job(job_id)
            if job and job["job_state"] == "RUNNING":
                break
            time.sleep(1.2)
        job = site.wait_state(job_id, "RUNNING", timeout=30)
        assert not job["nodes"].startswith("a100"), (job["nodes"], outputs)
        assert job["tres_per_node"].count(":") == 2  # still untyped: gres:gpu:N, N as the daemon decided
    finally:
        site.run("scancel", str(job_id), *map(str, blockers))


def _tick_until_running(site: SiteCluster, config: Path, job_id: int, ticks: int = 10) -> list[str]:
    outputs = []
    for _ in range(ticks):
        outputs.append(tick(site, config))
        job = site.job(job_id)
        if job and job["job_state"] != "PENDING":
            break
        time.sleep(1.2)
    return outputs


def test_a_job_without_a_model_is_started_from_the_default_not_held_forever(site: SiteCluster) -> None:
    """Issue 29 item 2: --plan-gpus=1:4 --plan-gpu-types=v100,t4 --plan-workers=8 and no model was refused every
    tick ("invalid model None") and stayed held with GPUs idle; it is now priced from the documented default."""
    config = site.tmp / "slurmplan-nomodel.yaml"
    config.write_text(f"database: {site.journal}\nreport_dir: {site.tmp / 'reports'}\nround_s: 1\n")
    job_id = site.sbatch(
        "sleep 1\n", "--gres=gpu:v100:1", "--plan-gpus=1:4", "--plan-gpu-types=v100,t4", "--plan-workers=8"
    )
    assert site.wait_state(job_id, "PENDING")["priority"] == 0
    outputs = _tick_until_running(site, config, job_id)
    job = site.wait_state(job_id, "RUNNING", "COMPLETED", timeout=60)
    assert "invalid model" not in "".join(outputs)
    cell, plan = parse_decision(job["admin_comment"])
    assert cell.gpu_type in ("v100", "t4") and plan.dp == cell.gpus
