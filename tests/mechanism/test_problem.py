"""Building the AllocationProblem and the node pool from one tick's input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmplan.domain import Cell, Cluster, Hints, JobClass, JobState, Node, NodeState, Reason
from slurmplan.mechanism.columns import _columns, _Row
from slurmplan.mechanism.problem import _per_node_usage, build_problem
from slurmplan.tick import JobState as SchedJobState
from slurmplan.tick import TickInput

from .helpers import T0, cluster, mjob


def test_columns_are_distinct_cells_and_throughput_comes_from_candidates() -> None:
    jobs = (
        mjob(1, {"a100": {1: 10.0, 2: 19.0}, "v100": {1: 4.0}}),
        mjob(2, {"v100": {1: 5.0, 2: 9.0}}, submit=T0 + 1),
    )
    ctx = build_problem(TickInput(T0 + 10, cluster(a100=(1, 8), v100=(1, 8)), jobs), {})
    p = ctx.problem
    assert p.cells == (Cell("a100", 1), Cell("a100", 2), Cell("v100", 1), Cell("v100", 2))
    np.testing.assert_allclose(p.throughput, [[10, 19, 4, 0], [0, 0, 5, 9]])
    assert p.job_ids == (1, 2)
    assert p.candidates is not None and p.candidates[0][3] is None and p.candidates[1][3].throughput == 9.0
    np.testing.assert_allclose(p.time_since_start, [10, 9])


def test_a_repeated_cell_keeps_its_best_candidate_and_new_candidates_are_seen() -> None:
    # Two plans for a100x2 (e.g. data parallel and pipelined in one stage): the faster one is the column's.
    job = mjob(1, {"a100": {1: 10.0, 2: 19.0}})
    slower = replace(job.candidates[1], throughput=12.0)
    job = replace(job, candidates=(*job.candidates, slower))
    inp = TickInput(T0, cluster(a100=(1, 8)), (job,))
    p = build_problem(inp, {}).problem
    np.testing.assert_allclose(p.throughput, [[10, 19]])
    assert p.candidates[0][1].throughput == 19.0
    # The per-job rows are remembered by the candidates tuple; a job's new candidates must be used at once.
    refitted = replace(job, candidates=tuple(replace(c, throughput=c.throughput * 2) for c in job.candidates))
    p2 = build_problem(replace(inp, jobs=(refitted,)), {}).problem
    np.testing.assert_allclose(p2.throughput, [[20, 38]])
    assert build_problem(inp, {}).problem.candidates[0][1] is p.candidates[0][1]


def test_capacity_subtracts_only_unmanaged_gpus() -> None:
    # a100-0: 8 GPUs, 5 used: 2 by managed job 1, 3 by someone else. a100-1 drained: not usable.
    nodes = (
        Node(
            "a100-0", NodeState.MIXED, "a100", 8, gpus_used=5, cpus=64, cpus_used=10, memory_mb=1000, memory_used_mb=0
        ),
        Node("a100-1", NodeState.DRAINED, "a100", 8),
        Node("v100-0", NodeState.IDLE, "v100", 4, cpus=32, memory_mb=1000),
    )
    running = mjob(1, {"a100": {2: 20.0}}, gpus=2, state=JobState.RUNNING, nodes=("a100-0",))
    running = replace(running, job=replace(running.job, cpus=4))
    ctx = build_problem(TickInput(T0, Cluster(nodes), (running, mjob(2, {"v100": {1: 3.0}}))), {})
    assert dict(ctx.problem.capacity) == {"a100": 5, "v100": 4}
    assert ctx.pool.names == ("a100-0", "v100-0")
    assert ctx.pool.gpus.tolist() == [5, 4]
    assert ctx.pool.cpus.tolist() == [64 - 6, 32]
    assert ctx.problem.current.tolist() == [0, -1]


def test_per_job_vectors_requested_sla_steps_deadline_accounts() -> None:
    guaranteed = mjob(1, {"a100": {1: 10.0, 2: 18.0}}, gpus=2, steps=1000, account="vision")
    guaranteed = replace(
        guaranteed,
        hints=replace(guaranteed.hints, job_class=JobClass.GUARANTEED, deadline=T0 + 3600),
        steps_done=400,
    )
    best_effort = mjob(2, {"a100": {1: 11.0}}, gpus=1, account="nlp")
    ctx = build_problem(TickInput(T0, cluster(a100=(1, 8)), (guaranteed, best_effort)), {})
    p = ctx.problem
    assert p.requested.tolist() == [1, 0]
    np.testing.assert_allclose(p.sla_throughput, [18.0, 11.0])  # the policy enforces it for guaranteed jobs
    np.testing.assert_allclose(p.steps_remaining, [600.0, 600.0])  # unknown steps look like the longest known
    np.testing.assert_allclose(p.deadline, [3600.0, np.inf])
    assert p.accounts == ("vision", "nlp")
    assert p.job_class == (JobClass.GUARANTEED, JobClass.BEST_EFFORT)


def test_attained_time_comes_from_state() -> None:
    jobs = (mjob(1, {"a100": {1: 10.0}}),)
    ctx = build_problem(TickInput(T0, cluster(a100=(1, 8)), jobs), {1: SchedJobState(attained_s=123.0)})
    np.testing.assert_allclose(ctx.problem.attained_time, [123.0])


def test_jobs_that_cannot_run_are_left_out_with_a_reason() -> None:
    too_big = mjob(1, {"a100": {16: 100.0}}, gpus=16)
    no_type = mjob(2, {"h100": {1: 50.0}})
    unmanaged = mjob(3, {"a100": {1: 10.0}})
    unmanaged = replace(unmanaged, hints=Hints(managed=False))
    ok = mjob(4, {"a100": {1: 10.0}})
    ctx = build_problem(TickInput(T0, cluster(a100=(1, 8)), (too_big, no_type, unmanaged, ok)), {})
    assert ctx.problem.job_ids == (4,)
    reasons = {mj.job.job_id: a.reason for mj, a in ctx.excluded}
    assert reasons == {1: Reason.UNSCHEDULABLE, 2: Reason.UNSCHEDULABLE, 3: Reason.UNMANAGED}
    detail = next(a.detail for mj, a in ctx.excluded if mj.job.job_id == 1)
    assert "a100:8" in detail


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 7), max_size=6), min_size=1, max_size=8))
def test_the_columns_kept_between_ticks_are_the_union_of_this_ticks_rows(ticks: list[list[int]]) -> None:
    # Eight jobs with overlapping Cells; each tick sees some of them (a job twice when the list says so), in any
    # order: the columns carried from the tick before must be exactly the sorted union of this tick's rows.
    pool = [tuple((t, g, 1) for t in ("a100", "v100")[: 1 + i % 2] for g in (1, 2, 4)[: 1 + i % 3]) for i in range(8)]
    pool[7] = (("t4", 8, 1),)  # a Cell no other job has: it must go when job 7 does
    rows = [_Row(keys, np.empty(len(keys), dtype=object), np.ones(len(keys))) for keys in pool]
    for tick in ticks:
        lines = [rows[i] for i in tick]
        assert _columns(lines) == tuple(sorted({k for r in lines for k in r.keys}))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=8, unique=True), min_size=1, max_size=8))
def test_node_usage_carried_between_ticks_is_the_sum_over_this_ticks_jobs(ticks: list[list[int]]) -> None:
    # Ten running jobs on overlapping nodes (one on a node outside the pool, one completing, one pending); each tick
    # holds some of them: the usage carried from the tick before must equal the plain sum over this tick's jobs.
    names = [f"a100-{i}" for i in range(4)]
    index = {n: i for i, n in enumerate(names)}
    jobs = []
    for j in range(10):
        nodes = (names[j % 4], names[(j + 1) % 4])[: 1 + j % 2] if j != 9 else ("gone-0",)
        state = JobState.COMPLETING if j == 8 else JobState.PENDING if j == 7 else JobState.RUNNING
        jobs.append(mjob(j, {"a100": {2: 1.0}}, gpus=2, state=state, nodes=nodes if j != 7 else (), cpus=3 + j, mem=j))
    for tick in ticks:
        held = tuple(jobs[j] for j in tick)
        want = np.zeros((4, 3), dtype=np.int64)
        for mj in held:
            job = mj.job
            if job.state.active and job.nodes:
                k = len(job.nodes)
                for name in job.nodes:
                    if name in index:
                        want[index[name]] += (job.gpus_per_node, -(-job.cpus // k), -(-job.memory_mb // k))
        np.testing.assert_array_equal(_per_node_usage(held, index), want)
