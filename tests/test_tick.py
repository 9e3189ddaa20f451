"""``tick.decide`` end to end: rounds, stickiness, grace periods, diffs, purity, unmanaged GPUs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mechanism.helpers import (
    T0,
    EqualSharePolicy,
    FixedPolicy,
    MiniCluster,
    RequestedPolicy,
    cluster,
    mjob,
    node,
)

from slurmplan.domain import Action, ActionKind, Cell, Cluster, JobState, Plan, Reason, SlurmplanError, ValidationError
from slurmplan.mechanism.engine import on_round_grid
from slurmplan.tick import SchedulerState, TickConfig, TickInput, TickOutput, decide


def kinds(out: TickOutput) -> list[tuple[int, ActionKind]]:
    return [(a.job_id, a.kind) for a in out.actions]


def by_job(out: TickOutput) -> dict:
    return {a.job_id: a for a in out.assignments}


def test_first_tick_holds_unchosen_and_starts_chosen_with_the_plan_comment() -> None:
    jobs = (mjob(1, {"a100": {8: 80.0}}, gpus=8, held=False), mjob(2, {"a100": {1: 9.0}}, held=False))
    policy = FixedPolicy({1: {Cell("a100", 8): 1.0}})
    out = decide(TickInput(T0, cluster(a100=(1, 8)), jobs), policy, SchedulerState())
    assert out.new_round and out.state.round_index == 1
    assert kinds(out) == [(2, ActionKind.HOLD), (1, ActionKind.UPDATE)]  # GPUs are freed before jobs start
    update = out.actions[1]
    assert (update.gpu_type, update.gpus_per_node, update.node_count, update.nodelist) == ("a100", 8, 1, ("a100-0",))
    assert update.admin_comment == "slurmplan: a100x8 dp8 tp1 pp1 mb1 ga1 | since round 1"
    assert by_job(out)[2].reason is Reason.WAITING


def test_second_tick_with_the_same_input_emits_nothing_new() -> None:
    jobs = (mjob(1, {"a100": {2: 20.0}}, gpus=2), mjob(2, {"a100": {8: 70.0}}, gpus=8, held=False))
    inp = TickInput(T0, cluster(a100=(1, 8)), jobs)
    first = decide(inp, RequestedPolicy(), SchedulerState())
    assert kinds(first) == [(2, ActionKind.HOLD), (1, ActionKind.UPDATE), (1, ActionKind.RELEASE)]
    second = decide(inp, RequestedPolicy(), first.state)
    assert not second.new_round and second.actions == ()
    later = decide(replace(inp, now=T0 + 60), RequestedPolicy(), second.state)
    assert later.actions == ()


def test_decide_is_pure() -> None:
    jobs = tuple(mjob(i, {"a100": {1: 10.0 + i, 2: 19.0}, "v100": {1: 4.0}}, gpus=1) for i in range(6))
    inp = TickInput(T0, cluster(a100=(1, 4), v100=(1, 2)), jobs)
    a = decide(inp, EqualSharePolicy(), SchedulerState())
    b = decide(inp, EqualSharePolicy(), SchedulerState())
    assert a.actions == b.actions and a.assignments == b.assignments and a.state.jobs == b.state.jobs
    np.testing.assert_array_equal(a.allocation.x, b.allocation.x)
    c = decide(replace(inp, now=T0 + 400), EqualSharePolicy(), a.state)
    d = decide(replace(inp, now=T0 + 400), EqualSharePolicy(), a.state)
    assert c.actions == d.actions and c.state.jobs == d.state.jobs


AT_ONCE = TickConfig(signal_min_run_s=0.0)
"""For tests whose running jobs start at T0 and are stopped at T0: they are about what follows the checkpoint
signal, not the least run before it (10 s by default, pinned by ``test_a_job_that_just_started_is_signalled_*``)."""


def run_rounds(mini: MiniCluster, policy, rounds: int, tick_s: float = 60.0, config: TickConfig | None = None):
    config = config or TickConfig()
    state = SchedulerState()
    now = T0
    outs = []
    for _ in range(int(rounds * config.round_s / tick_s)):
        out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), policy, state)
        mini.apply(out.actions, now)
        state = out.state
        outs.append(out)
        now += tick_s
    return state, outs


def test_no_starvation_every_job_with_a_share_runs_its_fair_part() -> None:
    jobs = [mjob(i, {"a100": {1: 10.0}}, submit=T0 + i) for i in range(1, 4)] + [
        mjob(4, {"a100": {2: 18.0}}, gpus=2, submit=T0 + 4)
    ]
    mini = MiniCluster(cluster(a100=(1, 2)), jobs)
    state, _ = run_rounds(mini, EqualSharePolicy(), rounds=30)
    attained = {j: s.attained_s for j, s in state.jobs.items()}
    total = 30 * 360.0
    assert all(t > 0 for t in attained.values()), attained
    # X gives each job 2/5 of the time (5 GPUs wanted, 2 exist): every job gets a good part of it.
    for j, t in attained.items():
        assert t >= 0.2 * total, (j, attained)


def test_grace_expiry_requeues_held_and_the_winner_then_starts() -> None:
    running = mjob(1, {"a100": {1: 10.0}}, state=JobState.RUNNING, nodes=("a100-0",))
    waiting = mjob(2, {"a100": {1: 10.0}})
    mini = MiniCluster(cluster(a100=(1, 1)), [running, waiting], exit_on_signal=False)
    policy = FixedPolicy({2: {Cell("a100", 1): 1.0}})
    config = replace(AT_ONCE, grace_s=120.0)
    outs = []
    state = SchedulerState()
    for now in (T0, T0 + 60, T0 + 130, T0 + 190):
        out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), policy, state)
        mini.apply(out.actions, now)
        state = out.state
        outs.append(out)
    assert kinds(outs[0]) == [(1, ActionKind.SIGNAL), (2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]
    assert outs[0].actions[0].signal == "USR2" and by_job(outs[0])[1].reason is Reason.PREEMPTED
    assert outs[1].actions == ()
    assert kinds(outs[2]) == [(1, ActionKind.REQUEUE_HOLD)]
    assert outs[3].actions == ()
    assert mini.jobs[2].job.state is JobState.RUNNING and mini.jobs[1].job.held


def test_unmanaged_gpus_are_respected() -> None:
    base = Cluster((node("a100-0", "a100", 8, used=6),))
    jobs = (mjob(1, {"a100": {4: 40.0}}, gpus=4), mjob(2, {"a100": {2: 20.0}}, gpus=2, submit=T0 + 1))
    out = decide(TickInput(T0, base, jobs), RequestedPolicy(), SchedulerState())
    assert by_job(out)[1].reason is Reason.WAITING  # 4 GPUs wanted, only 2 not held by unmanaged jobs
    assert by_job(out)[2].reason is Reason.SCHEDULED and by_job(out)[2].nodes == ("a100-0",)
    assert kinds(out) == [(2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]


def test_unmanaged_usage_is_observed_usage_minus_managed_jobs() -> None:
    # 8 GPUs, 6 used: 2 by managed job 1, 4 by others; job 2 wants 2, job 3 wants 4.
    base = Cluster((node("a100-0", "a100", 8, used=6),))
    jobs = (
        mjob(1, {"a100": {2: 20.0}}, gpus=2, state=JobState.RUNNING, nodes=("a100-0",)),
        mjob(2, {"a100": {2: 20.0}}, gpus=2, submit=T0 + 1),
        mjob(3, {"a100": {4: 40.0}}, gpus=4, submit=T0 + 2),
    )
    out = decide(TickInput(T0, base, jobs), RequestedPolicy(), SchedulerState())
    reasons = {j: a.reason for j, a in by_job(out).items()}
    assert reasons == {1: Reason.KEPT, 2: Reason.SCHEDULED, 3: Reason.WAITING}


@pytest.mark.parametrize(("a100_speed", "moves"), [(10.5, False), (40.0, True)])
def test_stickiness_keeps_small_gains_and_moves_large_ones(a100_speed: float, moves: bool) -> None:
    job = mjob(
        1, {"a100": {1: a100_speed}, "v100": {1: 10.0}}, gpu_type="v100", state=JobState.RUNNING, nodes=("v100-0",)
    )
    mini = MiniCluster(cluster(a100=(1, 1), v100=(1, 1)), [job])
    policy = FixedPolicy({1: {Cell("a100", 1): 1.0}})
    out = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed(), AT_ONCE), policy, SchedulerState())
    a = by_job(out)[1]
    if not moves:
        assert a.reason is Reason.KEPT and a.nodes == ("v100-0",) and "not above" in a.detail
        assert kinds(out) == [(1, ActionKind.ANNOTATE)]
        assert out.actions[0].admin_comment.startswith("slurmplan: v100x1 dp1")
        return
    assert a.reason is Reason.MOVED and a.cell == Cell("a100", 1)
    assert kinds(out) == [(1, ActionKind.SIGNAL)]
    assert out.state.jobs[1].reconfigurations == 1
    mini.apply(out.actions, T0)  # the job checkpoints and requeue-holds itself (the launcher's contract)
    nxt = decide(TickInput(T0 + 30, mini.snapshot_cluster(), mini.managed(), AT_ONCE), policy, out.state)
    assert kinds(nxt) == [(1, ActionKind.UPDATE), (1, ActionKind.RELEASE)] and nxt.actions[0].gpu_type == "a100"
    mini.apply(nxt.actions, T0 + 30)
    assert mini.jobs[1].job.state is JobState.RUNNING and mini.jobs[1].job.nodes == ("a100-0",)


def test_gpus_freed_between_rounds_are_refilled_from_the_rounds_x() -> None:
    jobs = [mjob(1, {"a100": {1: 10.0}}), mjob(2, {"a100": {1: 10.0}}, submit=T0 + 1)]
    mini = MiniCluster(cluster(a100=(1, 1)), jobs)
    first = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), SchedulerState())
    mini.apply(first.actions, T0)
    assert by_job(first)[2].reason is Reason.WAITING
    mini.finish(1)
    nxt = decide(TickInput(T0 + 60, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), first.state)
    assert not nxt.new_round and set(nxt.state.jobs) == {2}
    assert by_job(nxt)[2].reason is Reason.SCHEDULED and "freed" in by_job(nxt)[2].detail
    assert kinds(nxt) == [(2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]


def test_new_job_between_rounds_starts_at_once_on_free_gpus() -> None:
    """No wait at submission (issue 23): a job that arrives between rounds while GPUs it can use are free starts
    at the next tick, as plain Slurm would start it, not at the next round."""
    mini = MiniCluster(cluster(a100=(1, 2)), [mjob(1, {"a100": {1: 10.0}})])
    first = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), SchedulerState())
    mini.apply(first.actions, T0)
    mini.submit(mjob(2, {"a100": {1: 10.0}}, held=False))  # pending, not yet held, not yet started by Slurm
    nxt = decide(TickInput(T0 + 60, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), first.state)
    assert not nxt.new_round
    assert kinds(nxt) == [(2, ActionKind.UPDATE)]  # its GPU and nodes; not held, so nothing to release
    assert by_job(nxt)[2].reason is Reason.SCHEDULED and "on arrival" in by_job(nxt)[2].detail


def test_new_job_between_rounds_is_held_when_no_gpu_is_free() -> None:
    mini = MiniCluster(cluster(a100=(1, 1)), [mjob(1, {"a100": {1: 10.0}})])
    first = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), SchedulerState())
    mini.apply(first.actions, T0)
    mini.submit(mjob(2, {"a100": {1: 10.0}}, held=False))
    nxt = decide(TickInput(T0 + 60, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), first.state)
    assert kinds(nxt) == [(2, ActionKind.HOLD)] and by_job(nxt)[2].reason is Reason.WAITING
    rnd = decide(TickInput(T0 + 360, mini.snapshot_cluster(), mini.managed()), EqualSharePolicy(), nxt.state)
    assert rnd.new_round and rnd.allocation is not None and 2 in rnd.allocation.job_ids


def test_attained_time_grows_for_running_jobs_only() -> None:
    mini = MiniCluster(
        cluster(a100=(1, 1)), [mjob(1, {"a100": {1: 10.0}}), mjob(2, {"a100": {1: 10.0}}, submit=T0 + 1)]
    )
    state, _ = run_rounds(mini, FixedPolicy({1: {Cell("a100", 1): 1.0}}), rounds=1)
    assert state.jobs[1].attained_s == pytest.approx(300.0)  # started at T0, 5 ticks of 60 s since
    assert state.jobs[1].attained_by_cell == {Cell("a100", 1): pytest.approx(300.0)}
    assert state.jobs[2].attained_s == 0.0


def test_user_hints_in_the_admin_comment_are_kept() -> None:
    job = mjob(1, {"a100": {1: 10.0}}, admin_comment="slurmplan:model=gpt2;gpus=1")
    out = decide(TickInput(T0, cluster(a100=(1, 1)), (job,)), RequestedPolicy(), SchedulerState())
    comment = out.actions[0].admin_comment
    assert comment.startswith("slurmplan:model=gpt2;gpus=1 || slurmplan: a100x1 dp1 tp1 pp1 mb1 ga1 | since round 1")


def test_unschedulable_job_is_held_with_a_reason() -> None:
    job = mjob(1, {"a100": {16: 100.0}}, gpus=16, held=False)
    out = decide(TickInput(T0, cluster(a100=(1, 8)), (job,)), RequestedPolicy(), SchedulerState())
    assert kinds(out) == [(1, ActionKind.HOLD)] and by_job(out)[1].reason is Reason.UNSCHEDULABLE


def test_time_shares_across_gpu_types_follow_x_despite_stickiness() -> None:
    # X: each job half of the time on the a100, half on the v100. Moving to the v100 is a loss for a job, so
    # stickiness alone would keep whoever holds the a100 there for ever; the deferred move must hand it over.
    table = {"a100": {1: 10.0}, "v100": {1: 4.0}}
    jobs = [mjob(1, table), mjob(2, table, submit=T0 + 1)]
    half = {Cell("a100", 1): 0.5, Cell("v100", 1): 0.5}
    mini = MiniCluster(cluster(a100=(1, 1), v100=(1, 1)), jobs)
    state, _ = run_rounds(mini, FixedPolicy({1: half, 2: half}), rounds=20)
    for job_id in (1, 2):
        on_a100 = state.jobs[job_id].attained_by_cell[Cell("a100", 1)]
        assert 0.35 * 20 * 360 <= on_a100 <= 0.65 * 20 * 360, (job_id, dict(state.jobs[job_id].attained_by_cell))


def test_chosen_job_that_no_nodes_fit_is_unplaceable_and_held() -> None:
    # 9 free GPUs in all (5 of 8 held by others on each node), but 8 GPUs cannot be split equally over 3 nodes.
    base = Cluster(tuple(node(f"a100-{i}", "a100", 8, used=5) for i in range(3)))
    job = mjob(1, {"a100": {8: 80.0}}, gpus=8, held=False)
    out = decide(TickInput(T0, base, (job,)), RequestedPolicy(), SchedulerState())
    a = by_job(out)[1]
    assert a.reason is Reason.UNPLACEABLE and "9 GPUs on 3 nodes" in a.detail
    assert kinds(out) == [(1, ActionKind.HOLD)]


def test_job_is_not_spread_over_more_nodes_than_its_throughput_was_predicted_for() -> None:
    """Issue 23: "spread over 2 nodes, throughput predicted for 1" for a 2-GPU job on 2-GPU T4 nodes, each holding
    a 1-GPU job. A job predicted on one node is not split over two (its throughput there was never predicted, and
    Slurm splits no per-node GRES request either); a candidate for two nodes may use two."""
    base = cluster(t4=(2, 2))
    ones = [mjob(i, {"t4": {1: 10.0}}, state=JobState.RUNNING, nodes=(f"t4-{i}",)) for i in (0, 1)]
    new = mjob(2, {"t4": {2: 18.0}}, gpus=2)
    out = decide(TickInput(T0, base, (*ones, new)), RequestedPolicy(), SchedulerState())
    a = by_job(out)[2]
    assert len(a.nodes) <= 1 and "spread" not in a.detail
    two = replace(new, candidates=tuple(replace(c, nodes=2) for c in new.candidates))
    out = decide(TickInput(T0, base, (*ones, two)), RequestedPolicy(), SchedulerState())
    assert by_job(out)[2].nodes == ("t4-0", "t4-1") and by_job(out)[2].gpus_per_node == 1


class FailingPolicy:
    """A policy whose solver fails from the second call on (a real outcome of an infeasible LP)."""

    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def allocate(self, problem):
        self.calls += 1
        if self.calls > 1:
            raise SlurmplanError("solver status infeasible")
        return RequestedPolicy().allocate(problem)


def test_a_failing_policy_keeps_the_previous_rounds_allocation() -> None:
    policy = FailingPolicy()
    inp = TickInput(T0, cluster(a100=(1, 1)), (mjob(1, {"a100": {1: 10.0}}),))
    first = decide(inp, policy, SchedulerState())
    second = decide(replace(inp, now=T0 + 360), policy, first.state)
    assert second.new_round and policy.calls == 2
    assert second.allocation is first.allocation
    assert by_job(second)[1].reason is Reason.SCHEDULED


def test_wake_at_names_the_grace_expiry() -> None:
    running = mjob(1, {"a100": {1: 10.0}}, state=JobState.RUNNING, nodes=("a100-0",))
    jobs = (running, mjob(2, {"a100": {1: 10.0}}))
    policy = FixedPolicy({2: {Cell("a100", 1): 1.0}})
    out = decide(TickInput(T0, cluster(a100=(1, 1)), jobs, AT_ONCE), policy, SchedulerState())
    assert kinds(out)[0] == (1, ActionKind.SIGNAL) and out.wake_at == T0 + AT_ONCE.grace_s


def test_job_running_outside_its_candidates_is_left_alone_until_the_next_round() -> None:
    base = cluster(a100=(1, 1), v100=(1, 1))
    first = decide(TickInput(T0, base, ()), RequestedPolicy(), SchedulerState())
    odd = mjob(1, {"a100": {1: 10.0}}, gpu_type="v100", state=JobState.RUNNING, nodes=("v100-0",))
    between = decide(TickInput(T0 + 60, base, (odd,)), RequestedPolicy(), first.state)
    assert between.actions == () and by_job(between)[1].reason is Reason.KEPT
    rnd = decide(TickInput(T0 + 360, base, (odd,)), FixedPolicy({1: {Cell("a100", 1): 1.0}}), between.state)
    assert by_job(rnd)[1].reason is Reason.SCHEDULED and by_job(rnd)[1].cell == Cell("a100", 1)
    assert kinds(rnd) == [(1, ActionKind.SIGNAL)]  # restarts in a configuration slurmplan can predict


def test_kept_jobs_are_repacked_when_they_fragment_the_nodes_a_larger_job_needs() -> None:
    # Two 8-GPU nodes. Job 1 (4 GPUs) runs on a100-0, job 2 waits for 12 GPUs (6 + 6). Keeping job 1 on its
    # node would leave only 4 there: job 2 could never be placed while job 1 keeps winning its column.
    base = cluster(a100=(2, 8))
    small = mjob(1, {"a100": {4: 40.0}}, gpus=4, state=JobState.RUNNING, nodes=("a100-0",))
    small = replace(small, candidates=tuple(replace(c, nodes=2) for c in small.candidates))  # may run on 2 nodes
    large = mjob(2, {"a100": {12: 100.0}}, gpus=12, submit=T0 + 1)
    policy = FixedPolicy({1: {Cell("a100", 4): 0.9}, 2: {Cell("a100", 12): 0.5}})
    out = decide(TickInput(T0, base, (small, large), AT_ONCE), policy, SchedulerState())
    a1, a2 = by_job(out)[1], by_job(out)[2]
    assert a2.reason is Reason.SCHEDULED and a2.nodes == ("a100-0", "a100-1") and a2.gpus_per_node == 6
    assert a1.reason is Reason.MOVED and a1.nodes == ("a100-0", "a100-1") and a1.gpus_per_node == 2
    assert "so that larger jobs fit" in a1.detail
    assert kinds(out) == [(1, ActionKind.SIGNAL), (2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]


def test_kept_job_is_annotated_with_the_plan_it_runs_not_a_newer_best_plan() -> None:
    mini = MiniCluster(cluster(a100=(1, 1)), [mjob(1, {"a100": {1: 10.0}})])
    first = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed()), RequestedPolicy(), SchedulerState())
    mini.apply(first.actions, T0)
    refit = mini.jobs[1]
    better = tuple(replace(c, plan=Plan(micro_batch=4), throughput=12.0) for c in refit.candidates)
    mini.jobs[1] = replace(refit, candidates=better)  # the performance model found a better plan meanwhile
    nxt = decide(TickInput(T0 + 360, mini.snapshot_cluster(), mini.managed()), RequestedPolicy(), first.state)
    a = by_job(nxt)[1]
    assert a.reason is Reason.KEPT and a.plan == Plan(dp=1)
    assert kinds(nxt) == []  # its comment already names the plan it runs (mb1): nothing to rewrite
    assert " mb1 " in mini.jobs[1].job.admin_comment and "since round 1" in mini.jobs[1].job.admin_comment


def test_rounds_without_change_send_nothing_for_running_jobs_and_a_lost_comment_is_rewritten() -> None:
    """Slurm calls are proportional to changed decisions: renewing a lease writes nothing (it used to rewrite
    every running job's ``round N | lease until`` text every round, one ``scontrol update`` each)."""
    table = {"a100": {1: 10.0}}
    mini = MiniCluster(cluster(a100=(1, 4)), [mjob(i, table, submit=T0 + i) for i in range(1, 4)])
    state, _ = run_rounds(mini, RequestedPolicy(), rounds=1)
    assert all(j.job.state is JobState.RUNNING for j in mini.jobs.values())
    for r in range(1, 4):  # three more rounds, nothing changed
        out = decide(TickInput(T0 + 360 * r, mini.snapshot_cluster(), mini.managed()), RequestedPolicy(), state)
        assert out.new_round and out.actions == ()
        assert {a.reason for a in out.assignments} == {Reason.KEPT}
        state = out.state
    mini.apply((Action(ActionKind.ANNOTATE, 2, admin_comment="ticket 42"),), T0 + 360 * 4)  # an admin's edit
    out = decide(TickInput(T0 + 360 * 4, mini.snapshot_cluster(), mini.managed()), RequestedPolicy(), state)
    assert kinds(out) == [(2, ActionKind.ANNOTATE)]
    assert out.actions[0].admin_comment == "ticket 42 || slurmplan: a100x1 dp1 tp1 pp1 mb1 ga1 | since round 5"


def test_gpus_reserved_for_an_unplaceable_job_go_to_the_next_job() -> None:
    base = Cluster(tuple(node(f"a100-{i}", "a100", 8, used=5) for i in range(3)))  # 3 + 3 + 3 free
    big = mjob(1, {"a100": {8: 80.0}}, gpus=8)
    small = mjob(2, {"a100": {2: 20.0}}, gpus=2, submit=T0 + 1)
    out = decide(TickInput(T0, base, (big, small)), RequestedPolicy(), SchedulerState())
    assert by_job(out)[1].reason is Reason.UNPLACEABLE
    a = by_job(out)[2]
    assert a.reason is Reason.SCHEDULED and "could not be placed" in a.detail and len(a.nodes) == 1
    assert kinds(out) == [(2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]


@pytest.mark.parametrize("name", ["las", "slurmplan"])
def test_real_policies_rounds_deliver_most_of_what_x_promises(name: str) -> None:
    registry = pytest.importorskip("slurmplan.policy.registry")
    policy = registry.load_policy(name)
    table = {"a100": {1: 10.0, 2: 19.0}, "v100": {1: 4.0, 2: 7.5}}
    jobs = [mjob(i, table, submit=T0 + i, steps=200_000) for i in range(1, 6)]
    mini = MiniCluster(cluster(a100=(1, 2), v100=(1, 2)), jobs)  # asserts no node is ever overcommitted
    state, outs = run_rounds(mini, policy, rounds=20)
    speed = {Cell(t, g): v for t, row in table.items() for g, v in row.items()}
    promised = outs[0].allocation.x @ np.array([speed[c] for c in outs[0].allocation.cells])
    for row, job_id in enumerate(outs[0].allocation.job_ids):
        got = sum(t * speed[c] for c, t in state.jobs[job_id].attained_by_cell.items()) / (20 * 360)
        assert got >= 0.6 * promised[row], (name, job_id, got, promised[row])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("round_s", 0.0),
        ("grace_s", -1.0),
        ("reconfig_threshold", 1.5),
        ("reconfig_cost_s", -5.0),
        ("checkpoint_signal", ""),
    ],
)
def test_bad_tick_config_is_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as err:
        TickConfig(**{field: value})
    assert err.value.field == field and field in str(err.value)


