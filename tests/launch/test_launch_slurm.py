"""End to end on the local Slurm cluster: a job running the example script is signalled mid-run with
``scancel --signal=USR2 --batch``, checkpoints after its current step, requeues itself (plain ``scontrol
requeue``: no daemon runs here to release a held job), resumes, and ends with the same parameters as an
uninterrupted run of the same script."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import EXAMPLE, assert_same_params, example_reference, saved

pytestmark = pytest.mark.slurm

STEPS = 30


def _wait_for_text(path: Path, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s:\n{text[-2000:]}")


@pytest.mark.parametrize("managed", [False, True], ids=["plain-requeue", "managed-requeuehold"])
def test_signalled_job_checkpoints_requeues_and_resumes_bitwise(devcluster, tmp_path: Path, managed: bool) -> None:  # noqa: ANN001
    """Plain jobs requeue; a job with a slurmplan plan (here SLURMPLAN_DP, as the SPANK plugin exports it)
    requeues held, for the daemon to release — the test releases it instead."""
    ckpt, out, reports = tmp_path / "ckpt", tmp_path / "job.out", tmp_path / "reports"
    script = (
        ("export SLURMPLAN_DP=1\n" if managed else "unset SLURMPLAN_DP\n") + f"export SLURMPLAN_REPORT_DIR={reports}\n"
        f"exec {sys.executable} {EXAMPLE} --steps {STEPS} --step-sleep 0.15 --checkpoint-dir {ckpt}\n"
    )
    job = devcluster.sbatch(script, "--requeue", "--open-mode=append", f"--output={out}", "--time=5", "-n1")
    _wait_for_text(out, r"step 5/", 120)
    sig = devcluster.run("scancel", "--signal=USR2", "--batch", str(job))
    assert sig.returncode == 0, sig.stderr
    _wait_for_text(out, r"requeuehold \d+ done" if managed else r"requeue \d+ done", 60)

    # Requeued: pending again, with a begin time Slurm puts about two minutes ahead; move it to now.
    record = devcluster.wait_for(
        job, lambda j: j.get("restart_cnt", 0) >= 1 and j.get("job_state") == "PENDING", 60, "requeued, pending"
    )
    # slurmd compares the new credential's time with the revocation of the old one in whole seconds: a restart
    # within the same second is killed as "credential revoked", which Slurm's begin-time delay normally avoids.
    time.sleep(2)
    if managed:
        assert record["priority"] == 0 or "Held" in record["state_reason"], record["state_reason"]
        assert devcluster.squeue_job(job)["job_state"] == "PENDING"  # stays held until released
        devcluster.run("scontrol", "release", str(job), check=True)
    devcluster.run("scontrol", "update", f"jobid={job}", "StartTime=now")
    final = devcluster.wait_state(job, "COMPLETED", "FAILED", "CANCELLED", timeout=180)
    assert final["job_state"] == "COMPLETED", out.read_text()[-3000:]
    text = out.read_text()
    stopped = int(re.search(r"stopping after step (\d+)", text)[1])
    assert 5 <= stopped < STEPS
    assert f"resumed at step {stopped}" in text
    assert f"finished at step {STEPS}" in text
    assert record["restart_cnt"] >= 1

    assert_same_params(saved(ckpt)["model"], example_reference(tmp_path, STEPS)["model"])

    (report,) = reports.glob(f"*.{job}.jsonl")  # <ClusterName>.<job>.jsonl (issue 29 item 7)
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert lines and all(r["job_id"] == job and r["samples_per_s"] > 0 and r["gpus"] == 1 for r in lines)


def test_srun_two_tasks_train_as_one_job(devcluster, tmp_path: Path) -> None:  # noqa: ANN001
    """Two srun tasks find each other from Slurm's variables alone (rank, size, first node, job-derived port)."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "job.out"
    # --kill-on-bad-exit: a rank that fails ends the step, instead of leaving the other waiting for it.
    script = f"srun --kill-on-bad-exit=1 {sys.executable} {EXAMPLE} --steps 6 --checkpoint-dir {ckpt}\n"
    job = devcluster.sbatch(script, f"--output={out}", "--time=5", "-n2", "-N1")
    try:
        final = devcluster.wait_state(job, "COMPLETED", "FAILED", "CANCELLED", timeout=180)
    except AssertionError as exc:  # say what the ranks printed, not only that the job still runs
        raise AssertionError(f"{exc}\n{out.read_text()[-3000:] if out.exists() else '(no output)'}") from None
    assert final["job_state"] == "COMPLETED", out.read_text()[-3000:]
    state = saved(ckpt)
    assert state["world_size"] == 2 and state["step"] == 6
    assert_same_params(state["model"], example_reference(tmp_path, 6)["model"])


