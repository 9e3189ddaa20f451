"""The in-memory backend does what scontrol does on Slurm 22.05, action by action."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmplan.domain import Action, ActionKind, JobState
from slurmplan.rules import SLURM_22_05, SlurmRules
from slurmplan.sim.backend import SimBackend, SimJob
from slurmplan.sim.cluster import parse_cluster

NO_DELAY = replace(SLURM_22_05, requeue_start_delay_s=0.0)
"""Slurm's rules without the requeue begin-time delay, for tests about the other rules."""


def backend(cost: float = 78.0, rules: SlurmRules = NO_DELAY) -> SimBackend:
    return SimBackend(
        nodes=parse_cluster("v100:2x2,k80:1x2").nodes(), rate_fn=lambda *a: 10.0, reconfig_cost_s=cost, rules=rules
    )


def submit(
    b: SimBackend, job_id: int, gpus: int = 2, gpu_type: str = "v100", work: float = 1000.0, typed: bool = False
) -> SimJob:
    job = SimJob(job_id=job_id, submit_time=b.now, work_total=work, gpu_type=gpu_type, gpus_per_node=gpus, typed=typed)
    b.submit(job)
    return job


def act(b: SimBackend, kind: ActionKind, job_id: int, **kw) -> bool:
    (result,) = b.apply([Action(kind, job_id, **kw)])
    return result.ok


def test_managed_jobs_are_submitted_held_and_start_on_release():
    b = backend()
    submit(b, 1)
    (job,) = b.snapshot().jobs
    assert job.held and job.state is JobState.PENDING and job.state_reason == "JobHeldUser"
    assert act(b, ActionKind.RELEASE, 1)
    (job,) = b.snapshot().jobs
    assert job.state is JobState.RUNNING and job.nodes == ("v100-0000",)
    assert b.snapshot().cluster.node("v100-0000").gpus_used == 2


def test_release_on_a_busy_nodelist_waits_and_starts_when_the_gpus_free():
    b = backend()
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    submit(b, 2)
    assert act(b, ActionKind.UPDATE, 2, nodelist=("v100-0000",), node_count=1)
    assert act(b, ActionKind.RELEASE, 2)
    assert b.jobs[2].state is JobState.PENDING  # its node is taken
    done = b.advance(100.0)  # job 1: 1000 units at 10/s
    assert [j.job_id for j in done] == [1]
    assert b.jobs[2].state is JobState.RUNNING and b.jobs[2].nodes == ("v100-0000",)


def test_update_changes_a_pending_request_but_only_the_comment_of_a_running_job():
    b = backend()
    submit(b, 1)
    assert act(b, ActionKind.UPDATE, 1, gpu_type="k80", gpus_per_node=2, node_count=1)
    act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].nodes == ("k80-0000",)
    assert not act(b, ActionKind.UPDATE, 1, gpu_type="v100")
    assert act(b, ActionKind.UPDATE, 1, gpu_type="k80", admin_comment="slurmplan: k80x2")
    assert b.snapshot().jobs[0].admin_comment == "slurmplan: k80x2"


def test_hold_is_refused_for_a_running_job_and_unknown_jobs_are_refused():
    b = backend()
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    assert not act(b, ActionKind.HOLD, 1)
    assert not act(b, ActionKind.RELEASE, 99)


def test_signal_checkpoints_requeue_holds_and_costs_the_reconfiguration_on_restart():
    b = backend(cost=78.0)
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    b.advance(50.0)
    assert act(b, ActionKind.SIGNAL, 1, signal="USR2")
    job = b.jobs[1]
    assert job.state is JobState.PENDING and job.held and job.restart_count == 1
    assert job.work_done == pytest.approx(500.0)  # nothing lost: it checkpointed
    assert b.busy_gpus == 0
    act(b, ActionKind.RELEASE, 1)
    assert b.next_completion() == pytest.approx(50.0 + 78.0 + 50.0)
    # the forced requeue-hold that follows a signal finds it already back in the queue
    assert act(b, ActionKind.SIGNAL, 1) and act(b, ActionKind.REQUEUE_HOLD, 1)


