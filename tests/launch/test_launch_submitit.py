"""The submitit entry point on the local Slurm cluster: submitit's own preemption (SIGTERM, then USR2 to every
task) reaches the launcher's flag; the step finishes, the checkpoint is written, submitit's handler calls
``ElasticTraining.checkpoint()`` and requeues, and the resubmitted callable resumes to the end."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import submitit
from launch_helpers import EXAMPLE, assert_same_params, example_reference, saved

from slurmplan.launch import Outcome
from slurmplan.launch.entry import ElasticTraining

pytestmark = pytest.mark.slurm


def _wait_for_text(path: Path, pattern: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and re.search(pattern, path.read_text()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s")


def test_submitit_preemption_checkpoints_requeues_and_resumes(
    devcluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    for key, value in devcluster.env.items():
        monkeypatch.setenv(key, value)
    ckpt = tmp_path / "ckpt"
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(timeout_min=5, slurm_signal_delay_s=30)
    argv = ["--steps", "30", "--step-sleep", "0.15", "--checkpoint-dir", str(ckpt)]
    job = executor.submit(ElasticTraining(f"{EXAMPLE}:make_spec", argv))
    job_id = int(job.job_id)
    devcluster.submitted.append(job_id)
    _wait_for_text(job.paths.stderr, r"step 5/", 120)
    job._interrupt()  # submitit's own preemption: SIGTERM (bypassed), then USR2 to every task
    devcluster.wait_for(job_id, lambda j: j.get("restart_cnt", 0) >= 1 and j["job_state"] == "PENDING", 60, "requeue")
    time.sleep(2)  # a restart in the same second as the requeue is refused ("credential revoked")
    devcluster.run("scontrol", "update", f"jobid={job_id}", "StartTime=now")
    devcluster.wait_state(job_id, "COMPLETED", "FAILED", timeout=180)
    result = job.result()
    assert result.outcome is Outcome.FINISHED and result.step == 30
    assert result.resumed_from is not None and 5 <= result.resumed_from < 30

    assert_same_params(saved(ckpt)["model"], example_reference(tmp_path, 30)["model"])
