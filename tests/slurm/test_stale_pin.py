"""On real Slurm: a pending job re-decided onto other nodes of the same Cell gets its new ``ReqNodeList``.

Regression (77d0d8b): the mechanism skipped the UPDATE of a pending job whose admin comment already named its
Cell and plan. Slurm shows a pending job no nodes, so the old pin went unseen: the job kept waiting for the nodes
it was first pinned to (busy here), instead of starting on the free ones the round gave it.
"""

from __future__ import annotations

import time

import pytest

from slurmplan.domain import ActionKind, Assignment, Cell, Hints, Plan, Reason
from slurmplan.mechanism.actions import RoundStamp, job_actions
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.tick_types import JobState, ManagedJob, TickConfig

LOOP = "while true; do sleep 0.2; done\n"


def _on(job_id: int, node: str) -> Assignment:
    return Assignment(job_id, Reason.SCHEDULED, cell=Cell("t4", 1), plan=Plan(dp=1), nodes=(node,), gpus_per_node=1)


@pytest.mark.slurm
def test_a_pending_job_moved_to_other_nodes_of_its_cell_is_repinned_and_starts_there(devcluster):
    blocker = devcluster.sbatch(LOOP, "--gres=gpu:2", "--nodelist=t4n1", "--time=10")  # t4n1 full
    devcluster.wait_state(blocker, "RUNNING")
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:1", "--constraint=t4", "--time=10")
    devcluster.wait_state(job_id, "PENDING")
    backend = SlurmBackend(devcluster.env)

    def managed() -> ManagedJob:
        job = next(j for j in backend.snapshot().jobs if j.job_id == job_id)
        return ManagedJob(job, Hints(gpu_types=("t4",), gpus=1), ())

    acts, st = job_actions(managed(), _on(job_id, "t4n1"), JobState(), time.time(), RoundStamp(1), TickConfig())
    assert [a.kind for a in acts] == [ActionKind.UPDATE, ActionKind.RELEASE]
    assert all(r.ok for r in backend.apply(acts))
    time.sleep(2)
    waiting = devcluster.squeue_job(job_id)
    assert waiting["job_state"] == "PENDING" and waiting["priority"] > 0  # released, waiting for t4n1
    mj = managed()
    assert mj.job.nodes == ()  # what the mechanism sees: no sign of the pin

    acts, st = job_actions(mj, _on(job_id, "t4n2"), st, time.time(), RoundStamp(2), TickConfig())
    assert [a.kind for a in acts] == [ActionKind.UPDATE]  # on main: [] and the job waits for t4n1
    assert all(r.ok for r in backend.apply(acts))
    running = devcluster.wait_state(job_id, "RUNNING")
    assert running["nodes"] == "t4n2"
    devcluster.run("scancel", str(job_id), str(blocker))