@pytest.mark.parametrize("how", ["sbatch-signal-B", "scancel-full"])
def test_nproc_parent_in_a_batch_job_checkpoints_and_requeues(devcluster, tmp_path: Path, how: str) -> None:  # noqa: ANN001
    """The ``--nproc 2`` parent as a batch script's process: signalled alone by ``sbatch --signal=B:USR2@N`` (it
    forwards to its workers), or together with them by ``scancel --signal=USR2 --full``; the workers checkpoint
    after the same step, rank 0 requeues the job, and no process dies of the signal."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "job.out"
    script = (
        f"export SLURMPLAN_REPORT_DIR={tmp_path / 'reports'}\nunset SLURMPLAN_DP\n"
        f"exec {sys.executable} -m slurmplan.launch --nproc 2 {EXAMPLE} -- --steps 2000 --step-sleep 0.1 "
        f"--checkpoint-dir {ckpt}\n"
    )
    opts = ["--requeue", "--open-mode=append", f"--output={out}", "-n1"]
    if how == "sbatch-signal-B":  # one minute, signal 50 s before the end (Slurm may send it up to 60 s early)
        job = devcluster.sbatch(script, *opts, "--time=1", "--signal=B:USR2@50")
    else:
        job = devcluster.sbatch(script, *opts, "--time=5")
        _wait_for_text(out, r"step 5/", 120)
        sig = devcluster.run("scancel", "--signal=USR2", "--full", str(job))
        assert sig.returncode == 0, sig.stderr
    try:
        text = _wait_for_text(out, r"requeue \d+ done", 150)
        devcluster.wait_for(job, lambda j: j.get("restart_cnt", 0) >= 1, 60, "requeued")
    finally:
        devcluster.run("scancel", str(job))
    stopped = int(re.search(r"stopping after step (\d+)", text)[1])
    assert saved(ckpt)["step"] == stopped and saved(ckpt)["world_size"] == 2
    assert "Traceback" not in text and "Connection closed" not in text
    if how == "sbatch-signal-B":
        assert "forwarding SIGUSR2 to workers" in text or "arrived while starting up" in text


def test_a_checkpoint_folder_held_by_a_live_job_is_refused_and_a_takeover_is_named(devcluster, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 29 item 3: two jobs with one checkpoint folder wrote to it at once, and a new job silently resumed
    from another job's checkpoint. Now the second live job is refused; a later job takes the folder over only
    once the first has ended, and says whose checkpoint it resumes from."""
    ckpt = tmp_path / "shared-ckpt"
    run = f"unset SLURMPLAN_DP\nexec {sys.executable} {EXAMPLE} --checkpoint-dir {ckpt} --checkpoint-every 2 "
    outs = [tmp_path / f"job{i}.out" for i in range(3)]
    first = devcluster.sbatch(run + "--steps 2000 --step-sleep 0.1\n", f"--output={outs[0]}", "--time=5")
    try:
        _wait_for_text(outs[0], r"step 5/", 120)
        second = devcluster.sbatch(run + "--steps 20\n", f"--output={outs[1]}", "--time=5")
        done = devcluster.wait_state(second, "COMPLETED", "FAILED", "CANCELLED", timeout=120)
        text = outs[1].read_text()
        assert done["job_state"] == "FAILED", text[-2000:]
        assert f"is held by job {first}, which is still pending or running" in text
        assert text.count("give this job its own folder") == 1
    finally:
        devcluster.run("scancel", str(first))
    devcluster.wait_state(first, "CANCELLED", "COMPLETED", "FAILED", timeout=60)
    last = max(int(p.name.split("-")[1]) for p in ckpt.glob("step-*"))
    resume = f"unset SLURMPLAN_DP\nexec {sys.executable} {EXAMPLE} --checkpoint-dir {ckpt} --steps {last + 2}\n"
    third = devcluster.sbatch(resume, f"--output={outs[2]}", "--time=5")
    devcluster.wait_state(third, "COMPLETED", "FAILED", timeout=180)
    text = outs[2].read_text()
    assert f"was last used by job {first}, which has ended; job {third} takes it over" in text, text[-2000:]
    assert re.search(rf"resuming from .*step-\d+: step \d+, written by job {first}", text), text[-2000:]
