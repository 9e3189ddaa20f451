"""The Slurm backend against a real local cluster: snapshots read back what sbatch submitted, and every action
kind changes the queue as ``squeue --json`` then shows. Plus the pure JSON mapping on recorded 22.05 output
and the errors (a failing command, a missing command, an unexpected JSON shape)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from slurmplan.domain import Action, ActionKind, JobState, NodeState, ValidationError
from slurmplan.slurm.backend import (
    SlurmBackend,
    SlurmOutputError,
    action_commands,
    snapshot_from_json,
    unexplained_gpus,
)
from slurmplan.slurm.run import SlurmCommandError, run_slurm

DATA = Path(__file__).parent / "data"
LOOP = "while true; do sleep 0.2; done\n"


def _recorded() -> tuple[dict, dict]:
    return (
        json.loads((DATA / "sinfo_22.05.json").read_text()),
        json.loads((DATA / "squeue_22.05.json").read_text()),
    )


# ---------------------------------------------------------------------------------------- pure JSON mapping


def test_recorded_snapshot_maps_nodes_and_jobs():
    snap = snapshot_from_json(*_recorded(), now=123.0)
    a100 = snap.cluster.node("a100n1")
    assert (a100.gpu_type, a100.gpus, a100.gpus_used, a100.state) == ("a100", 4, 2, NodeState.MIXED)
    assert a100.partitions == ("gpu", "debug") and "nvlink" in a100.features
    assert snap.cluster.gpus_by_type() == {"a100": 8, "v100": 8, "t4": 4}
    jobs = {j.job_id: j for j in snap.jobs}
    assert (jobs[1].gpu_type, jobs[1].gpus_per_node, jobs[1].nodes, jobs[1].comment) == (
        "a100",
        2,
        ("a100n1",),
        "hello",
    )
    assert (jobs[2].node_count, jobs[2].gpus, jobs[2].time_limit_s) == (2, 8, 1800)
    assert jobs[3].held and jobs[3].state is JobState.PENDING
    assert jobs[4].gpu_type is None and jobs[4].gpus == 0


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("nodes", 0, "gres"), 4, "nodes[0].gres"),
        (("nodes", 1, "cpus"), "many", "nodes[1].cpus"),
        (("jobs", 2, "job_id"), None, "jobs[2].job_id"),
        (("jobs", 0, "tres_per_node"), "gres:gpu:a100:x", "jobs[0].tres_per_node"),
    ],
)
def test_unexpected_shape_skips_the_record_naming_the_field(path, value, field, caplog):
    """One unreadable record is left out and logged with its field; the rest of the snapshot stands (issue 24)."""
    sinfo, squeue = _recorded()
    doc = {"nodes": sinfo, "jobs": squeue}[path[0]]
    target = doc[path[0]][path[1]]
    if value is None:
        del target[path[2]]
    else:
        target[path[2]] = value
    with caplog.at_level("WARNING", logger="slurmplan.slurm.backend"):
        snap = snapshot_from_json(sinfo, squeue, now=0.0)
    kept = snap.cluster.nodes if path[0] == "nodes" else snap.jobs
    assert len(kept) == len(doc[path[0]]) - 1
    assert any(field in r.getMessage() for r in caplog.records)


def test_unexpected_document_shape_still_raises():
    sinfo, squeue = _recorded()
    squeue["jobs"] = {"not": "a list"}
    with pytest.raises(SlurmOutputError, match="jobs"):
        snapshot_from_json(sinfo, squeue, now=0.0)


def test_node_usage_the_queue_does_not_explain_is_named():
    sinfo, squeue = _recorded()
    assert unexplained_gpus(snapshot_from_json(sinfo, squeue, now=0.0)) == ()
    (a100_job,) = [j for j in squeue["jobs"] if j["job_id"] == 1]
    a100_job["job_state"] = "PENDING"  # read before Slurm started it; the node read after
    assert unexplained_gpus(snapshot_from_json(sinfo, squeue, now=0.0)) == ("a100n1",)


def test_drain_flag_folds_into_drained():
    sinfo, squeue = _recorded()
    sinfo = copy.deepcopy(sinfo)
    sinfo["nodes"][1]["state_flags"] = ["DRAIN"]
    node = snapshot_from_json(sinfo, squeue, 0.0).cluster.nodes[1]
    assert node.state is NodeState.DRAINED and node.gpus_free == 0


def test_action_commands():
    upd = Action(ActionKind.UPDATE, 7, "v100", 2, 2, ("v100n1", "v100n2"), "slurmplan: v100x4")
    assert action_commands(upd, "gres:gpu:v100:4") == [
        [
            "scontrol",
            "update",
            "jobid=7",
            "TresPerNode=gres:gpu:v100:2",
            "NumNodes=2-2",
            "ReqNodeList=v100n[1-2]",
            "AdminComment=slurmplan: v100x4",
        ]
    ]
    untyped = action_commands(Action(ActionKind.UPDATE, 7, "t4", 1), "gres:gpu:2")
    assert untyped == [["scontrol", "update", "jobid=7", "TresPerNode=gres:gpu:1", "Features=t4"]]
    with pytest.raises(ValidationError, match="cannot change the GPU type"):
        action_commands(Action(ActionKind.UPDATE, 7, "t4", 1), "gres:gpu:a100:2")
    assert action_commands(Action(ActionKind.SIGNAL, 7)) == [["scancel", "--signal=USR2", "--batch", "7"]]
    assert action_commands(Action(ActionKind.UPDATE, 7)) == []


def test_missing_command_raises_naming_it():
    with pytest.raises(SlurmCommandError, match="no-such-slurm-binary.*could not run.*not found"):
        run_slurm(["no-such-slurm-binary", "--json"])


# ----------------------------------------------------------------------------------- against the dev cluster


@pytest.mark.slurm
def test_failing_scontrol_names_command_status_stderr(devcluster):
    with pytest.raises(SlurmCommandError) as info:
        run_slurm(["scontrol", "hold", "999999"], devcluster.env)
    err = info.value
    assert err.returncode not in (0, None)
    assert "scontrol hold 999999" in str(err) and f"exit status {err.returncode}" in str(err)
    assert "Invalid job id" in err.stderr and err.stderr in str(err)


@pytest.mark.slurm
def test_snapshot_reads_submitted_gpu_job(devcluster):
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:a100:2", "--comment=snap", "--time=10", "-J", "snapjob")
    devcluster.wait_state(job_id, "RUNNING")
    snap = backend.snapshot()
    job = next(j for j in snap.jobs if j.job_id == job_id)
    assert (job.state, job.gpu_type, job.gpus_per_node, job.comment, job.name) == (
        JobState.RUNNING,
        "a100",
        2,
        "snap",
        "snapjob",
    )
    assert job.time_limit_s == 600 and job.start_time and len(job.nodes) == 1
    node = snap.cluster.node(job.nodes[0])
    assert node.gpu_type == "a100" and node.gpus_used >= 2
    assert {n.name for n in snap.cluster.nodes} == set(devcluster.cluster.layout.node_names())
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_hold_update_type_and_release(devcluster):
    """An untyped request with a type constraint moves to another GPU type while held, then runs there."""
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:2", "--constraint=a100", "--time=10")
    devcluster.wait_state(job_id, "PENDING")
    assert next(j for j in backend.snapshot().jobs if j.job_id == job_id).gpu_type == "a100"
    results = backend.apply(
        [
            Action(ActionKind.HOLD, job_id),
            Action(ActionKind.UPDATE, job_id, "t4", 1, 1, None, "slurmplan: t4x1 dp1"),
        ]
    )
    assert all(r.ok for r in results), results
    record = devcluster.squeue_job(job_id)
    assert (record["tres_per_node"], record["features"]) == ("gres:gpu:1", "t4")
    assert record["admin_comment"] == "slurmplan: t4x1 dp1"
    assert record["priority"] == 0
    job = next(j for j in backend.snapshot().jobs if j.job_id == job_id)
    assert job.held and (job.gpu_type, job.gpus_per_node) == ("t4", 1)
    (released,) = backend.apply([Action(ActionKind.RELEASE, job_id)])
    assert released.ok
    running = devcluster.wait_state(job_id, "RUNNING")
    assert running["nodes"].startswith("t4n")
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_typed_request_count_changes_type_change_refused(devcluster):
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:a100:2", "--time=10")
    devcluster.wait_state(job_id, "PENDING")
    backend.snapshot()
    (retype,) = backend.apply([Action(ActionKind.UPDATE, job_id, "t4", 1)])
    if backend.rules.typed_keeps_type:  # 22.05: refused up front (Slurm would strand the job), request unchanged
        assert not retype.ok and "Slurm 22.05 cannot change the GPU type" in retype.message
        assert devcluster.squeue_job(job_id)["tres_per_node"] == "gres:gpu:a100:2"
    else:  # 24.11: Slurm retypes it
        assert retype.ok, retype
        assert devcluster.squeue_job(job_id)["tres_per_node"] == "gres:gpu:t4:1"
        backend.snapshot()
    (count,) = backend.apply([Action(ActionKind.UPDATE, job_id, "a100", 1, nodelist=("a100n2",))])
    assert count.ok, count
    record = devcluster.squeue_job(job_id)
    assert (record["tres_per_node"], record["required_nodes"]) == ("gres:gpu:a100:1", "a100n2")
    backend.apply([Action(ActionKind.RELEASE, job_id)])
    assert devcluster.wait_state(job_id, "RUNNING")["nodes"] == "a100n2"
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_update_refused_for_running_job_is_reported_not_raised(devcluster):
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:t4:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    (result,) = backend.apply([Action(ActionKind.UPDATE, job_id, "t4", 2)])
    assert not result.ok and "scontrol update" in result.message and "no longer pending" in result.message
    (again,) = backend.apply([Action(ActionKind.RELEASE, job_id)])  # not held: harmless either way
    assert isinstance(again.ok, bool)
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_signal_reaches_batch_script_trap(devcluster):
    marker = devcluster.jobs_dir / "got-usr2"
    ready = devcluster.jobs_dir / "trap-ready"
    marker.unlink(missing_ok=True)
    ready.unlink(missing_ok=True)
    script = f"trap 'echo caught > {marker}; exit 0' USR2\ntouch {ready}\n{LOOP}"
    job_id = devcluster.sbatch(script, "--gres=gpu:v100:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:  # RUNNING comes before the trap is set
        time.sleep(0.1)
    (result,) = SlurmBackend(devcluster.env).apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])
    assert result.ok, result
    record = devcluster.wait_state(job_id, "COMPLETED", "FAILED", "CANCELLED")
    assert marker.read_text().strip() == "caught"
    assert record["job_state"] == "COMPLETED"


@pytest.mark.slurm
def test_requeue_running_job(devcluster):
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:v100:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    (result,) = SlurmBackend(devcluster.env).apply([Action(ActionKind.REQUEUE, job_id)])
    assert result.ok, result
    record = devcluster.wait_for(
        job_id, lambda j: j["restart_cnt"] == 1 and j["job_state"] != "COMPLETING", what="requeued"
    )
    assert record["job_state"] in ("PENDING", "REQUEUED", "RUNNING", "CONFIGURING")
    assert record["priority"] > 0  # requeued, not held
    # the dev cluster's short cred_expire makes a requeued job eligible again after ~11 s, not 121 s
    devcluster.wait_for(job_id, lambda j: j["job_state"] == "RUNNING" and j["restart_cnt"] == 1, 60, "runs again")
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_requeue_hold_then_release(devcluster):
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:v100:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    (result,) = backend.apply([Action(ActionKind.REQUEUE_HOLD, job_id)])
    assert result.ok, result
    record = devcluster.wait_for(
        job_id, lambda j: j["job_state"] == "PENDING" and j["priority"] == 0, what="pending and held"
    )
    assert record["restart_cnt"] == 1
    job = next(j for j in backend.snapshot().jobs if j.job_id == job_id)
    assert job.held and job.state is JobState.PENDING and job.restart_count == 1
    (released,) = backend.apply([Action(ActionKind.RELEASE, job_id)])
    assert released.ok
    devcluster.wait_for(job_id, lambda j: j["priority"] > 0, what="released")
    devcluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_annotate_and_cancel(devcluster):
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--gres=gpu:t4:1", "--time=10")
    devcluster.wait_state(job_id, "RUNNING")
    results = backend.apply([Action(ActionKind.ANNOTATE, job_id, admin_comment="slurmplan: t4x1 | round 3")])
    assert results[0].ok
    assert devcluster.squeue_job(job_id)["admin_comment"] == "slurmplan: t4x1 | round 3"
    (cancel,) = backend.apply([Action(ActionKind.CANCEL, job_id)])
    assert cancel.ok
    devcluster.wait_state(job_id, "CANCELLED")


# ------------------------------------------------------------------------------------------- scale: batching


def test_batch_commands_chunk_job_lists():
    from slurmplan.slurm.backend import BATCH_MAX, batch_commands

    ids = list(range(1, BATCH_MAX + 3))
    hold = batch_commands(ActionKind.HOLD, ids)
    assert len(hold) == 2 and hold[0][:2] == ["scontrol", "uhold"]
    assert hold[0][2] == ",".join(map(str, ids[:BATCH_MAX])) and hold[1][2] == f"{BATCH_MAX + 1},{BATCH_MAX + 2}"
    assert batch_commands(ActionKind.CANCEL, [4, 5]) == [["scancel", "4", "5"]]


def test_batch_results_read_per_job_refusals():
    """Recorded from ``scontrol requeue 1500,8,99999`` on 22.05: it did job 8, refused the other two, exit 1."""
    from slurmplan.slurm.backend import batch_results

    actions = [Action(ActionKind.REQUEUE, j) for j in (1500, 8, 99999)]
    stderr = "Job is pending execution for job 1500\nInvalid job id specified for job 99999\n"
    out = batch_results(actions, [0, 1, 2], 1, stderr)
    assert [out[i].ok for i in range(3)] == [False, True, False]
    assert out[2].message == "Invalid job id specified for job 99999"
    assert batch_results(actions, [0, 1, 2], 1, "slurm_load_jobs error: timeout") == {}  # retried one by one
    assert all(r.ok for r in batch_results(actions, [0, 1, 2], 0, "").values())


@pytest.mark.slurm
def test_batched_hold_release_one_call_each_and_unknown_job_reported(devcluster):
    backend = SlurmBackend(devcluster.env)
    ids = [devcluster.sbatch(LOOP, "--hold", "--gres=gpu:1", "--time=10") for _ in range(3)]
    backend.snapshot()
    before = backend.calls
    results = backend.apply([Action(ActionKind.RELEASE, j) for j in ids] + [Action(ActionKind.RELEASE, 99999)])
    assert backend.calls - before == 1
    assert [r.ok for r in results] == [True, True, True, False] and "99999" in results[3].message
    before = backend.calls
    results = backend.apply([Action(ActionKind.HOLD, j) for j in ids])
    assert backend.calls - before == 1 and all(r.ok for r in results)
    jobs = {j.job_id: j for j in backend.snapshot().jobs}
    assert all(jobs[j].held or jobs[j].state is not JobState.PENDING for j in ids)
    devcluster.run("scancel", *map(str, ids))


@pytest.mark.slurm
def test_update_reads_request_from_last_snapshot_not_a_new_squeue(devcluster):
    """One job's several actions keep their order; the UPDATE needs no squeue after a snapshot."""
    backend = SlurmBackend(devcluster.env)
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:2", "--constraint=a100", "--time=10")
    backend.snapshot()
    before = backend.calls
    update = Action(ActionKind.UPDATE, job_id, "v100", 1, 1, None, "slurmplan: v100x1")
    results = backend.apply([update, Action(ActionKind.RELEASE, job_id)])
    assert all(r.ok for r in results) and backend.calls - before == 2
    running = devcluster.wait_state(job_id, "RUNNING")
    assert running["nodes"].startswith("v100n")
    fresh = SlurmBackend(devcluster.env)  # no snapshot yet: one squeue for that job only
    fresh.apply([Action(ActionKind.UPDATE, job_id, None, 1)])
    assert fresh.calls == 2
    devcluster.run("scancel", str(job_id))


