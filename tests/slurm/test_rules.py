"""Each rule of the running Slurm's ``SlurmRules`` value, checked on that real Slurm.

The same tests run on 22.05 (Debian 12, the default CI stage) and on 24.11 (the Debian 13 stage), each against
``rules_for(version)``; a rule that does not hold on its Slurm fails here. Commands go to Slurm directly (not
through the backend, which would refuse what the rules forbid before Slurm sees it).
"""

from __future__ import annotations

import time

import pytest

from slurmplan.rules import MIXED_TYPES_MESSAGE, SLURM_22_05, SLURM_24_11, rules_for
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import daemon_version

pytestmark = pytest.mark.slurm

LOOP = "while true; do sleep 0.2; done\n"


@pytest.fixture
def rules(devcluster):
    found = rules_for(daemon_version())
    assert SlurmBackend(devcluster.env).detect_rules() == found  # the daemon takes the rules of its Slurm
    return found


def test_rules_are_known_per_version():
    assert rules_for((22, 5)) is SLURM_22_05 and rules_for((24, 11)) is SLURM_24_11
    assert rules_for((25, 5)) is SLURM_24_11  # newer: the newest measured
    with pytest.raises(ValueError, match="21.8.*22.05"):
        rules_for((21, 8))


def test_typed_request_retyped(devcluster, rules):
    """``typed_keeps_type``: 22.05 accepts ``TresPerNode=gres:gpu:v100:1`` on a pending a100-typed job but the
    job then never starts (BadConstraints); 24.11 retypes it and runs it on a V100 node."""
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:a100:1", "--time=10")
    devcluster.wait_state(job_id, "PENDING")
    proc = devcluster.run("scontrol", "update", f"jobid={job_id}", "TresPerNode=gres:gpu:v100:1")
    devcluster.run("scontrol", "release", str(job_id))
    try:
        if rules.typed_keeps_type:
            time.sleep(8)  # several scheduling passes (sched_interval=2)
            record = devcluster.squeue_job(job_id)
            assert record["job_state"] == "PENDING", (proc.stderr, record)
        else:
            assert proc.returncode == 0, proc.stderr
            running = devcluster.wait_state(job_id, "RUNNING", timeout=60)
            assert running["nodes"].startswith("v100n") and running["tres_per_node"] == "gres:gpu:v100:1"
    finally:
        devcluster.run("scancel", str(job_id))


def test_typed_to_untyped_refused(devcluster, rules):
    """``mixed_type_refused``: a typed request cannot become untyped."""
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:a100:1", "--time=10")
    devcluster.wait_state(job_id, "PENDING")
    try:
        proc = devcluster.run("scontrol", "update", f"jobid={job_id}", "TresPerNode=gres:gpu:1")
        after = devcluster.squeue_job(job_id)["tres_per_node"]
        if rules.mixed_type_refused:
            assert proc.returncode != 0 and MIXED_TYPES_MESSAGE in proc.stderr, (proc.returncode, proc.stderr)
            assert after == "gres:gpu:a100:1"
        else:
            assert proc.returncode == 0 and after == "gres:gpu:1"
    finally:
        devcluster.run("scancel", str(job_id))


def test_requeued_job_waits_for_its_begin_time(devcluster, rules):
    """``requeue_waits_cred_expire``: a requeued batch job is pending with reason BeginTime until cred_expire + 1 s
    (10 + 1 s in the dev cluster) have passed, on both versions."""
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    try:
        requeued = time.monotonic()
        assert devcluster.run("scontrol", "requeue", str(job_id)).returncode == 0
        reasons = set()

        def running_again(job):
            if job["job_state"] == "PENDING":
                reasons.add(job["state_reason"])
            return job["job_state"] == "RUNNING" and job["restart_cnt"] == 1

        devcluster.wait_for(job_id, running_again, 60, "running again")
        waited = time.monotonic() - requeued
        if rules.requeue_waits_cred_expire:
            assert waited >= 9.0 and "BeginTime" in reasons, (reasons, waited)
        else:
            assert waited < 9.0, (reasons, waited)
    finally:
        devcluster.run("scancel", str(job_id))
