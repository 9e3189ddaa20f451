"""``state.advance`` with its reading of a kept job's assignment in place and ``_plus`` gives what the plain code
gave, on every tick of real runs.

``advance`` runs for every job every tick. For a running job it used to call ``running_cell`` and build the per-Cell
seconds with two hashes of the Cell per mapping; it now reads ``running_cell``'s first answer itself (the job is
kept where it was) and copies a one-Cell mapping with one hash (issue 27). The reference below is the plain code,
as it was; the runs are LAS and the flagship on the first hours of a generated trace, compared byte for byte
(``repr`` of every state, in order), with the shortcut's both sides covered; every fifth tick also on a copy of
the input where Slurm shows some running jobs on other nodes or at another size than they were kept at.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmplan.mechanism import engine, state
from slurmplan.mechanism.problem import PENDING_STATES, RUNNING_STATES
from slurmplan.tick_types import JobState

from .helpers import crius_llm_simulation


def _plain_ran(st, current, nodes, ran):
    d = st.__dict__.copy()
    cell = current.cell
    if ran > 0 and cell is not None:
        by_cell, epoch = dict(st.attained_by_cell), dict(st.epoch_by_cell)
        by_cell[cell] = by_cell.get(cell, 0.0) + ran
        epoch[cell] = epoch.get(cell, 0.0) + ran
        d["attained_by_cell"], d["epoch_by_cell"] = by_cell, epoch
    d["current"], d["attained_s"], d["requeued_at"] = current, st.attained_s + ran, None
    d["ran_on"] = tuple(nodes) or st.ran_on
    return JobState(**d)


def _plain_advance(inp, before):
    """``advance`` as it was before issue 27's fifteenth session."""
    now = inp.now
    dt = max(0.0, now - before.last_tick) if before.last_tick is not None else 0.0
    out = {}
    for mj in inp.jobs:
        job = mj.job
        st = before.jobs.get(job.job_id) or JobState(first_seen=now)
        if st.first_seen is None:
            st = state.evolve(st, first_seen=now)
        if job.state not in RUNNING_STATES:
            reset = job.state in PENDING_STATES and (st.current is not None or st.signalled_at is not None)
            if reset:
                st = state.evolve(st, current=None, signalled_at=None, sent="", requeued_at=now if st.ran_on else None)
            out[job.job_id] = state._requeue_wait_over(st, now, inp.config.requeue_delay_s)
            continue
        ran = dt if job.start_time is None else min(dt, max(0.0, now - job.start_time))
        out[job.job_id] = _plain_ran(st, state.running_cell(mj, st), job.nodes, ran)
    return out


def _elsewhere(mj, i: int):
    """A running job as Slurm might show it after a change the daemon did not make: on its nodes and one more, or
    with twice its GPUs per node (every third job each)."""
    if mj.job.state not in RUNNING_STATES or i % 3 == 0:
        return mj
    if i % 3 == 1:
        return replace(mj, job=replace(mj.job, nodes=(*mj.job.nodes, "elsewhere")))
    return replace(mj, job=replace(mj.job, gpus_per_node=2 * mj.job.gpus_per_node))


@pytest.mark.parametrize("policy", ["las", "slurmplan"])
def test_advance_equals_the_plain_code_on_every_tick(policy: str, monkeypatch) -> None:
    seen = {"ticks": 0, "running": 0, "slow": 0, "several_cells": 0}
    fast_advance, running_cell = state.advance, state.running_cell

    def counting_running_cell(mj, st):
        seen["slow"] += 1
        return running_cell(mj, st)

    def checked_advance(inp, before):
        got = fast_advance(inp, before)
        want = _plain_advance(inp, before)
        assert list(got) == list(want)
        assert repr(list(got.values())) == repr(list(want.values()))
        if seen["ticks"] % 5 == 0:  # Slurm shows some running jobs elsewhere, or at another size, than kept
            other = replace(inp, jobs=tuple(_elsewhere(mj, i) for i, mj in enumerate(inp.jobs)))
            got_other, want_other = fast_advance(other, before), _plain_advance(other, before)
            assert repr(list(got_other.values())) == repr(list(want_other.values()))
        seen["ticks"] += 1
        seen["running"] += sum(1 for mj in inp.jobs if mj.job.state in RUNNING_STATES)
        seen["several_cells"] += sum(1 for st in got.values() if len(st.attained_by_cell) > 1)
        return got

    monkeypatch.setattr(state, "running_cell", counting_running_cell)
    monkeypatch.setattr(engine, "advance", checked_advance)
    crius_llm_simulation(policy).run()
    assert seen["ticks"] > 50
    assert seen["running"] > 1000
    # ``running_cell`` is called by the plain reference once a running row, and by ``advance`` only off the shortcut
    assert seen["running"] < seen["slow"] < 2 * seen["running"]
    assert seen["several_cells"] > 0  # jobs that ran in more than one Cell: ``_plus``'s other path compared too