def test_duplicate_job_ids_in_the_input_are_refused() -> None:
    jobs = (mjob(1, {"a100": {1: 10.0}}), mjob(1, {"a100": {1: 10.0}}))
    with pytest.raises(ValidationError, match="each job id at most once"):
        decide(TickInput(T0, cluster(a100=(1, 1)), jobs), RequestedPolicy(), SchedulerState())


def test_preempted_requeue_held_job_no_longer_shows_its_running_decision() -> None:
    old = "slurmplan: a100x1 dp1 | round 2 | lease until 08:14"
    running = mjob(1, {"a100": {1: 10.0}}, state=JobState.RUNNING, nodes=("a100-0",), admin_comment=old)
    waiting = mjob(2, {"a100": {1: 10.0}})
    mini = MiniCluster(cluster(a100=(1, 1)), [running, waiting], exit_on_signal=False)
    policy = FixedPolicy({2: {Cell("a100", 1): 1.0}})
    config = replace(AT_ONCE, grace_s=120.0)
    state = SchedulerState()
    outs = []
    for now in (T0, T0 + 130, T0 + 190):
        out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), policy, state)
        mini.apply(out.actions, now)
        state = out.state
        outs.append(out)
    assert kinds(outs[1]) == [(1, ActionKind.REQUEUE_HOLD), (1, ActionKind.ANNOTATE)]
    comment = mini.jobs[1].job.admin_comment
    assert comment.startswith("slurmplan: held (preempted) | round ") and "lease until" not in comment
    assert "=" not in comment  # would read as hints
    assert outs[2].actions == ()  # said once, not every tick


