"""``assign``'s fast path for steady rows gives what the plain path gives, on every tick of real runs.

A steady row is a running job kept on the Cell, nodes and plan of its assignment of the tick before, with nothing
to send (issue 27: 96 % of LAS's rows between rounds). ``decide`` passes ``assign`` a dict (``settled``) that turns
the fast path on: such a row's Assignment is its previous one with this tick's throughput, priority, share and
detail (``engine._steady_row``), and its next state is built there too (``engine._quiet_next``), which ``settle``
then takes. This runs LAS and the flagship on the first hours of a generated trace and, at every tick, runs ``assign``
and ``settle`` both ways on the same inputs and compares them byte for byte (``repr`` of every assignment, of the
actions in order and of every next state, in order). Every seventh step an "admin" overwrites some running jobs'
comments, so that kept jobs with something to send (an annotation) are among the rows compared. A fast path whose
check forgets the node tuple or the comment must fail the comparison; the guards a simulated run never reaches are
checked on built values.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmplan.domain import Assignment, Cell, Plan, Reason
from slurmplan.domain import JobState as SlurmState
from slurmplan.mechanism import engine
from slurmplan.mechanism.actions import kept_as_written
from slurmplan.mechanism.placement import Placed
from slurmplan.tick_types import JobState as TickJobState

from .helpers import crius_llm_simulation, mjob, overwrite_comments_every


def _watch(policy: str, monkeypatch) -> dict[str, int]:
    """Run ``policy`` with ``decide``'s ``assign`` and ``settle`` checked against the plain path at every tick."""
    seen = {"ticks": 0, "rows": 0, "fast": 0, "settled": 0, "actions": 0, "annotated": 0}
    plain_assign, plain_settle = engine.assign, engine.settle
    pending: dict[str, object] = {}

    def checked_assign(ctx, choice, placed, x, states, info, notes=None, settled=None, new_round=False):
        assert settled is not None and not settled  # decide asks for the fast path, with an empty dict
        fast = plain_assign(ctx, choice, placed, x, states, info, notes, settled, new_round)
        want = plain_assign(ctx, choice, placed, x, states, info, notes)
        assert repr(fast) == repr(want)
        seen["ticks"] += 1
        seen["rows"] += len(want)
        seen["settled"] += len(settled)
        pending["want"] = want
        return fast

    def checked_settle(ctx, assignments, states, new_round, now, stamp, config, settled=None):
        got = plain_settle(ctx, assignments, states, new_round, now, stamp, config, settled)
        want = plain_settle(ctx, pending.pop("want"), states, new_round, now, stamp, config)
        assert repr(got[0]) == repr(want[0])
        assert list(got[1]) == list(want[1])  # the same jobs, in the same order
        assert repr(list(got[1].values())) == repr(list(want[1].values()))
        seen["actions"] += len(got[0])
        seen["annotated"] += sum(1 for act in got[0] if act.reason == "decision written")
        return got

    plain_steady = engine._steady_row

    def counting_steady(*args):
        got = plain_steady(*args)
        seen["fast"] += got is not None
        return got

    monkeypatch.setattr(engine, "assign", checked_assign)
    monkeypatch.setattr(engine, "settle", checked_settle)
    monkeypatch.setattr(engine, "_steady_row", counting_steady)
    sim = crius_llm_simulation(policy)
    overwrite_comments_every(monkeypatch, sim, 7)
    sim.run()
    return seen


@pytest.mark.parametrize("policy", ["las", "slurmplan"])
def test_steady_rows_equal_the_plain_path_on_every_tick(policy: str, monkeypatch) -> None:
    seen = _watch(policy, monkeypatch)
    assert seen["ticks"] > 50
    assert seen["fast"] > seen["rows"] // 3  # the fast path was taken for most rows
    assert seen["settled"] > seen["fast"] // 2  # and most of them were settled there too
    assert seen["actions"] > 100  # the rows that act were compared too
    assert seen["annotated"] > 20  # among them kept jobs whose comment no longer named their configuration