def test_requeue_without_signal_loses_the_work_since_the_last_checkpoint():
    b = backend(cost=0.0)
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    b.advance(30.0)
    assert act(b, ActionKind.REQUEUE, 1)
    job = b.jobs[1]
    assert job.work_done == 0.0
    # REQUEUE leaves it released: Slurm starts it again at once
    assert job.state is JobState.RUNNING and job.restart_count == 1


def test_cancel_frees_the_gpus_and_ends_the_job():
    b = backend()
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    assert act(b, ActionKind.CANCEL, 1)
    assert b.busy_gpus == 0 and b.finished[1].state is JobState.CANCELLED
    assert b.snapshot().jobs == ()


def test_time_never_goes_back():
    b = backend()
    b.advance(10.0)
    with pytest.raises(ValueError):
        b.advance(5.0)


# ------------------------------------------------------------------------ Slurm's rules, as the Slurm backend has them


def test_the_simulated_backend_enforces_the_newest_rules_unless_told():
    """The Slurm backend takes the rules of the Slurm it talks to (``tests/slurm/test_rules.py``); the simulated
    one those it is given, by default the newest measured version's."""
    from slurmplan.rules import NEWEST

    assert SimBackend(nodes=(), rate_fn=lambda *a: 0.0).rules == NEWEST


def test_a_typed_pending_request_keeps_its_type_count_may_change():
    b = backend()
    submit(b, 1, gpu_type="v100", typed=True)
    assert act(b, ActionKind.UPDATE, 1, gpus_per_node=1)
    assert b.jobs[1].gpus_per_node == 1
    (result,) = b.apply([Action(ActionKind.UPDATE, 1, gpu_type="k80", gpus_per_node=1)])
    assert not result.ok
    assert "cannot change the GPU type of a job submitted with a typed request" in result.message
    assert "--constraint=TYPE" in result.message
    assert b.jobs[1].gpu_type == "v100"  # refused: nothing changed


def test_an_untyped_request_moves_type_through_its_feature():
    b = backend()
    submit(b, 1, gpu_type="v100", typed=False)
    (job,) = b.snapshot().jobs
    assert job.gpu_type == "v100" and job.gpu_type_preferred
    assert act(b, ActionKind.UPDATE, 1, gpu_type="k80", gpus_per_node=2)
    assert act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].nodes == ("k80-0000",)


def test_a_requeued_job_waits_its_begin_time_before_it_starts_again():
    b = backend(rules=SLURM_22_05)
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    b.advance(50.0)
    assert act(b, ActionKind.REQUEUE_HOLD, 1)
    assert act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].state is JobState.PENDING  # GPUs free, but Slurm's begin time is 121 s after the requeue
    b.advance(50.0 + 120.0)
    assert b.jobs[1].state is JobState.PENDING
    b.advance(50.0 + 122.0)
    assert b.jobs[1].state is JobState.RUNNING and b.jobs[1].start_time == pytest.approx(50.0 + 121.0)


def test_a_requeued_job_released_onto_other_nodes_starts_at_once_as_the_daemon_resets_its_begin_time():
    b = backend(rules=SLURM_22_05)
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    b.advance(50.0)
    assert b.jobs[1].nodes == ("v100-0000",)
    assert act(b, ActionKind.REQUEUE_HOLD, 1)
    assert act(b, ActionKind.UPDATE, 1, nodelist=("v100-0000",), node_count=1)
    assert act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].state is JobState.PENDING  # the node it just left: Slurm's wait stays
    assert act(b, ActionKind.HOLD, 1)
    assert act(b, ActionKind.UPDATE, 1, gpu_type="k80", nodelist=("k80-0000",), node_count=1)
    assert act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].state is JobState.RUNNING and b.jobs[1].nodes == ("k80-0000",)  # StartTime=now, as on Slurm
    assert SLURM_22_05.may_skip_requeue_wait(("a",), ("b",)) and not SLURM_22_05.may_skip_requeue_wait(("a",), None)
    assert not SLURM_22_05.may_skip_requeue_wait((), ("b",)) and not SLURM_22_05.may_skip_requeue_wait(("a",), ("a",))