class _StartsBetweenReads(SlurmBackend):
    """A backend during whose first snapshot Slurm starts ``job_id`` after the queue was read, before the nodes are
    (a real release and a real start, placed in the window the daemon's snapshot has)."""

    def __init__(self, devcluster, job_id: int) -> None:
        super().__init__(devcluster.env)
        self.devcluster, self.job_id, self.reads = devcluster, job_id, []

    def _json(self, argv):
        self.reads.append(argv[0])
        if len(self.reads) == 2:
            self.devcluster.run("scontrol", "release", str(self.job_id), check=True)
            self.devcluster.wait_state(self.job_id, "RUNNING")
        return super()._json(argv)


@pytest.mark.slurm
def test_a_job_started_between_the_two_reads_is_read_running(devcluster):
    """The queue is read again when a node holds GPUs no job in it explains: the job shows running on the node
    whose GPUs it holds, not pending beside a node that looks taken (the daemon then held a running job)."""
    job_id = devcluster.sbatch(LOOP, "--hold", "--gres=gpu:t4:1", "--time=10")
    backend = _StartsBetweenReads(devcluster, job_id)
    snap = backend.snapshot()
    assert backend.reads == ["squeue", backend.reads[1], "squeue"]  # the queue, the nodes, the queue once more
    (job,) = [j for j in snap.jobs if j.job_id == job_id]
    assert job.state is JobState.RUNNING and job.nodes
    assert unexplained_gpus(snap) == ()
    devcluster.run("scancel", str(job_id))


