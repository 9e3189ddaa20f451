"""Issue 24 items 1 and 2 on the real site cluster, with jobs submitted by a real unprivileged user.

1. A job name or comment that is not UTF-8 must not stop ``tick``, ``status`` or ``watchdog``.
2. No hold that is not slurmplan's is ever lifted, by the daemon or the watchdog: an admin's ``scontrol hold``,
   a user's ``sbatch -H``, a user's ``scontrol hold`` after the daemon released the job; and hints the user puts
   into ``--comment`` after submission are not read (``hints_from_comment: false``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmplan.formats import USER_HOLD_MARK, split_admin_comment

pytestmark = pytest.mark.slurm

MANAGED = ("--comment", "slurmplan:model=llama2-7b;gpus=1", "--gres=gpu:1")


def _held(job: dict) -> bool:
    return job["job_state"] == "PENDING" and job["priority"] == 0


def _stays_held_through_ticks_and_a_stale_watchdog(hostile, tmp_path: Path, job_id: int, ticks: int) -> dict:
    """The job is still held after ``ticks`` daemon ticks, and after a watchdog that finds the daemon down (no
    heartbeat), which releases only slurmplan's own holds; returns the job as the ticks left it."""
    for _ in range(ticks):
        hostile.tick()
    job = hostile.job(job_id)
    assert _held(job), job
    stale = tmp_path / "stale.yaml"
    stale.write_text(hostile.config.read_text() + f"heartbeat_file: {tmp_path / 'no-heartbeat'}\n")
    watchdog = hostile.slurmplan("watchdog", "--config", str(stale), "--json")
    assert watchdog.returncode == 0, watchdog.stderr
    assert job_id not in json.loads(watchdog.stdout)["released"]
    assert _held(hostile.job(job_id))
    return job


def test_a_non_utf8_name_does_not_stop_tick_status_or_watchdog(hostile) -> None:
    bad = hostile.sbatch("-J", b"ok\xffbad\x1b[31m", "--comment", b"x\xfe\xff")
    good = hostile.sbatch(*MANAGED)
    assert b"ok\xffbad" in hostile.squeue_bytes()  # Slurm prints the user's byte as it is
    job = hostile.ticks_until(good, ("RUNNING", "COMPLETED"))
    assert job["job_state"] == "RUNNING"
    status = hostile.slurmplan("status", "--json")
    assert status.returncode == 0, status.stderr
    assert "ok\ufffdbad" in status.stdout or "ok\\ufffdbad" in status.stdout
    watchdog = hostile.slurmplan("watchdog", "--config", str(hostile.config), "--json")
    assert watchdog.returncode == 0, watchdog.stderr
    hostile.cancel(bad, good)


def test_an_admin_hold_survives_a_comment_rewrite_ticks_and_the_watchdog(hostile, tmp_path) -> None:
    job_id = hostile.sbatch("-p", "debug", "--gres=gpu:1")  # managed (debug is a managed partition): held
    hostile.site.run("scontrol", "hold", str(job_id), check=True)  # the admin's hold (we are root)
    assert hostile.job(job_id)["state_reason"] == "JobHeldAdmin"
    edit = hostile.as_user("scontrol", "update", f"jobid={job_id}", "comment=slurmplan:model=bert-large;gpus=1")
    assert edit.returncode == 0, edit.stderr  # the user may write their comment ...
    job = _stays_held_through_ticks_and_a_stale_watchdog(hostile, tmp_path, job_id, ticks=3)
    assert job["state_reason"] == "JobHeldAdmin"  # ... it changes nothing
    hostile.cancel(job_id)


def test_a_users_own_hold_at_submission_is_not_lifted_but_the_user_may_lift_it(hostile, tmp_path) -> None:
    job_id = hostile.sbatch("-H", *MANAGED)
    job = hostile.job(job_id)
    assert split_admin_comment(job["admin_comment"]).decision == USER_HOLD_MARK
    _stays_held_through_ticks_and_a_stale_watchdog(hostile, tmp_path, job_id, ticks=2)
    lift = hostile.as_user("scontrol", "release", str(job_id))
    assert lift.returncode == 0, lift.stderr  # job_submit.lua lets the user lift their own hold
    hostile.ticks_until(job_id, ("RUNNING",))  # the user's job runs once they lift their hold
    hostile.cancel(job_id)


def test_a_managed_job_with_a_non_priority_change_is_accepted_while_held(hostile) -> None:
    """Item 10: job_submit.lua compared the priority of an update with nil, where Slurm passes NO_VAL."""
    job_id = hostile.sbatch(*MANAGED)
    assert _held(hostile.job(job_id))
    change = hostile.as_user("scontrol", "update", f"jobid={job_id}", "TimeLimit=30")
    assert change.returncode == 0, change.stderr
    assert hostile.job(job_id)["time_limit"] == 30
    release = hostile.as_user("scontrol", "release", str(job_id))
    assert release.returncode != 0  # lifting slurmplan's hold is still refused (Slurm drops the message text)
    assert _held(hostile.job(job_id))
    hostile.cancel(job_id)


def test_unrelated_comment_with_bars_is_accepted(hostile) -> None:
    """Item 6: text of the form ``a || b`` without the ``slurmplan:`` prefix is not hints."""
    job_id = hostile.sbatch("--comment", "project=x || owner=y")
    assert hostile.job(job_id)["comment"] == "project=x || owner=y"
    hostile.cancel(job_id)


def test_a_user_hold_after_the_daemon_released_the_job_is_not_lifted(hostile, tmp_path) -> None:
    """Released by the daemon while Slurm still keeps it pending (its begin time), then held by its user: neither
    the daemon nor a watchdog finding the daemon down lifts that hold."""
    job_id = hostile.sbatch(*MANAGED, "--begin=now+600")
    job = hostile.ticks_until(job_id, ("PENDING",), n=1)
    for _ in range(6):
        if job["priority"] != 0:
            break
        hostile.tick()
        job = hostile.job(job_id)
    assert job["priority"] != 0 and job["job_state"] == "PENDING", job  # released by the daemon; waits to begin
    held = hostile.as_user("scontrol", "hold", str(job_id))
    assert held.returncode == 0, held.stderr
    _stays_held_through_ticks_and_a_stale_watchdog(hostile, tmp_path, job_id, ticks=3)
    lift = hostile.as_user("scontrol", "release", str(job_id))
    assert lift.returncode == 0, lift.stderr  # the user's own hold: theirs to lift
    assert hostile.job(job_id)["priority"] != 0
    hostile.cancel(job_id)
