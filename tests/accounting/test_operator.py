"""The daemon as a non-root Slurm operator: ``grant_operator`` (what ``site install --service-user`` runs) makes
the service user an Operator in slurmdbd; then the daemon's backend, acting with that user's identity, holds,
updates, releases, signals and requeues the jobs of another unprivileged user. Before the grant, ``site check``
reports the missing rights and Slurm refuses the same actions."""

from __future__ import annotations

import time

import pytest
from acct_helpers import commands_as, sbatch_as
from unixusers import ensure_user

from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.operator import admin_level, grant_operator
from slurmplan.slurm.reader import read_show_config
from slurmplan.slurm.site_check import check_admin_comment

pytestmark = pytest.mark.slurm

SERVICE_USER = "slurmplan-svc"

TRAP = """trap 'echo got-usr2 >> {mark}' USR2
for _ in $(seq 1 300); do sleep 0.2; done
"""


def _check(acctcluster, user):
    conf = read_show_config(acctcluster.env)
    return check_admin_comment(conf, user, acctcluster.env)


def test_service_user_becomes_operator_and_acts_on_another_users_jobs(acctcluster, tmp_path):
    ensure_user(SERVICE_USER)
    as_service = {**acctcluster.env, **commands_as(SERVICE_USER, tmp_path / "bin")}
    backend = SlurmBackend(as_service)
    mark = acctcluster.jobs_dir / "usr2.mark"
    job = sbatch_as(acctcluster, "slurmplan-t2", TRAP.format(mark=mark), "--gres=gpu:v100:1", "-A", "beta", "--hold")

    # without rights: site check says so and Slurm refuses
    assert not _check(acctcluster, SERVICE_USER).ok
    refused = backend.apply([Action(ActionKind.RELEASE, job)])[0]
    assert not refused.ok and "invalid user id" in refused.message.lower()

    granted = grant_operator(SERVICE_USER, acctcluster.env)
    assert granted.status == "updated", granted.note
    assert admin_level(SERVICE_USER, acctcluster.env) == "Operator"
    assert grant_operator(SERVICE_USER, acctcluster.env).status == "unchanged"
    finding = _check(acctcluster, SERVICE_USER)  # Operator: job control yes, AdminComment no
    assert not finding.ok and "Operator" in finding.detail and "adminlevel=Administrator" in finding.fix

    update = Action(ActionKind.UPDATE, job, gpu_type="v100", gpus_per_node=2)
    _wait_ok(backend, update)  # slurmdbd pushes the new level to slurmctld within a moment
    assert acctcluster.squeue_job(job)["tres_per_node"] == "gres:gpu:v100:2"
    annotate = backend.apply([Action(ActionKind.ANNOTATE, job, admin_comment="slurmplan: op test")])[0]
    assert not annotate.ok and "permission denied" in annotate.message.lower()

    assert backend.apply([Action(ActionKind.RELEASE, job)])[0].ok
    acctcluster.wait_state(job, "RUNNING")
    time.sleep(1.0)  # past the batch script's start: an earlier signal is lost (DESIGN.md)
    assert backend.apply([Action(ActionKind.SIGNAL, job, signal="USR2")])[0].ok
    deadline = time.monotonic() + 20
    while not (mark.exists() and "got-usr2" in mark.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert mark.exists(), "the job's trap saw the operator's signal"

    assert backend.apply([Action(ActionKind.REQUEUE_HOLD, job)])[0].ok
    held = acctcluster.wait_for(job, lambda j: j["job_state"] == "PENDING", what="requeued and held")
    assert held["restart_cnt"] >= 1 and held["user_name"] == "slurmplan-t2"
    assert backend.apply([Action(ActionKind.HOLD, job)])[0].ok

    # Administrator (site install's default level) may also write the daemon's decision into AdminComment
    assert grant_operator(SERVICE_USER, acctcluster.env, level="Administrator").status == "updated"
    assert _check(acctcluster, SERVICE_USER).ok
    _wait_ok(backend, Action(ActionKind.ANNOTATE, job, admin_comment="slurmplan: op test"))
    assert acctcluster.squeue_job(job)["admin_comment"] == "slurmplan: op test"
    assert backend.apply([Action(ActionKind.CANCEL, job)])[0].ok


def _wait_ok(backend, action, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        result = backend.apply([action])[0]
        if result.ok or time.monotonic() > deadline:
            assert result.ok, result.message
            return
        time.sleep(0.3)


def test_site_check_reports_a_user_without_rights(acctcluster):
    finding = _check(acctcluster, "slurmplan-t1")
    assert not finding.ok and "adminlevel=Operator" in finding.fix