def _without_nodes_check(st, cell, where, mj, cand, detail, throughput, priority, share):
    """``_steady_row`` without its node checks: any Placed on the previous Cell is taken for the previous nodes (a
    job the placement moved would stay KEPT on its old nodes)."""
    prev = st.planned
    if prev is None or prev is not st.current or prev.cell is not cell or not isinstance(where, engine.Placed):
        return None
    if not prev.plan or (cand is not None and len(where.nodes) > max(1, cand.nodes)):
        return None
    d = prev.__dict__.copy()
    d["throughput"], d["priority"], d["share"], d["detail"] = throughput, priority, share, detail
    return engine.frozen_from(engine.Assignment, d)


def _quiet_without_comment_check(st, a, mj, new_round):
    """``_quiet_next`` that does not look at the job's comment (an overwritten one would never be written again)."""
    if st.signalled_at is not None or kept_as_written(mj.job.job_id) is None:
        return None
    d = st.__dict__.copy()
    d["planned"] = d["current"] = a
    if new_round:
        d["rounds_scheduled"] = st.rounds_scheduled + 1
    return engine.frozen_from(engine.JobState, d)


@pytest.mark.parametrize(
    ("name", "broken"),
    [
        ("_steady_row", _without_nodes_check),
        ("_quiet_next", _quiet_without_comment_check),
    ],
)
def test_a_fast_path_that_skips_a_check_fails(name: str, broken, monkeypatch) -> None:
    monkeypatch.setattr(engine, name, broken)
    with pytest.raises(AssertionError):
        _watch("las", monkeypatch)


def test_the_guards_a_simulated_run_never_reaches() -> None:
    """Slurm showing a job elsewhere than its last assignment (``advance`` then replaces ``current``), a job spread
    over more nodes than its candidate was predicted for, other GPUs a node, or no plan: the plain path decides
    those rows (a simulated cluster never moves a job by itself, and its placements never spread these jobs)."""
    nodes = ("a100-0", "a100-1")
    mj = mjob(1, {"a100": {8: 10.0}}, gpus=8, state=SlurmState.RUNNING, nodes=nodes)
    cand = replace(mj.candidates[0], nodes=2)
    cell = cand.cell
    prev = Assignment(1, Reason.KEPT, cell, Plan(dp=8), nodes, 4, 10.0, 1.0, 0.5, "lease renewed")
    st = TickJobState(attained_s=60.0, current=prev, planned=prev)
    where = Placed(nodes, 4)
    got = engine._steady_row(st, cell, where, mj, cand, "lease renewed", 10.0, 2.0, 0.25)
    assert got == replace(prev, priority=2.0, share=0.25)  # steady: the previous one with this tick's numbers
    moved = replace(prev, nodes=("a100-2", "a100-3"))
    assert engine._steady_row(replace(st, current=moved), cell, where, mj, cand, "", 10.0, 2.0, 0.25) is None
    assert engine._steady_row(st, cell, where, mj, replace(cand, nodes=1), "", 10.0, 2.0, 0.25) is None  # spread
    assert engine._steady_row(st, cell, Placed(nodes, 2), mj, cand, "", 10.0, 2.0, 0.25) is None
    assert engine._steady_row(st, Cell("a100", 8, 2), where, mj, cand, "", 10.0, 2.0, 0.25) is None
    unplanned = replace(prev, plan=None)
    assert (
        engine._steady_row(replace(st, current=unplanned, planned=unplanned), cell, where, mj, cand, "", 1, 2, 3)
        is None
    )
    moved_here = replace(prev, reason=Reason.MOVED)
    assert (
        engine._steady_row(replace(st, current=moved_here, planned=moved_here), cell, where, mj, cand, "", 1, 2, 3)
        is None
    )
    elsewhere = replace(mj, job=replace(mj.job, nodes=("a100-4", "a100-5")))
    assert engine._steady_row(st, cell, where, elsewhere, cand, "", 10.0, 2.0, 0.25) is None
