"""Placing chosen jobs on nodes: consolidated, largest first, CPU and memory respected, keep nodes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmplan.domain import ActionKind, Assignment, Cell, Cluster, JobState, Reason
from slurmplan.mechanism.placement import Placed, PlacementRequest, Unplaced, place
from slurmplan.mechanism.problem import NodePool
from slurmplan.tick import JobState as Memory
from slurmplan.tick import SchedulerState, TickConfig, TickInput, decide
from tests.mechanism.helpers import T0, RequestedPolicy, mjob, node


def pool(free: dict[str, int], *, gpu_type: str = "a100", cpus: int = 64, mem: int = 100_000) -> NodePool:
    names = tuple(sorted(free))
    return NodePool(
        names,
        tuple(gpu_type for _ in names),
        np.array([free[n] for n in names]),
        np.full(len(names), cpus),
        np.full(len(names), mem),
    )


def test_multi_gpu_job_goes_on_one_node_when_it_fits() -> None:
    out = place(pool({"n0": 8, "n1": 8}), [PlacementRequest(0, Cell("a100", 8))])
    assert out[0] == Placed(("n0",), 8)


def test_best_fit_leaves_whole_nodes_free_for_large_jobs() -> None:
    reqs = [PlacementRequest(0, Cell("a100", 2)), PlacementRequest(1, Cell("a100", 8))]
    out = place(pool({"n0": 8, "n1": 3}), reqs)
    assert out[1] == Placed(("n0",), 8)  # largest first, and the 2-GPU job did not split node n0
    assert out[0] == Placed(("n1",), 2)


def test_job_larger_than_a_node_is_split_equally_over_few_nodes() -> None:
    out = place(pool({"n0": 8, "n1": 8, "n2": 8}), [PlacementRequest(0, Cell("a100", 16))])
    assert out[0] == Placed(("n0", "n1"), 8)


def test_cpu_and_memory_limits_force_a_split_or_refuse_with_why() -> None:
    # 4 GPUs fit on one node, but 4 x 24 CPUs do not: two nodes with 2 GPUs and 48 CPUs each.
    out = place(pool({"n0": 8, "n1": 8}, cpus=64), [PlacementRequest(0, Cell("a100", 4), cpus=96)])
    assert out[0] == Placed(("n0", "n1"), 2)
    refused = place(pool({"n0": 8}, mem=1000), [PlacementRequest(0, Cell("a100", 2), memory_mb=5000)])
    assert isinstance(refused[0], Unplaced)
    assert "5000 MB" in refused[0].why and "1000 MB" in refused[0].why


def test_fragmented_gpus_are_unplaceable_with_the_largest_free_block_named() -> None:
    out = place(pool({"n0": 3, "n1": 3, "n2": 3}), [PlacementRequest(0, Cell("a100", 8))])
    assert isinstance(out[0], Unplaced)
    assert "9 GPUs on 3 nodes" in out[0].why and "3 GPUs" in out[0].why


def test_kept_job_keeps_its_nodes_even_when_a_better_fit_exists() -> None:
    reqs = [PlacementRequest(0, Cell("a100", 2), preferred=("n1",)), PlacementRequest(1, Cell("a100", 8))]
    out = place(pool({"n0": 2, "n1": 8, "n2": 8}), reqs)
    assert out[0] == Placed(("n1",), 2)
    assert out[1] == Placed(("n2",), 8)


def test_wrong_type_and_missing_type() -> None:
    out = place(
        pool({"n0": 8}), [PlacementRequest(0, Cell("v100", 1)), PlacementRequest(1, Cell("a100", 1), preferred=("zz",))]
    )
    assert isinstance(out[0], Unplaced) and "no schedulable v100 node" in out[0].why
    assert out[1] == Placed(("n0",), 1)


# A job that just left its nodes waits Slurm's requeue delay (cred_expire + 1) if it starts on one of them again.


def test_job_that_just_left_a_node_goes_to_another_node_with_room() -> None:
    # Best fit alone would pick n0 (the fuller node); n0 is the node it just left, n1 has room for the same split.
    out = place(pool({"n0": 2, "n1": 4}), [PlacementRequest(0, Cell("a100", 2), avoid=("n0",))])
    assert out[0] == Placed(("n1",), 2)
    plain = place(pool({"n0": 2, "n1": 4}), [PlacementRequest(0, Cell("a100", 2))])
    assert plain[0] == Placed(("n0",), 2)


def test_nodes_it_left_are_used_when_nothing_else_fits_unless_it_is_already_waiting() -> None:
    moving = place(pool({"n0": 4, "n1": 1}), [PlacementRequest(0, Cell("a100", 2), avoid=("n0",))])
    assert moving[0] == Placed(("n0",), 2)  # a running job's move: the round charged the wait already
    waiting = place(
        pool({"n0": 4, "n1": 1}), [PlacementRequest(0, Cell("a100", 2), avoid=("n0",), refuse_avoided=True)]
    )
    assert isinstance(waiting[0], Unplaced) and waiting[0].waits
    assert "n0" in waiting[0].why and "requeue delay" in waiting[0].why
    # issue 29: say that the policy chose to wait, and until when other types are not tried
    assert waiting[0].why.startswith("waits: the policy chose a100x2 for it") and "next round" in waiting[0].why


def test_a_job_is_never_split_over_more_nodes_than_its_own_limit() -> None:
    """Issue 29 item 5: --nodes=1 (hints nodes=1): two nodes with 2 free GPUs each do not take a 4-GPU job."""
    spread = place(pool({"n0": 2, "n1": 2}), [PlacementRequest(0, Cell("a100", 4))])
    assert spread[0] == Placed(("n0", "n1"), 2)
    one = place(pool({"n0": 2, "n1": 2}), [PlacementRequest(0, Cell("a100", 4), max_nodes=1)])
    assert isinstance(one[0], Unplaced)


def test_preferred_nodes_it_just_left_are_not_kept_when_others_have_room() -> None:
    req = PlacementRequest(0, Cell("a100", 4), preferred=("n0",), avoid=("n0",), refuse_avoided=True)
    assert place(pool({"n0": 4, "n1": 4}), [req])[0] == Placed(("n1",), 4)


def test_a_split_that_needs_a_node_it_left_waits_too() -> None:
    # Slurm skips the wait only when none of the new nodes is one it ran on (SlurmRules.may_skip_requeue_wait).
    req = PlacementRequest(0, Cell("a100", 8), avoid=("n0",), refuse_avoided=True)
    out = place(pool({"n0": 4, "n1": 4}), [req])
    assert isinstance(out[0], Unplaced) and out[0].waits
    assert place(pool({"n0": 4, "n1": 4, "n2": 4}), [req])[0] == Placed(("n1", "n2"), 4)


def _requeued_tick(nodes: list, jobs: list, state: SchedulerState, now: float) -> tuple[dict, SchedulerState]:
    config = TickConfig(requeue_delay_s=121.0)
    out = decide(TickInput(now, Cluster(tuple(nodes)), tuple(jobs), config), RequestedPolicy(), state)
    return {a.job_id: a for a in out.assignments}, out.state


def test_the_round_keeps_a_requeued_job_off_the_node_it_left_while_slurms_delay_runs() -> None:
    # Job 98 of the replay: preempted, then scheduled again on the a100 node it had just left, where it waited
    # Slurm's 121 s with its GPUs reserved. The tick now remembers when it left (requeued_at) and where (ran_on).
    was = Assignment(1, Reason.KEPT, cell=Cell("a100", 2), nodes=("a100-0",), gpus_per_node=2)
    before = SchedulerState(jobs={1: Memory(current=was, ran_on=("a100-0",), first_seen=T0 - 600)})
    job = mjob(1, {"a100": {2: 10.0}}, gpus=2)
    # a100-0 is the fuller node (best fit would pick it); a100-1 has room for the same configuration
    got, after = _requeued_tick([node("a100-0", "a100", 4, used=2), node("a100-1", "a100", 4)], [job], before, T0)
    assert after.jobs[1].requeued_at == T0
    assert got[1].reason is Reason.SCHEDULED and got[1].nodes == ("a100-1",)

    # only the node it left has room: it is not placed there while the delay runs; a new job takes those GPUs
    full = [node("a100-0", "a100", 4, used=2), node("a100-1", "a100", 4, used=4)]
    other = mjob(2, {"a100": {2: 10.0}}, gpus=2, submit=T0 + 5)
    got, after = _requeued_tick(full, [job, other], before, T0)
    assert got[1].reason is Reason.UNPLACEABLE and "requeue delay" in got[1].detail
    assert got[2].nodes == ("a100-0",)
    # once the delay is over the node it left is as good as any
    got, later = _requeued_tick(full, [job], after, T0 + 121.0)
    assert later.jobs[1].requeued_at is None
    assert got[1].nodes == ("a100-0",)


def test_a_job_whose_gpus_went_to_others_is_stopped_rather_than_forced_into_a_same_type_resize() -> None:
    # Job 1 runs on a100x4; job 2 (a100x2) wins two of its GPUs. Without Slurm's requeue delay job 1 shrinks to
    # a100x2 at once (test_round). With it, the shrunk job may restart on the node it leaves and hold its GPUs idle
    # for cred_expire + 1 s; it is stopped instead, and as a requeued job placement keeps it off that node.
    from slurmplan.domain import AllocationProblem
    from slurmplan.mechanism.priorities import priorities
    from slurmplan.mechanism.round import RunningInfo, plan_round

    thr = np.array([[19.0, 20.0], [19.0, 0.0]])
    p = AllocationProblem((1, 2), (Cell("a100", 2), Cell("a100", 4)), thr, {"a100": 4})
    x = np.array([[1.0, 0.0], [1.0, 0.0]])
    info = RunningInfo(np.array([True, False]), np.array([1, -1]), np.zeros(2, bool), np.full(2, 360.0))
    pri = priorities(x, np.array([[0.0, 0.5], [0.0, 0.0]]))
    assert plan_round(p, x, pri, info, TickConfig(requeue_delay_s=0.0)).col.tolist() == [0, 0]
    choice = plan_round(p, x, pri, info, TickConfig(requeue_delay_s=121.0))
    assert choice.col.tolist() == [-1, 0] and choice.reason[0] is Reason.PREEMPTED
    assert "its a100 GPUs went to job 2" in choice.detail[0]


def _grow_tick(delay_s: float, *others: object) -> dict:
    """Job 1 runs v100x4 on v100-1; v100-0 (4 GPUs) is free; the policy grows it to v100x8, which fits only on
    both nodes, v100-1 included."""
    from tests.mechanism.helpers import FixedPolicy

    was = Assignment(1, Reason.KEPT, cell=Cell("v100", 4), nodes=("v100-1",), gpus_per_node=4)
    state = SchedulerState(jobs={1: Memory(current=was, ran_on=("v100-1",), first_seen=T0 - 7200)})
    job = mjob(
        1,
        {"v100": {4: 10.0, 8: 20.0}},
        gpus=4,
        state=JobState.RUNNING,
        nodes=("v100-1",),
        submit=T0 - 7200,
        steps=10**6,
    )
    nodes = (node("v100-0", "v100", 4), node("v100-1", "v100", 4, used=4))
    config = TickConfig(requeue_delay_s=delay_s)
    policy = FixedPolicy({1: {Cell("v100", 8): 1.0}, 2: {Cell("v100", 4): 0.5}})
    out = decide(TickInput(T0, Cluster(nodes), (job, *others), config), policy, state)
    return {"assignment": {a.job_id: a for a in out.assignments}[1], "actions": out.actions, "all": out.assignments}


def test_a_running_job_is_not_stopped_for_a_grow_that_fits_only_on_the_node_it_leaves() -> None:
    # Issue 23: a job grown v100x4 -> v100x8 across its own node was signalled, then, pending in Slurm's requeue
    # delay, refused that node ("fits only on v100-1, which it just left"), sat idle the rest of the round and was
    # re-seated elsewhere at the next one (llm-dev seed 2: 3 such stops; another branch: 58 restarts of one job).
    # A requeued job may not be placed there, so a running one is not stopped to be placed there: it stays.
    got = _grow_tick(121.0)
    assert got["assignment"].reason is Reason.KEPT and got["assignment"].cell == Cell("v100", 4)
    assert "requeue delay" in got["assignment"].detail
    assert not [a for a in got["actions"] if a.kind in (ActionKind.SIGNAL, ActionKind.REQUEUE_HOLD)]
    # it keeps its node: the 4 GPUs the round had counted for its grow go to a waiting job, on the other node
    waiting = mjob(2, {"v100": {4: 10.0}}, gpus=4, submit=T0 - 60)
    got = _grow_tick(121.0, waiting)
    placed = {a.job_id: (a.reason, a.nodes) for a in got["all"]}
    assert placed[1] == (Reason.KEPT, ("v100-1",)) and placed[2][1] == ("v100-0",)
    # without Slurm's delay (Gavel's zero-cost model) nothing holds it on the node it leaves: it grows at once
    got = _grow_tick(0.0)
    assert got["assignment"].reason is Reason.RESIZED and got["assignment"].cell == Cell("v100", 8)
    assert [a.kind for a in got["actions"]][:1] == [ActionKind.SIGNAL]


def _one_keep_after_the_other(p: NodePool, requests: list[PlacementRequest]) -> dict[int, Placed | Unplaced]:
    """``place``'s kept-first rule written as it was before the pass took every kept job's nodes at once."""
    from slurmplan.mechanism.placement import _Free

    free, out, later = _Free(p), {}, []
    for req in requests:
        kept = free.keep(req) if req.preferred else None
        if kept is None:
            later.append(req)
        else:
            out[req.row] = kept
    for req in sorted(later, key=lambda r: (-r.cell.gpus, r.row)):
        out[req.row] = free.fit(req)
    return out


def test_keeping_every_kept_job_at_once_answers_as_one_keep_after_the_other() -> None:
    """Two kept jobs that both ask for a node with room for one of them: the first (in request order) keeps it
    and the second is placed elsewhere, as one keep after the other decides; with room for both, both keep."""
    tight = pool({"n0": 4, "n1": 8}, cpus=16)
    reqs = [
        PlacementRequest(0, Cell("a100", 4), cpus=8, preferred=("n0",)),
        PlacementRequest(1, Cell("a100", 2), cpus=12, preferred=("n0",)),  # n0's CPUs run out: it must move
        PlacementRequest(2, Cell("a100", 2), preferred=("n1",)),
        PlacementRequest(3, Cell("a100", 4)),
    ]
    out = place(tight, reqs)
    assert out == _one_keep_after_the_other(tight, reqs)
    assert out[0] == Placed(("n0",), 4) and out[2] == Placed(("n1",), 2) and out[1] == Placed(("n1",), 2)
    roomy = pool({"n0": 8, "n1": 8}, cpus=32)
    assert place(roomy, reqs) == _one_keep_after_the_other(roomy, reqs)
    assert place(roomy, reqs)[1] == Placed(("n0",), 2)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=5),
    st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(0, 5), st.integers(0, 24)), max_size=8),
)
def test_the_kept_first_pass_is_one_keep_after_the_other(free: list[int], jobs: list[tuple[int, int, int]]) -> None:
    """Any kept jobs (some preferring a node they do not fit on, or a node that is gone) on any free GPUs:
    ``place`` answers what one keep after the other answers."""
    p = pool({f"n{i}": g for i, g in enumerate(free)}, cpus=32)
    reqs = [
        PlacementRequest(row, Cell("a100", gpus), cpus=cpus, preferred=(f"n{node_i}",) if node_i < 5 else ())
        for row, (gpus, node_i, cpus) in enumerate(jobs)
    ]
    assert place(p, reqs) == _one_keep_after_the_other(p, reqs)


def test_the_same_kept_request_on_another_node_layout_is_planned_afresh() -> None:
    """``keep_all`` remembers a request's plan by the request and the pool layout's index: the very same request
    object on a pool whose nodes differ (one gone, another type) keeps where it can and is re-placed where not."""
    req = PlacementRequest(0, Cell("a100", 4), preferred=("n1",))
    assert place(pool({"n0": 8, "n1": 8}), [req])[0] == Placed(("n1",), 4)
    assert place(pool({"n0": 8, "n1": 8}), [req])[0] == Placed(("n1",), 4)  # remembered
    assert place(pool({"n0": 8, "n2": 8}), [req])[0] == Placed(("n0",), 4)  # n1 gone: fit elsewhere
    assert place(pool({"n1": 8}, gpu_type="h100"), [req])[0] == Unplaced(
        "no schedulable a100 node: every one is down, drained or absent"
    )
    assert place(pool({"n0": 8, "n1": 8}), [req])[0] == Placed(("n1",), 4)


def test_kept_requests_whose_rows_moved_are_placed_as_a_fresh_pass_places_them(monkeypatch) -> None:
    """A kept job's request is rebuilt when its row moves (a job submitted before it came or went); ``keep_all``
    finds its nodes' plan by the node tuple then (issue 27), and must answer as a fresh pass does, also when the
    Cell, CPUs or nodes to avoid differ."""
    from slurmplan.mechanism import placement

    p = pool({"n0": 8, "n1": 8, "n2": 4}, cpus=64)
    a, b = ("n0",), ("n1", "n2")
    first = [
        PlacementRequest(0, Cell("a100", 4), cpus=8, preferred=a),
        PlacementRequest(1, Cell("a100", 4), preferred=b),
    ]
    moved = [
        PlacementRequest(3, Cell("a100", 4), cpus=8, preferred=a),  # only the row differs: the memo answers
        PlacementRequest(5, Cell("a100", 8), preferred=b),  # another Cell: planned anew (2 nodes x 4)
        PlacementRequest(6, Cell("a100", 2), cpus=80, preferred=a),  # more CPUs than n0 has left: planned anew
    ]
    place(p, first)
    calls = []
    plain = placement._Free.plan
    monkeypatch.setattr(placement._Free, "plan", lambda self, req: calls.append(req.row) or plain(self, req))
    got = place(p, moved)
    assert calls == [5, 6]
    placement._kept_plans.clear()
    placement._kept_nodes.clear()
    assert got == place(p, moved)
    assert got[3] == Placed(a, 4) and got[5] == Placed(("n1", "n2"), 4)
    assert got[6] == Placed(("n0", "n1"), 1)  # not kept on n0 alone: split where the CPUs are
