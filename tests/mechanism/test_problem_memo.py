"""The node pool's per-tick memo gives what a fresh pass over every node gives, whatever changed in between."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from slurmplan.domain import Cluster, Node, NodeState
from slurmplan.mechanism import problem as pb


def _cluster(n: int = 12) -> Cluster:
    types = ("a100", "v100", "k80")
    return Cluster(
        tuple(Node(f"n{(7 * i) % n:02d}", NodeState.IDLE, types[i % 3], 4, cpus=32, memory_mb=64000) for i in range(n))
    )


def _fresh(cluster: Cluster) -> pb.NodePool:
    pb._last_nodes.value = None
    return pb.build_pool(cluster, ())


def _same(a: pb.NodePool, b: pb.NodePool) -> None:
    assert a.names == b.names and a.gpu_type == b.gpu_type
    for field in ("gpus", "cpus", "memory_mb"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def _step(cluster: Cluster, i: int, **changes) -> Cluster:
    nodes = list(cluster.nodes)
    nodes[i] = replace(nodes[i], **changes)
    return Cluster(tuple(nodes))


def test_usage_changes_update_only_those_rows_and_equal_a_full_pass():
    c0 = _cluster()
    pb._last_nodes.value = None
    first = pb.build_pool(c0, ())
    assert first.names == tuple(sorted(first.names))
    c1 = _step(c0, 3, gpus_used=3, cpus_used=8, memory_used_mb=1000)
    memo = pb.build_pool(c1, ())
    assert pb._last_nodes.value.names is first.names  # the memo answered
    _same(memo, _fresh(c1))
    assert memo.gpus[memo.names.index(c0.nodes[3].name)] == 1
    _same(pb.build_pool(c0, ()), _fresh(c0))  # back again: the earlier table was not changed in place


def test_a_node_leaving_the_pool_or_changing_size_rebuilds():
    c0 = _cluster()
    pb._last_nodes.value = None
    pb.build_pool(c0, ())
    for changes in ({"state": NodeState.DRAINED}, {"gpus": 8}, {"gpu_type": "t4"}, {"name": "zz"}):
        c1 = _step(c0, 5, **changes)
        _same(pb.build_pool(c1, ()), _fresh(c1))
        pb.build_pool(c0, ())
    drained = _step(c0, 5, state=NodeState.DRAINED)
    pool = pb.build_pool(drained, ())
    assert c0.nodes[5].name not in pool.names and len(pool.names) == len(c0.nodes) - 1
    assert pb._node_table(drained).total == drained.gpus_by_type()


def test_a_different_node_count_or_every_node_new_is_a_full_pass():
    c0 = _cluster()
    pb._last_nodes.value = None
    pb.build_pool(c0, ())
    bigger = _cluster(15)
    _same(pb.build_pool(bigger, ()), _fresh(bigger))
    anew = Cluster(tuple(replace(n, gpus_used=1) for n in bigger.nodes))
    _same(pb.build_pool(anew, ()), _fresh(anew))


_PER_ROW = (
    "steps_remaining", "time_since_start", "attained_time", "submit_time", "deadline", "requested", "current",
    "steps_known", "time_limit_left", "restart_cost_s", "moved_recently", "sla_throughput",
)  # fmt: skip


def test_a_jobs_kept_row_gives_what_a_fresh_row_gives_as_the_clock_and_progress_move(monkeypatch):
    """The rows' memo (a job's fixed part, kept while its Job, hints and candidates are the same objects) and the
    per-tick columns (steps left, time since submit, deadline, time limit, restart cost) give, tick after tick,
    what the problem built with every memo emptied gives; and those columns do move with the clock."""
    from dataclasses import replace as evolve_job

    from slurmplan.domain import JobState as Slurm
    from slurmplan.tick import JobState, ManagedJob, TickConfig, TickInput
    from tests.mechanism.helpers import T0, cluster, mjob

    table = {"a100": {1: 10.0, 2: 19.0}, "v100": {1: 4.0}}
    run = mjob(1, table, state=Slurm.RUNNING, nodes=("a100-0",), steps=5000)
    run = evolve_job(run, job=evolve_job(run.job, time_limit_s=7200))
    due = mjob(2, table, gpus=2, steps=None, submit=T0 + 5)
    due = evolve_job(due, hints=evolve_job(due.hints, deadline=T0 + 9000))
    late = mjob(3, table, gpu_type="v100", submit=T0 + 9)
    config = TickConfig(move_hold_rounds=2)
    states = {1: JobState(first_seen=T0, attained_s=300.0, moved_at=T0 + 200), 2: JobState(first_seen=T0 + 5)}

    def problem(now: float, done: float, fresh: bool):
        if fresh:
            pb._fixed_rows.clear()
            pb._last_shapes.value = None
            pb._last_cols.value = None
        jobs = (ManagedJob(run.job, run.hints, run.candidates, steps_done=done), due, late)
        return pb.build_problem(
            TickInput(now=now, cluster=cluster(a100=(1, 8), v100=(1, 8)), jobs=jobs, config=config), states
        ).problem

    seen, fixed = [], []
    real = pb.requested_cell
    monkeypatch.setattr(pb, "requested_cell", lambda mj: fixed.append(mj.job.job_id) or real(mj))
    for now, done in ((T0 + 400, 100.0), (T0 + 700, 250.5), (T0 + 9000, 4000.0)):
        fixed.clear()
        kept = problem(now, done, fresh=False)
        assert not fixed or now == T0 + 400  # after the first tick every row's fixed part comes from the memo
        fresh = problem(now, done, fresh=True)
        assert sorted(fixed) == [1, 2, 3] or now == T0 + 400
        for field in _PER_ROW:
            np.testing.assert_array_equal(getattr(kept, field), getattr(fresh, field), err_msg=field)
        assert kept.job_ids == fresh.job_ids and kept.accounts == fresh.accounts and kept.job_class == fresh.job_class
        seen.append(kept)
    assert seen[0].time_since_start[0] == 400 and seen[1].time_since_start[0] == 700
    assert seen[0].time_limit_left[0] == 6800 and seen[2].time_limit_left[0] == 0
    assert seen[0].deadline[1] == 8600 and np.isinf(seen[0].deadline[0]) and np.isinf(seen[0].time_limit_left[1])
    assert list(seen[0].moved_recently) == [True, False, False] and not seen[2].moved_recently.any()
    assert seen[0].restart_cost_s[0] == 2 * seen[2].restart_cost_s[0]