def test_held_pending_job_with_a_stale_decision_is_annotated_once() -> None:
    old = "slurmplan: a100x1 dp1 | round 2 | lease until 08:14"
    job = mjob(1, {"a100": {1: 10.0}}, held=True, admin_comment=old)
    mini = MiniCluster(cluster(a100=(1, 1)), [job])
    state = SchedulerState()
    out = decide(TickInput(T0, mini.snapshot_cluster(), mini.managed(), TickConfig()), FixedPolicy({}), state)
    assert kinds(out) == [(1, ActionKind.ANNOTATE)]
    assert out.actions[0].admin_comment.startswith("slurmplan: held (waiting) | round ")


def test_a_held_decision_names_no_plan_to_the_launcher() -> None:
    from slurmplan.formats import parse_decision

    assert (
        parse_decision("slurmplan:gpus=1 || slurmplan: held (preempted) | round 3 | its a100 GPUs went to job 2")
        is None
    )


def test_a_restart_release_names_the_nodes_it_ran_on_even_from_a_new_daemon(tmp_path) -> None:
    """A cron ``slurmplan tick`` is a new process with a new backend each time: where a requeued job ran comes
    from the journaled scheduler state (``JobState.ran_on``), carried in the RELEASE as ``previous_nodes``."""
    from slurmplan.control.config import DaemonConfig
    from slurmplan.control.runner import Daemon
    from slurmplan.domain import Job
    from tests.control.memcluster import MemBackend, candidates

    backend = MemBackend([Job(1, "m", partition="gpu", admin_comment="slurmplan:model=m;gpus=2", held=True)])
    # requeue_delay_s=0: with Slurm's delay the requeued job would be kept off a1, the only a100 node, until the
    # delay is over (mechanism.placement); this test is about the journal carrying ran_on across processes
    config = DaemonConfig(
        managed_partitions=("gpu",), database=tmp_path / "j.db", report_dir=tmp_path / "r", requeue_delay_s=0.0
    )

    def cron_tick():  # a new Daemon each time, the real decision (policy, mechanism), state from the journal
        return Daemon(config, backend=backend, candidates_fn=candidates).tick()  # the configured policy (las)

    first = cron_tick()
    release = [a for a in first.actions if a.kind is ActionKind.RELEASE]
    assert len(release) == 1 and release[0].previous_nodes is None  # never ran: nothing to name
    (job,) = backend.snapshot().jobs
    assert job.state is JobState.RUNNING and job.nodes == ("a1",)
    cron_tick()  # sees it running: the journal now records where
    assert backend.apply([Action(ActionKind.REQUEUE_HOLD, 1)])[0].ok  # its trap requeue-holds it (a checkpoint)
    again = cron_tick()
    (release,) = [a for a in again.actions if a.kind is ActionKind.RELEASE]
    assert release.previous_nodes == ("a1",)


