"""QOS preemption on the real cluster with slurmdbd (issue 26): the daemon does not stop or shrink a running job
of QOS ``high`` (priority 1000, Preempt=normal in slurmdbd) for a job of QOS ``normal``, although its policy
would (shown with accounting off); jobs of a real unprivileged user (``tests/unixusers.py``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from acct_helpers import sbatch_as

from slurmplan.control.config import DaemonConfig
from slurmplan.control.runner import Daemon
from slurmplan.domain import Reason
from slurmplan.slurm.backend import SlurmBackend

pytestmark = pytest.mark.slurm

BODY = "for i in $(seq 1 180); do sleep 1; done"
RUNNING_HINT = "slurmplan:model=gpt2;gpus=8;min=4;max=8;types=a100"
WAITING_HINT = "slurmplan:model=gpt2;gpus=4;min=4;max=4;types=a100"


def _decided(acctcluster, path: Path, waiting: int, **fields) -> dict:
    """Tick until the waiting job is decided at a round (not "new since the round started"); the decisions."""
    config = DaemonConfig(database=path / "journal.db", report_dir=path / "reports", round_s=4.0, **fields)
    daemon = Daemon(config, backend=SlurmBackend(env=acctcluster.env))
    deadline = time.monotonic() + 30
    while True:
        decided = {a.job_id: a for a in daemon.tick().assignments}
        if "new since the round started" not in decided[waiting].detail or time.monotonic() > deadline:
            return decided
        time.sleep(1.0)


def test_a_high_qos_job_is_neither_shrunk_nor_stopped_for_a_normal_qos_job(acctcluster, tmp_path):
    vip = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--gres=gpu:a100:4", "-N", "2", "-A", "alpha",
                    "--qos=high", "--comment", RUNNING_HINT)  # fmt: skip
    acctcluster.wait_state(vip, "RUNNING")
    waiting = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:a100:4", "-A", "beta",
                        "--comment", WAITING_HINT)  # fmt: skip
    try:
        # the control: without Slurm's QOS the policy shares the a100s, shrinking or stopping the running job
        blind = _decided(acctcluster, tmp_path / "blind", waiting, accounting="off", shadow=True)
        assert blind[vip].reason in (Reason.RESIZED, Reason.PREEMPTED), blind[vip]
        # with accounting: QOS high is not preempted for normal; acting, and Slurm's view agrees
        seen = _decided(acctcluster, tmp_path / "qos", waiting)
        assert seen[vip].reason is Reason.KEPT and seen[vip].cell.gpus == 8, seen[vip]
        assert "its QOS high is not preempted for jobs of the other QOS here" in seen[vip].detail
        assert seen[waiting].cell is None and "held by running jobs of QOS high" in seen[waiting].detail
        job = acctcluster.squeue_job(vip)
        assert job["job_state"] == "RUNNING" and job["restart_cnt"] == 0
        assert acctcluster.squeue_job(waiting)["job_state"] == "PENDING"
    finally:
        acctcluster.run("scancel", str(vip), str(waiting))