# ------------------------------------------------------------------------------- restart speed (issue 14)


def test_start_now_command_lists_jobs_and_only_for_other_nodes():
    from slurmplan.rules import SLURM_22_05
    from slurmplan.slurm.backend import start_now_command

    may_start_now = SLURM_22_05.may_skip_requeue_wait  # the one requeue-wait rule, which the backend follows
    assert start_now_command([3, 4]) == ["scontrol", "update", "jobid=3,4", "StartTime=now"]
    assert may_start_now({"a1", "a2"}, {"v1", "v2"})
    assert not may_start_now({"a1", "a2"}, {"a2", "a3"})  # revoked credential on a2
    assert not may_start_now((), {"v1"}) and not may_start_now({"a1"}, None)


@pytest.mark.slurm
def test_restart_into_a_new_configuration_with_slurms_default_cred_expire(devcluster_factory):
    """With Slurm's defaults a requeued job waits cred_expire + 1 = 121 s (reason BeginTime) before it may start
    again; the backend resets the start time when it releases a requeued job, so the restart takes seconds.
    Moves the job to another node and GPU type, then back onto the node it first ran on (not the one it just
    left, where the old launch credential is revoked: there the backend keeps Slurm's wait)."""
    cluster = devcluster_factory({"cred_expire": None})
    assert "cred_expire" not in (cluster.cluster.paths.conf_dir / "slurm.conf").read_text()
    backend = SlurmBackend(cluster.env)
    trap = "#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 600 & wait\n"
    job_id = cluster.sbatch(trap, "--gres=gpu:1", "--constraint=a100", "--time=10")
    first = cluster.wait_state(job_id, "RUNNING")["nodes"]
    for target_type, target_node in (("v100", "v100n1"), ("a100", first)):  # first: left two moves ago
        time.sleep(1)  # the trap is set
        backend.snapshot()  # as each tick does: the backend sees where the job runs
        started = time.monotonic()
        assert backend.apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])[0].ok
        cluster.wait_for(job_id, lambda j: j["job_state"] == "PENDING" and j["priority"] == 0, what="requeue-held")
        backend.snapshot()
        update = Action(ActionKind.UPDATE, job_id, target_type, 1, 1, (target_node,))
        results = backend.apply([update, Action(ActionKind.RELEASE, job_id)])
        assert all(r.ok for r in results), results
        running = cluster.wait_for(
            job_id, lambda j, n=target_node: j["job_state"] == "RUNNING" and j["nodes"] == n, 60, "running on target"
        )
        assert time.monotonic() - started < 30, "the restart waited for cred_expire"
        assert running["state_reason"] == "None"
    cluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_a_cron_ticks_new_backend_restarts_at_once_from_the_nodes_named_in_the_release(devcluster_factory):
    """A cron ``slurmplan tick`` makes a new backend each tick, so the tick that releases a requeued job never saw
    it run. The RELEASE names the nodes it ran on (``previous_nodes``, from the journaled scheduler state): the
    begin-time reset still happens. Without them the new backend keeps Slurm's 121 s wait (shown last)."""
    cluster = devcluster_factory({"cred_expire": None})
    trap = "#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 600 & wait\n"
    job_id = cluster.sbatch(trap, "--gres=gpu:1", "--constraint=a100", "--time=10")
    first = cluster.wait_state(job_id, "RUNNING")["nodes"]
    time.sleep(1)  # the trap is set

    def checkpoint() -> None:  # tick N (its own backend) sends the signal; the job requeue-holds itself
        tick = SlurmBackend(cluster.env)
        tick.snapshot()
        assert tick.apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])[0].ok
        cluster.wait_for(job_id, lambda j: j["job_state"] == "PENDING" and j["priority"] == 0, what="requeue-held")

    checkpoint()
    started = time.monotonic()
    cron = SlurmBackend(cluster.env)  # tick N+1: a new process
    cron.snapshot()
    update = Action(ActionKind.UPDATE, job_id, "v100", 1, 1, ("v100n1",))
    release = Action(ActionKind.RELEASE, job_id, previous_nodes=(first,))
    assert all(r.ok for r in cron.apply([update, release]))
    cluster.wait_for(job_id, lambda j: j["job_state"] == "RUNNING" and j["nodes"] == "v100n1", 60, "running on v100")
    assert time.monotonic() - started < 30, "the restart waited for cred_expire"

    time.sleep(1)
    checkpoint()
    cron = SlurmBackend(cluster.env)
    cron.snapshot()
    back = Action(ActionKind.UPDATE, job_id, "a100", 1, 1, (first,))
    assert all(r.ok for r in cron.apply([back, Action(ActionKind.RELEASE, job_id)]))  # nodes it ran on unknown
    time.sleep(3)
    waiting = cluster.squeue_job(job_id)
    assert waiting["job_state"] == "PENDING" and waiting["state_reason"] == "BeginTime"  # Slurm's wait stands
    cluster.run("scancel", str(job_id))


