"""Multi-node managed jobs on the dev cluster (issue 14): a 2-node job moved to another GPU type, a 4-node job
shrunk to 2 nodes and a 2-node job grown to 4, each through the actions the daemon applies (checkpoint signal
-> the job's trap requeue-holds it, or the daemon's requeue-hold; then update + release), with ``srun`` steps on
every node of each configuration, and every node responding afterwards.

Finding behind it: on Slurm 22.05 with several slurmd on one host these moves leave no node "not responding"
(checked here with Slurm's default cred_expire too); the earlier report came from a requeued job waiting
``cred_expire`` + 1 s while the dev cluster's nodes were probed, which the start-time reset now removes.
"""

from __future__ import annotations

import time

import pytest

from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.backend import SlurmBackend

pytestmark = pytest.mark.slurm

NODES = [
    {"name": "a100n[1-4]", "gpu_type": "a100", "gpus": 4, "cpus": 8, "memory_mb": 32000, "features": ["a100"]},
    {"name": "v100n[1-4]", "gpu_type": "v100", "gpus": 4, "cpus": 8, "memory_mb": 32000, "features": ["v100"]},
]


def script(out: str) -> str:
    step = f"echo $SLURM_JOB_NUM_NODES > {out}/r${{SLURM_RESTART_COUNT:-0}}-$SLURMD_NODENAME; sleep 600"
    return (
        "#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\n"
        f"srun --ntasks-per-node=1 bash -c '{step}' & wait\n"
    )


def steps_ran(out, restart: int, nodes: list[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    want = {f"r{restart}-{n}" for n in nodes}
    while time.monotonic() < deadline:
        if want <= {p.name for p in out.iterdir()}:
            assert {(out / w).read_text().strip() for w in want} == {str(len(nodes))}
            return
        time.sleep(0.3)
    raise AssertionError(f"srun steps of run {restart} missing on {sorted(want - {p.name for p in out.iterdir()})}")


def all_nodes_respond(cluster) -> None:
    text = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", check=True).stdout
    bad = [line for line in text.splitlines() if "*" in line or "down" in line or "drain" in line]
    assert not bad, text


def expand(cluster, hostlist: str) -> list[str]:
    return cluster.run("scontrol", "show", "hostnames", hostlist, check=True).stdout.split()


@pytest.fixture
def cluster(devcluster_factory, tmp_path):
    handle = devcluster_factory(
        {"nodes": NODES, "partitions": [{"name": "gpu", "nodes": "ALL", "default": True}], "cred_expire": None}
    )
    (tmp_path / "out").mkdir()
    return handle


def _move(cluster, backend, job_id, restart, via_signal, gpu_type, count, nodelist):
    backend.snapshot()  # as each tick does: the backend sees the nodes the job runs on
    if via_signal:
        assert backend.apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])[0].ok
    else:
        assert backend.apply([Action(ActionKind.REQUEUE_HOLD, job_id)])[0].ok
    cluster.wait_for(job_id, lambda j: j["job_state"] == "PENDING" and j["priority"] == 0, what="requeue-held")
    backend.snapshot()
    update = Action(ActionKind.UPDATE, job_id, gpu_type, 2, count, tuple(nodelist))
    results = backend.apply([update, Action(ActionKind.RELEASE, job_id)])
    assert all(r.ok for r in results), results
    job = cluster.wait_for(job_id, lambda j: j["job_state"] == "RUNNING" and j["restart_cnt"] == restart, 60, "runs")
    assert expand(cluster, job["nodes"]) == list(nodelist)
    return job


@pytest.mark.parametrize(
    ("start", "moves"),
    [
        (("a100", 2), [(True, "v100", ["v100n1", "v100n2"])]),  # move: other type, other nodes
        (("a100", 4), [(False, "v100", ["v100n1", "v100n2"])]),  # shrink 4 -> 2 nodes
        (("v100", 2), [(True, "a100", ["a100n1", "a100n2", "a100n3", "a100n4"])]),  # grow 2 -> 4 nodes
    ],
    ids=["move-2-node", "shrink-4-to-2", "grow-2-to-4"],
)
def test_multi_node_job_moves_with_srun_steps_on_every_node(cluster, tmp_path, start, moves):
    out = tmp_path / "out"
    backend = SlurmBackend(cluster.env)
    gpu_type, count = start
    opts = (f"-N{count}", "--gres=gpu:2", f"--constraint={gpu_type}", "-o", str(tmp_path / "job.out"))
    job_id = cluster.sbatch(script(str(out)), *opts)
    job = cluster.wait_state(job_id, "RUNNING")
    steps_ran(out, 0, expand(cluster, job["nodes"]))
    for restart, (via_signal, to_type, nodelist) in enumerate(moves, start=1):
        time.sleep(1)
        started = time.monotonic()
        _move(cluster, backend, job_id, restart, via_signal, to_type, len(nodelist), nodelist)
        assert time.monotonic() - started < 30  # other nodes: no cred_expire wait
        steps_ran(out, restart, nodelist)
        all_nodes_respond(cluster)
    cluster.run("scancel", str(job_id))
    time.sleep(2)
    all_nodes_respond(cluster)