def test_a_job_that_just_started_is_signalled_once_it_has_run_signal_min_run_s() -> None:
    """Stopped the moment it started, a job is signalled only after ``signal_min_run_s`` (its batch script and
    launcher take the signal over in that time); meanwhile it counts as stopping: its GPUs go to the winner, later
    ticks do not keep it, and the grace period runs from the signal actually sent."""
    running = mjob(1, {"a100": {1: 10.0}}, state=JobState.RUNNING, nodes=("a100-0",))  # started at T0
    mini = MiniCluster(cluster(a100=(1, 1)), [running, mjob(2, {"a100": {1: 10.0}})], exit_on_signal=False)
    policy = FixedPolicy({2: {Cell("a100", 1): 1.0}})
    config = TickConfig(grace_s=120.0)
    assert config.signal_min_run_s == 10.0, "the tick's default, which the daemon and the simulator take"
    state, outs = SchedulerState(), []
    for now in (T0 + 2, T0 + 6, T0 + 12, T0 + 125, T0 + 135):
        out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), policy, state)
        mini.apply(out.actions, now)
        state = out.state
        outs.append(out)
    assert kinds(outs[0]) == [(2, ActionKind.UPDATE), (2, ActionKind.RELEASE)]  # no signal at 2 s
    assert outs[0].wake_at == T0 + 10 and by_job(outs[0])[1].reason is Reason.PREEMPTED
    assert outs[1].actions == () and by_job(outs[1])[1].reason is not Reason.KEPT
    assert kinds(outs[2]) == [(1, ActionKind.SIGNAL)] and outs[2].wake_at == T0 + 12 + 120
    assert outs[2].actions[0].reason.endswith("(signalled once it had run 10 s)")
    assert outs[3].actions == ()  # 123 s after the decision, 113 s after the signal
    assert kinds(outs[4]) == [(1, ActionKind.REQUEUE_HOLD)]  # 123 s after the signal, not after the decision