@pytest.mark.slurm
def test_a_released_job_waiting_its_begin_time_starts_at_once_when_pinned_elsewhere(devcluster_factory):
    """Released onto the node it just left, a requeued job waits Slurm's 121 s (reason BeginTime); when a later
    tick pins it to other nodes, the backend resets its start time there too, so it starts within seconds."""
    cluster = devcluster_factory({"cred_expire": None})
    backend = SlurmBackend(cluster.env)
    trap = "#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 600 & wait\n"
    job_id = cluster.sbatch(trap, "--gres=gpu:1", "--constraint=a100", "--time=10")
    first = cluster.wait_state(job_id, "RUNNING")["nodes"]
    time.sleep(1)  # the trap is set
    backend.snapshot()
    assert backend.apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])[0].ok
    cluster.wait_for(job_id, lambda j: j["job_state"] == "PENDING" and j["priority"] == 0, what="requeue-held")
    backend.snapshot()
    assert all(r.ok for r in backend.apply([Action(ActionKind.UPDATE, job_id, "a100", 1, 1, (first,))]))
    assert backend.apply([Action(ActionKind.RELEASE, job_id)])[0].ok
    cluster.wait_for(job_id, lambda j: j["state_reason"] == "BeginTime", 30, "waiting for its begin time")
    started = time.monotonic()
    backend.snapshot()  # the next tick sees it waiting
    assert backend.apply([Action(ActionKind.UPDATE, job_id, "v100", 1, 1, ("v100n1",))])[0].ok
    cluster.wait_for(job_id, lambda j: j["job_state"] == "RUNNING" and j["nodes"] == "v100n1", 60, "running on v100n1")
    assert time.monotonic() - started < 30, "the restart waited for cred_expire"
    cluster.run("scancel", str(job_id))
