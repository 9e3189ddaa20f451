"""``slurmplan status``: the summary on recorded 22.05 output, and the real CLI against the dev cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.slurm.backend import snapshot_from_json
from slurmplan.slurm.devcluster import _READY_STATES
from slurmplan.slurm.status import gpu_summary, render_status, status_dict

DATA = Path(__file__).parent / "data"


def _snapshot(version: str = "22.05"):
    nodes = json.loads(
        (DATA / ("sinfo_22.05.json" if version == "22.05" else f"show_nodes_{version}.json")).read_text()
    )
    squeue = json.loads((DATA / f"squeue_{version}.json").read_text())
    squeue["jobs"][3]["job_state"] = "CANCELLED" if version == "22.05" else ["CANCELLED"]  # job 4 ran when recorded
    return snapshot_from_json(nodes, squeue, now=0.0)


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_gpu_summary_counts_used_and_free(version):
    summary = gpu_summary(_snapshot(version))
    assert summary["a100"] == {"total": 8, "usable": 8, "used": 2, "free": 6}
    assert summary["v100"] == {"total": 8, "usable": 8, "used": 8, "free": 0}
    assert summary["t4"]["free"] == 4


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_status_dict_drops_finished_jobs_unless_asked(version):
    snap = _snapshot(version)
    assert [j["job_id"] for j in status_dict(snap)["jobs"]] == [1, 2, 3, 5]
    assert 4 in [j["job_id"] for j in status_dict(snap, include_finished=True)["jobs"]]
    assert status_dict(snap)["nodes_by_state"] == {"idle": 2, "mixed": 4}
    assert status_dict(snap)["jobs"][0]["gpus"] == 2


def test_render_status_reads_like_squeue():
    text = render_status(_snapshot())
    assert "TYPE  TOTAL  USED  FREE" in text
    assert "v100:4 x 2 nodes" in text
    assert "pending (held)" in text and "(JobHeldUser)" in text
    assert "a100n[1-2]" in text or "a100n2" in text


@pytest.mark.slurm
def test_cli_status_json_on_dev_cluster(devcluster):
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "status", "--json", "--slurm-conf", devcluster.env["SLURM_CONF"]],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(proc.stdout)
    nodes = {n["name"]: n for n in data["nodes"]}
    for spec in devcluster.cluster.layout.nodes:
        assert nodes[spec.name]["gpu_type"] == spec.gpu_type
        assert nodes[spec.name]["gpus"] == spec.gpus
        assert nodes[spec.name]["state"] in _READY_STATES  # up (completing: an earlier test's job)
    total = sum(n.gpus for n in devcluster.cluster.layout.nodes)
    assert sum(r["total"] for r in data["gpus"].values()) == total


@pytest.mark.slurm
def test_cli_devcluster_status(devcluster):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurmplan.cli",
            "devcluster",
            "status",
            "--json",
            "--state-dir",
            str(devcluster.cluster.paths.root),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["running"] and data["cluster_name"] == devcluster.cluster.cluster_name
    assert {d["name"] for d in data["daemons"]} >= {"munged", "slurmctld"}


MISSING_CONF = [
    ({}, ["--slurm-conf", "/nope.conf"], "--slurm-conf"),
    ({"SLURM_CONF": "/nope/s.conf"}, [], "$SLURM_CONF"),
]


@pytest.mark.parametrize(("env", "args", "named"), MISSING_CONF)
def test_status_with_a_missing_slurm_conf_fails_at_once_naming_it(env, args, named):
    import os
    import time

    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "status", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=30,  # sinfo retried for about 60 s before the check
    )
    assert r.returncode == 1 and f"invalid {named}" in r.stderr and "does not exist" in r.stderr, r.stderr
    assert time.monotonic() - start < 30


@pytest.mark.slurm
def test_cli_status_shows_steps_eta_and_a_held_job_waiting_for_the_round(devcluster, tmp_path):
    """Issue 29 item 9: the STEP column (reported steps, predicted finish) and the reason of a held managed job
    that has no decision yet."""
    import time

    running = devcluster.sbatch("sleep 120", "--time=3")
    held = devcluster.sbatch("sleep 1", "--hold")
    devcluster.run("scontrol", "update", f"jobid={held}", "AdminComment=slurmplan:model=mine;gpus=1", check=True)
    devcluster.wait_state(running, "RUNNING")
    now = time.time()
    lines = [{"step": 10, "time": now - 10, "total_steps": 100}, {"step": 20, "time": now, "total_steps": 100}]
    (tmp_path / f"{running}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = [sys.executable, "-m", "slurmplan.cli", "status", "--slurm-conf", devcluster.env["SLURM_CONF"]]
    try:
        text = subprocess.run([*argv, "--report-dir", str(tmp_path)], capture_output=True, text=True, check=True).stdout
        row = next(line for line in text.splitlines() if line.startswith(f"{running} "))
        assert "20/100 ETA " in row
        held_row = next(line for line in text.splitlines() if line.startswith(f"{held} "))
        assert "waits for slurmplan's next round" in held_row
        data = json.loads(subprocess.run([*argv, "--json", "--report-dir", str(tmp_path)], capture_output=True,
                                         text=True, check=True).stdout)  # fmt: skip
        job = next(j for j in data["jobs"] if j["job_id"] == running)
        assert job["progress"]["step"] == 20 and job["progress"]["steps_per_s"] == pytest.approx(1.0)
    finally:
        devcluster.run("scancel", str(running), str(held))