def test_signal_min_run_s_must_not_be_negative() -> None:
    with pytest.raises(ValidationError, match="signal_min_run_s"):
        TickConfig(signal_min_run_s=-1.0)


def test_rounds_keep_their_grid_when_ticks_fire_late() -> None:
    """A daemon's ticks fall on its interval's grid plus a few ms of jitter (its work, the sleep), and its first tick
    wherever it started. Were a round to start at the tick that noticed it, the next would be due a whole tick late
    whenever that tick's jitter is below this one's: on the dev cluster's replays (1 s ticks, 12 s rounds) the rounds
    came every 12.5 s on average, the simulator's every 12 (issue 23). On the grid they keep 12 s."""
    import random

    rng = random.Random(0)
    mini = MiniCluster(cluster(a100=(1, 2)), [mjob(1, {"a100": {1: 10.0}}, submit=T0)])
    config = TickConfig(round_s=12.0)
    state = SchedulerState()
    starts = []
    for i in range(600):
        now = T0 + i + (0.3 if i == 0 else rng.uniform(0.0, 0.02))
        out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), EqualSharePolicy(), state)
        mini.apply(out.actions, now)
        state = out.state
        if out.new_round:
            starts.append(state.last_round_start)
    assert starts == pytest.approx([T0 + 0.3 + 12.0 * k for k in range(len(starts))], rel=0, abs=1e-6)
    assert len(starts) == 50  # the grid points 0.3 + 12 k up to 588.3; each noticed at the next tick


