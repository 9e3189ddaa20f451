"""The launcher's small parts: worker placement, sample order, signals, requeue countdown, reports, env."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmplan.domain import Measurement, Plan, ValidationError
from slurmplan.launch.dist import DistEnv, first_host
from slurmplan.launch.dist import init as dist_init
from slurmplan.launch.ests import WorkerSampler, assign_workers
from slurmplan.launch.reports import Progress, ThroughputMeter, append_report, measurement_to_dict, report_path
from slurmplan.launch.requeue import requeue_command, requeue_job
from slurmplan.launch.signals import StopFlag, resolve_signal
from slurmplan.perf.measurements import measurement_from_dict


@given(st.integers(1, 64).flatmap(lambda p: st.tuples(st.just(p), st.integers(1, p))))
def test_assignment_covers_every_worker_once_in_order(case: tuple[int, int]) -> None:
    max_p, world = case
    parts = assign_workers(max_p, world)
    assert len(parts) == world
    assert [v for part in parts for v in part] == list(range(max_p))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_weighted_assignment_gives_faster_gpus_more_workers() -> None:
    parts = assign_workers(8, 3, weights=[3.0, 1.5, 1.5])  # EasyScale's example: a V100 and two P100s
    assert [len(p) for p in parts] == [4, 2, 2]


@pytest.mark.parametrize(("max_p", "world"), [(0, 1), (2, 3), (4, 0)])
def test_bad_assignment_is_refused(max_p: int, world: int) -> None:
    with pytest.raises(ValidationError):
        assign_workers(max_p, world)


def test_sampler_steps_partition_each_epoch() -> None:
    s = WorkerSampler(dataset_len=48, max_p=4, worker_batch=3, seed=1)
    epoch0 = [i for step in range(4) for v in range(4) for i in s.indices(step, v)]
    assert sorted(epoch0) == list(range(48))
    assert epoch0 != list(range(48))  # shuffled
    # micro-batches cut the worker's slice in order
    assert s.indices(5, 2, 0, 1) + s.indices(5, 2, 1, 1) + s.indices(5, 2, 2, 1) == s.indices(5, 2)
    epoch1 = [i for step in range(4, 8) for v in range(4) for i in s.indices(step, v)]
    assert sorted(epoch1) == list(range(48)) and epoch1 != epoch0
    assert WorkerSampler(48, 4, 3, seed=1).indices(6, 3) == s.indices(6, 3)  # a pure function


@pytest.mark.parametrize(("name", "expected"), [("USR2", signal.SIGUSR2), ("SIGTERM", signal.SIGTERM), ("10", 10)])
def test_resolve_signal(name: str, expected: int) -> None:
    assert resolve_signal(name) == expected


def test_resolve_signal_reads_environment_and_refuses_kill() -> None:
    assert resolve_signal(None, {"SUBMITIT_PREEMPT_SIGNAL": "USR1"}) == signal.SIGUSR1
    assert resolve_signal(None, {}) == signal.SIGUSR2
    with pytest.raises(ValidationError):
        resolve_signal("KILL")
    with pytest.raises(ValidationError):
        resolve_signal("NOPE")


def test_stop_flag_only_sets_a_flag_and_restores_the_old_handler() -> None:
    before = signal.getsignal(signal.SIGUSR2)
    flag = StopFlag(signal.SIGUSR2).install()
    try:
        signal.raise_signal(signal.SIGUSR2)
        assert flag.triggered
        assert not flag.previous_is_submitit
    finally:
        flag.uninstall()
    assert signal.getsignal(signal.SIGUSR2) == before


def test_requeue_commands() -> None:
    assert requeue_command("42", hold=True) == ("scontrol", "requeuehold", "42")
    assert requeue_command("42", hold=False) == ("scontrol", "requeue", "42")


def test_requeue_countdown_and_outside_slurm(tmp_path: Path) -> None:
    assert not requeue_job(hold=False, max_requeues=3, env={}).requeued
    done = requeue_job(hold=False, max_requeues=3, env={"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "3"})
    assert not done.requeued and "limit 3" in done.message and done.command == ()
    # A real command that fails (no controller here) is reported, not raised.
    failed = requeue_job(hold=True, max_requeues=3, env={"SLURM_JOB_ID": "7"}, scontrol="false")
    assert not failed.requeued and failed.command == ("false", "requeuehold", "7")


def test_report_line_is_what_the_daemon_ingests(tmp_path: Path) -> None:
    m = Measurement(
        "gpt", "a100", 8, Plan(dp=2, tp=4, micro_batch=2), 123.5, memory_gb=30.5, job_id=77, time=1.0, stack="ddp"
    )
    path = report_path({"SLURMPLAN_REPORT_DIR": str(tmp_path), "SLURM_JOB_ID": "77"})
    assert path == tmp_path / "77.jsonl"
    assert append_report(m, path) and append_report(m, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert measurement_from_dict(json.loads(lines[0])) == m
    assert set(measurement_to_dict(m)) == {
        "job_id",
        "model",
        "gpu_type",
        "gpus",
        "nodes",
        "plan",
        "samples_per_s",
        "memory_gb",
        "time",
        "stack",
    }
    # a report naming a framework the model does not know is refused, naming the field and the allowed values
    with pytest.raises(ValidationError) as bad:
        measurement_from_dict({**json.loads(lines[0]), "stack": "jax"})
    assert bad.value.field == "stack" and "megatron, deepspeed, ddp, fsdp" in str(bad.value)


def test_report_line_carries_progress_and_still_reads_as_a_measurement(tmp_path: Path) -> None:
    m = Measurement("gpt", "a100", 2, Plan(dp=2), 10.0, job_id=5, time=1.0)
    path = tmp_path / "5.jsonl"
    assert append_report(m, path, Progress(step=40, checkpoint_step=30, total_steps=100))
    assert append_report(m, path, Progress(step=41))
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert (first["step"], first["checkpoint_step"], first["total_steps"]) == (40, 30, 100)
    assert (second["step"], second["checkpoint_step"], second["total_steps"]) == (41, None, None)
    # the daemon's reader takes the measurement, and the progress keys as the job's progress (issue 23)
    progress = {"step": 40.0, "checkpoint_step": 30.0, "total_steps": 100.0}
    assert measurement_from_dict(first) == dataclasses.replace(m, extra=progress)
    assert measurement_from_dict(second).extra == {"step": 41.0}


def test_report_to_unwritable_folder_is_not_fatal(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    m = Measurement("m", "cpu", 1, Plan(), 1.0)
    assert not append_report(m, blocker / "sub" / "1.jsonl")


def test_meter_skips_warm_up_step() -> None:
    meter = ThroughputMeter(every_s=0.0)
    meter.step_done(100)
    assert meter.take() is None
    meter.step_done(100)
    rate = meter.take()
    assert rate is not None and rate > 0


def test_dist_env_from_torchrun_srun_and_batch() -> None:
    tr = DistEnv.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "9"})
    assert (tr.rank, tr.world_size, tr.local_rank, tr.master_addr, tr.master_port) == (3, 4, 1, "h", 9)
    step = {
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_JOB_ID": "1234",
        "SLURM_JOB_NODELIST": "gpu[03-05,9],cpu1",
    }
    sr = DistEnv.from_env({**step, "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3"})
    # gpu03 is not a host name here: the rendezvous falls back to the node srun was started from
    assert (sr.rank, sr.world_size, sr.master_addr, sr.master_port) == (5, 8, "10.1.2.3", 21234)
    local = DistEnv.from_env({**step, "SLURM_JOB_NODELIST": "localhost"})
    assert local.master_addr == "localhost"
    batch = DistEnv.from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "1"})
    assert batch.world_size == 1  # a batch script without srun is one process
    # a step on one node meets on loopback, whatever its node is called or resolves to
    one_node = DistEnv.from_env({**step, "SLURM_JOB_NODELIST": "localhost", "SLURM_STEP_NUM_NODES": "1"})
    assert one_node.master_addr == "127.0.0.1"
    two_nodes = {**step, "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3", "SLURM_STEP_NUM_NODES": "2"}
    assert DistEnv.from_env(two_nodes).master_addr == "10.1.2.3"


def test_nccl_refuses_a_local_rank_without_its_gpu_before_touching_cuda() -> None:
    """Two processes on a node where this one sees fewer GPUs (``--nproc 2`` on a one-GPU machine, seen on an
    H200): a clear error naming LOCAL_RANK, not CUDA's "invalid device ordinal" from ``set_device``. Here on the
    CPU (no GPU) any local rank is past the GPUs; nothing is joined."""
    import torch

    env = DistEnv(rank=1, world_size=2, local_rank=torch.cuda.device_count(), master_port=1)
    with pytest.raises(ValidationError, match="LOCAL_RANK.*one process per GPU"):
        dist_init(env, "nccl")
    assert not torch.distributed.is_initialized()


@pytest.mark.parametrize(("nodelist", "host"), [("n1", "n1"), ("node[001-004]", "node001"), ("a[7],b", "a7")])
def test_first_host(nodelist: str, host: str) -> None:
    assert first_host(nodelist) == host


def test_checkpoint_store_replaces_a_step_and_ignores_incomplete_folders(tmp_path: Path) -> None:
    import torch

    from slurmplan.launch.checkpoint import CheckpointStore

    store = CheckpointStore(tmp_path, keep=2)
    assert store.latest() is None and store.load() is None
    store.save({"v": torch.tensor([1.0])}, step=3)
    store.save({"v": torch.tensor([2.0])}, step=3)  # the same step again (a finished job started once more)
    (tmp_path / "step-00000009").mkdir()  # a folder without the completion marker is not a checkpoint
    assert store.latest() == tmp_path / "step-00000003"
    assert torch.equal(store.load()["v"], torch.tensor([2.0]))
    assert not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())


def test_micro_batch_follows_the_plan_only_when_asked() -> None:
    from launch_helpers import tiny_spec

    from slurmplan.launch.plan_env import AssignedPlan, PlanSource
    from slurmplan.launch.trainer import resolve_micro_batch

    managed = AssignedPlan(Plan(micro_batch=2), PlanSource.ENV)
    odd = AssignedPlan(Plan(micro_batch=3), PlanSource.ENV)
    assert resolve_micro_batch(tiny_spec(1, None, micro_batch=None), managed) == 4  # the worker batch
    assert resolve_micro_batch(tiny_spec(1, None, micro_batch=None, follow_plan_micro_batch=True), managed) == 2
    assert resolve_micro_batch(tiny_spec(1, None, micro_batch=None, follow_plan_micro_batch=True), odd) == 4
    assert resolve_micro_batch(tiny_spec(1, None, micro_batch=1, follow_plan_micro_batch=True), managed) == 1
    with pytest.raises(ValidationError):
        tiny_spec(1, None, micro_batch=3)  # must divide worker_batch = 4


def test_report_path_outside_a_job_is_the_working_directory(tmp_path: Path) -> None:
    assert report_path({}) == tmp_path / "slurmplan-reports" / "local.jsonl"  # conftest made tmp_path the cwd
    assert report_path({"SLURM_JOB_ID": "5"}) == Path("/var/lib/slurmplan/reports/5.jsonl")
    assert report_path({"SLURM_JOB_ID": "5", "SLURMPLAN_REPORT_DIR": "/x"}) == Path("/x/5.jsonl")
    keyed = {"SLURM_JOB_ID": "5", "SLURMPLAN_REPORT_DIR": "/x", "SLURM_CLUSTER_NAME": "c1"}
    assert report_path(keyed) == Path("/x/c1.5.jsonl")  # issue 29 item 7: clusters on one host never collide
