"""Crius's search tests each GPU type's columns against the step chain together (``Crius._rooms``) and remembers
the answers while the chains are reused (issue 27): it must find, for every column, the packing the column-by-column
walk (``Crius._room_for``) finds, and extend the chains exactly as far as that walk does."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from slurmplan.domain import Candidate
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.crius import Crius
from slurmplan.policy.problem import synthetic_problem
from tests.policy.test_crius_search import ReferenceCrius


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    same = np.array_equal(a.col, b.col) and np.array_equal(a.free, b.free)
    return same and all(np.array_equal(x, y) for (_, x), (_, y) in zip(a.host, b.host, strict=True))


def _at(chain, state) -> int:
    """Where ``state`` (the very object) is in ``chain``; -1 if it is not."""
    return next((k for k, s in enumerate(chain) if s is state), -1)


def test_rooms_find_what_the_walk_finds_on_a_real_run(monkeypatch) -> None:
    """Every search of the flagship on a busy run (the Crius cluster at 800 arrivals an hour): ``_rooms`` against
    ``_room_for`` on copies of the same chains, column by column (the same packing, at the same place in its
    chain), and the chains as long afterwards; answers were taken from the memo, and columns found room."""
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"calls": 0, "found": 0, "remembered": 0}
    rooms = Crius._rooms

    def checked(self, pack, states, j, columns, score):
        ref_states = {t: list(chain) for t, chain in states.items()}
        want = {}
        for c in columns:
            t = int(pack.cell_type[c])
            if t >= 0:
                want[c] = self._room_for(pack, ref_states.setdefault(t, [pack]), j, c, score)
        last = self._last_rooms
        before = len(last[1]) if last is not None and last[0] is states else 0
        got = rooms(self, pack, states, j, columns, score)
        assert set(got) == {c for c, w in want.items() if w is not None}
        for c, state in got.items():
            t = int(pack.cell_type[c])
            assert _same(state, want[c])
            assert _at(states[t], state) == _at(ref_states[t], want[c]) >= 0
        assert {t: len(chain) for t, chain in states.items()} == {t: len(ch) for t, ch in ref_states.items()}
        seen["calls"] += 1
        seen["found"] += bool(got)
        seen["remembered"] += before > 0
        return got

    monkeypatch.setattr(Crius, "_rooms", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["calls"] > 300 and seen["found"] > 50 and seen["remembered"] > 50, seen


def _with_cpus(problem, seed: int):
    """The problem with each (job, column) needing CPUs (2-12 a GPU) and each type a CPU capacity that binds."""
    rng = np.random.default_rng(seed)
    per_gpu = rng.integers(2, 13, size=problem.throughput.shape)
    cands = tuple(
        tuple(
            Candidate(cell, float(problem.throughput[j, c]), cpus=int(per_gpu[j, c] * cell.gpus))
            for c, cell in enumerate(problem.cells)
        )
        for j in range(problem.num_jobs)
    )
    cap = {t: int(4 * g) for t, g in problem.capacity.items()}
    return replace(problem, candidates=cands, cpu_capacity=cap)


@pytest.mark.parametrize(("jobs", "gpus", "seed", "depth"), [(120, 64, 0, 3), (250, 128, 1, 3), (250, 128, 2, 6)])
def test_rooms_with_host_limits_choose_what_the_reference_search_chooses(jobs, gpus, seed, depth) -> None:
    """With CPU limits a column's answer depends on the job's needs there too (the memo's key holds them)."""
    problem = _with_cpus(synthetic_problem(jobs, gpus=gpus, seed=seed), seed)
    params = {"search_depth": depth, "scale_up": True}
    fast = Crius(PolicyConfig(name="crius", objective="crius", params=params))
    seen = {"calls": 0}
    rooms = fast._rooms

    def counted(*args):
        seen["calls"] += 1
        return rooms(*args)

    fast._rooms = counted  # type: ignore[method-assign]
    got = fast.allocate(problem)
    ref = ReferenceCrius(PolicyConfig(name="crius", objective="crius", params=params)).allocate(problem)
    np.testing.assert_array_equal(got.x, ref.x)
    assert seen["calls"] > 20 and got.x.sum() > 10