def test_a_round_on_the_grid_starts_at_its_tick() -> None:
    """The simulator ticks on the grid: its rounds start at the tick itself, to the bit (decisions unchanged), and
    a daemon that was down for rounds takes the grid up where it falls."""
    assert on_round_grid(T0 + 360.0, T0, 360.0) == T0 + 360.0
    assert on_round_grid(T0 + 0.1 + 360.0, T0 + 0.1, 360.0) == T0 + 0.1 + 360.0
    assert on_round_grid(T0 + 390.0, T0, 360.0) == T0 + 360.0
    assert on_round_grid(T0 + 1000.0, T0, 360.0) == T0 + 720.0
    assert on_round_grid(T0, None, 360.0) == T0


def test_a_round_an_ulp_short_of_its_grid_point_is_not_missed() -> None:
    """The simulator's ticks lie on ``origin + k * tick_s``: 0.3 + 18 * 30 is 359.99999999999994 after 0.3 + 6 * 30.
    Compared exactly, the round due there was missed, and the next tick (a round later, when nothing else happened)
    opened it off the grid; the daemon, whose ticks are late, never misses one that way."""
    last, now = 0.3 + 6 * 30.0, 0.3 + 18 * 30.0
    assert now - last < 360.0  # the float case itself
    mini = MiniCluster(cluster(a100=(1, 2)), [mjob(1, {"a100": {1: 10.0}}, submit=T0)])
    config = TickConfig(round_s=360.0)
    first = decide(
        TickInput(T0 + last, mini.snapshot_cluster(), mini.managed(), config), EqualSharePolicy(), SchedulerState()
    )
    assert first.new_round
    state = replace(first.state, last_round_start=last)  # the round's start as the simulator's clock reads it
    out = decide(TickInput(now, mini.snapshot_cluster(), mini.managed(), config), EqualSharePolicy(), state)
    assert out.new_round and out.state.last_round_start == now
    assert on_round_grid(now, last, 360.0) == now
