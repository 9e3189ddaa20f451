"""Who holds a job, read from what Slurm shows (pure; the real-cluster cases are in test_hostile_jobs.py).

A user's hold placed after the daemon released the job cannot be caused reliably on the dev cluster (the
daemon releases a job only onto free nodes, where Slurm starts it within the second), so that case is pinned
here on the values Slurm shows for it: ``JobHeldUser`` with the daemon's running decision in the admin comment.
"""

from __future__ import annotations

from slurmplan.control.observe import classify
from slurmplan.control.trust import HintTrust
from slurmplan.domain import Job, JobState
from slurmplan.formats import USER_HOLD_MARK, foreign_hold

HINTS = "slurmplan:model=llama2-7b;gpus=1"
RUNNING = "slurmplan: a100x1 dp1 tp1 pp1 mb1 ga1 | since round 3"
HELD = "slurmplan: held (preempted) | round 4 | its a100 GPUs went to job 2"


def test_hold_owners() -> None:
    assert foreign_hold(False, "", f"{HINTS} || {RUNNING}") is None
    assert foreign_hold(True, "JobHeldAdmin", HINTS) == "admin"
    assert foreign_hold(True, "JobHeldUser", HINTS) is None  # job_submit.lua's hold at submission
    assert foreign_hold(True, "JobHeldUser", f"{HINTS} || {HELD}") is None  # the daemon's hold
    assert foreign_hold(True, "JobHeldUser", f"{HINTS} || {USER_HOLD_MARK}") == "user"  # sbatch -H
    assert foreign_hold(True, "JobHeldUser", f"{HINTS} || {RUNNING}") == "user"  # held after the daemon released it
    assert foreign_hold(True, "JobHeldUser", f"{HINTS} || {RUNNING}", restart_count=1) is None  # self-requeue-hold


def test_a_foreign_hold_leaves_the_job_unmanaged_and_comment_hints_need_trust() -> None:
    admin = Job(1, admin_comment=HINTS, held=True, state=JobState.PENDING, state_reason="JobHeldAdmin")
    assert not classify(admin, ()).managed
    commented = Job(2, comment=HINTS, held=True, state=JobState.PENDING, state_reason="JobHeldUser")
    assert classify(commented, (), HintTrust(hints_from_comment=True)).managed
    assert not classify(commented, (), HintTrust(hints_from_comment=False)).managed


def test_trust_rules_by_account_or_qos() -> None:
    from slurmplan.control.config import config_from_mapping
    from slurmplan.domain import JobClass

    trust = config_from_mapping(
        {"guaranteed_qos": ["high"], "unmanaged_accounts": ["ops"], "steps_accounts": [], "deadline_qos": "dl"}
    ).trust
    hints = "slurmplan:class=guaranteed;steps=100;deadline=2031-01-01T00:00;managed=no"
    plain = Job(1, account="lab", qos="normal", admin_comment=hints, partition="gpu")
    got = classify(plain, ("gpu",), trust)  # every rule broken: best-effort, managed, no steps, no deadline
    assert got.managed and got.hints.job_class is JobClass.BEST_EFFORT
    assert (got.hints.steps, got.hints.deadline) == (None, None)
    vip = Job(2, account="ops", qos="high", admin_comment=hints.replace(";steps=100", ""), partition="gpu")
    assert not classify(vip, ("gpu",), trust).managed  # managed=no granted to account ops
    high = Job(3, account="lab", qos="high", admin_comment="slurmplan:class=guaranteed", partition="gpu")
    assert classify(high, ("gpu",), trust).hints.job_class is JobClass.GUARANTEED  # granted by QOS
    assert "guaranteed_qos [high]" in trust.refusal("guaranteed", "lab", "normal")