def test_a_released_job_waiting_out_its_begin_time_starts_when_pinned_to_other_nodes():
    b = backend(rules=SLURM_22_05)
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    b.advance(50.0)
    assert act(b, ActionKind.REQUEUE_HOLD, 1) and act(b, ActionKind.RELEASE, 1)
    assert b.jobs[1].state is JobState.PENDING  # released, waiting for its begin time
    assert act(b, ActionKind.UPDATE, 1, nodelist=("v100-0001",), node_count=1)
    assert b.jobs[1].state is JobState.RUNNING and b.jobs[1].nodes == ("v100-0001",)


def test_every_start_pays_the_start_latency_holding_its_gpus():
    """Slurm's launch (release -> Started, PrologSlurmctld, slurmd) costs a first start and a restart alike."""
    b = SimBackend(
        nodes=parse_cluster("v100:2x2,k80:1x2").nodes(),
        rate_fn=lambda *a: 10.0,
        reconfig_cost_s=78.0,
        start_latency_s=5.0,
        rules=NO_DELAY,
    )
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    assert b.busy_gpus == 2  # the GPUs are taken from the start, though no work is done yet
    assert b.next_completion() == pytest.approx(5.0 + 100.0)
    b.advance(55.0)
    assert b.jobs[1].work_done == pytest.approx(500.0)
    assert act(b, ActionKind.SIGNAL, 1, signal="USR2")
    act(b, ActionKind.RELEASE, 1)
    assert b.next_completion() == pytest.approx(55.0 + 5.0 + 78.0 + 50.0)


def test_advance_reuses_the_completion_it_was_just_told_only_while_nothing_changed():
    """``next_completion`` hands its answer to the next ``advance`` (the run loop asks both with nothing between);
    an action, a submission or Slurm's pass in between makes ``advance`` look again."""
    b = backend()
    submit(b, 1)
    act(b, ActionKind.RELEASE, 1)
    submit(b, 2, gpu_type="k80", gpus=1, work=500.0)
    act(b, ActionKind.RELEASE, 2)
    assert b.next_completion() == pytest.approx(50.0)  # job 2: 500 units at 10/s
    done = b.advance(60.0)
    assert [j.job_id for j in done] == [2]
    assert b.next_completion() == pytest.approx(100.0)  # job 1
    assert act(b, ActionKind.CANCEL, 1)  # changes what finishes first: the remembered answer is stale
    assert b.advance(200.0) == [] and 1 not in b.running
    submit(b, 3, work=100.0)
    act(b, ActionKind.RELEASE, 3)
    assert b.next_completion() == pytest.approx(210.0)
    submit(b, 4, gpu_type="k80", gpus=1, work=10.0)  # submitted held: nothing runs sooner
    act(b, ActionKind.RELEASE, 4)  # now job 4 ends first, at 201 s
    assert [j.job_id for j in b.advance(205.0)] == [4]


def test_two_completions_inside_one_advance_each_end_at_their_own_time():
    """After the first completion, only the finished job has been brought up to the new ``now``: the second one's
    ETA must count from where its work stands (``last_update``), or it ends late by the time already passed."""
    b = backend()
    submit(b, 1, work=1000.0)  # v100x2 at 10/s: done at 100 s
    act(b, ActionKind.RELEASE, 1)
    submit(b, 2, work=1500.0)  # the other v100 node: done at 150 s
    act(b, ActionKind.RELEASE, 2)
    submit(b, 3, gpu_type="k80", work=1800.0)  # done at 180 s
    act(b, ActionKind.RELEASE, 3)
    done = b.advance(300.0)
    assert [j.job_id for j in done] == [1, 2, 3]
    assert [j.finish_time for j in done] == pytest.approx([100.0, 150.0, 180.0])
