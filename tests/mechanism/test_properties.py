"""Properties of whole ticks on random clusters and jobs: nothing is ever overcommitted, decisions are pure."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmplan.domain import ActionKind, Cluster, Node, Reason
from slurmplan.tick import SchedulerState, TickInput, decide

from .helpers import T0, EqualSharePolicy, MiniCluster, RequestedPolicy, mjob, node

TYPES = ("a100", "v100")


@st.composite
def scenarios(draw: st.DrawFn) -> TickInput:
    nodes = []
    for t in TYPES:
        for i in range(draw(st.integers(0, 3))):
            gpus = draw(st.sampled_from((4, 8)))
            used = draw(st.integers(0, gpus))  # unmanaged usage
            nodes.append(replace_cpus(node(f"{t}-{i}", t, gpus, used=used), draw(st.integers(8, 64))))
    jobs = []
    for j in range(draw(st.integers(0, 12))):
        table = {
            t: {g: draw(st.floats(1, 100)) for g in draw(st.sets(st.sampled_from((1, 2, 4, 8, 16)), min_size=1))}
            for t in draw(st.sets(st.sampled_from(TYPES), min_size=1))
        }
        t = sorted(table)[0]
        gpus = sorted(table[t])[0]
        held = draw(st.booleans())
        jobs.append(mjob(j + 1, table, gpus=gpus, gpu_type=t, cpus=draw(st.integers(0, 8)), submit=T0 + j, held=held))
    return TickInput(T0 + 100, Cluster(tuple(nodes)), tuple(jobs))


def replace_cpus(n: Node, cpus: int) -> Node:
    return replace(n, cpus=cpus)


@settings(max_examples=80, deadline=None)
@given(scenarios(), st.sampled_from((RequestedPolicy(), EqualSharePolicy())))
def test_placements_never_overcommit_a_node_and_each_job_is_decided_once(inp: TickInput, policy) -> None:
    out = decide(inp, policy, SchedulerState())
    ids = [a.job_id for a in out.assignments]
    assert sorted(ids) == sorted(mj.job.job_id for mj in inp.jobs)
    free = {n.name: n.gpus - n.gpus_used for n in inp.cluster.nodes}
    cpus = {n.name: n.cpus for n in inp.cluster.nodes}
    cands = {mj.job.job_id: {c.cell: c for c in mj.candidates} for mj in inp.jobs}
    for a in out.assignments:
        if not a.nodes:
            continue
        assert a.reason is Reason.SCHEDULED and a.cell is not None
        assert a.gpus_per_node * len(a.nodes) == a.cell.gpus
        need_cpu = -(-cands[a.job_id][a.cell].cpus // len(a.nodes))
        for name in a.nodes:
            assert name.startswith(a.cell.gpu_type)
            free[name] -= a.gpus_per_node
            cpus[name] -= need_cpu
    assert all(v >= 0 for v in free.values()), free
    assert all(v >= 0 for v in cpus.values()), cpus
    again = decide(inp, policy, SchedulerState())
    assert again.actions == out.actions and again.assignments == out.assignments


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_every_pending_job_ends_a_tick_held_or_started(inp: TickInput) -> None:
    out = decide(inp, EqualSharePolicy(), SchedulerState())
    kinds = {(a.job_id, a.kind) for a in out.actions}
    for mj in inp.jobs:
        job = mj.job
        starts = (job.job_id, ActionKind.UPDATE) in kinds
        if job.held:
            assert (job.job_id, ActionKind.HOLD) not in kinds
            assert starts == ((job.job_id, ActionKind.RELEASE) in kinds)
        else:
            assert starts != ((job.job_id, ActionKind.HOLD) in kinds), (job.job_id, kinds)


@settings(max_examples=25, deadline=None)
@given(scenarios(), st.sampled_from((RequestedPolicy(), EqualSharePolicy())), st.lists(st.integers(0, 12), max_size=6))
def test_many_ticks_never_overcommit_and_decide_every_job(inp: TickInput, policy, finishing: list[int]) -> None:
    """Ticks every 2 minutes over several rounds, jobs finishing on the way; MiniCluster refuses overcommit."""
    mini = MiniCluster(inp.cluster, list(inp.jobs))
    state = SchedulerState()
    now = inp.now
    for step in range(12):
        jobs = mini.managed()
        out = decide(TickInput(now, mini.snapshot_cluster(), jobs), policy, state)
        assert sorted(a.job_id for a in out.assignments) == sorted(mj.job.job_id for mj in jobs)
        assert set(out.state.jobs) == {mj.job.job_id for mj in jobs}
        mini.apply(out.actions, now)
        state = out.state
        if step < len(finishing) and finishing[step] in mini.jobs:
            mini.finish(finishing[step])
        now += 120.0
