"""Crius's placement search shares each GPU type's scaling steps among that type's columns (a speed change for
the 2,048-job decision time): it must choose exactly what trying every column on its own copy chooses."""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.crius import Crius
from slurmplan.policy.problem import synthetic_problem
from slurmplan.policy.registry import build_policy


class ReferenceCrius(Crius):
    """Crius's search as first written: every column on a fresh copy of the packing, steps searched anew."""

    def _place(self, pack, j, score):
        best_value, best_state = -np.inf, None
        for c in np.nonzero(pack.problem.throughput[j] > 0)[0]:
            trial = pack.copy()
            if pack.cell_type[c] < 0 or not self._make_room(trial, j, int(c), score):
                continue
            trial.assign(j, int(c))
            value = trial.value(score)
            if value > best_value:
                best_value, best_state = value, trial
        if best_state is not None:
            pack.col[:], pack.free[:] = best_state.col, best_state.free
            for (_, free), (_, best_free) in zip(pack.host, best_state.host, strict=True):
                free[:] = best_free


@pytest.mark.parametrize("depth", [0, 1, 3, 6])
@pytest.mark.parametrize(("jobs", "gpus", "seed"), [(64, 64, 0), (200, 128, 1), (300, 256, 2)])
def test_shared_step_chains_choose_what_the_reference_search_chooses(depth, jobs, gpus, seed):
    problem = synthetic_problem(jobs, gpus=gpus, seed=seed)
    params = {"search_depth": depth, "scale_up": True}
    fast = Crius(PolicyConfig(name="crius", objective="crius", params=params)).allocate(problem)
    ref = ReferenceCrius(PolicyConfig(name="crius", objective="crius", params=params)).allocate(problem)
    np.testing.assert_array_equal(fast.x, ref.x)


def test_flagship_search_is_unchanged_by_the_shared_chains(monkeypatch):
    problem = synthetic_problem(300, gpus=256, seed=3)
    fast = build_policy(PolicyConfig("slurmplan", "slurmplan", params={"search_depth": 6})).allocate(problem)
    monkeypatch.setattr(Crius, "_place", ReferenceCrius._place)
    ref = build_policy(PolicyConfig("slurmplan", "slurmplan", params={"search_depth": 6})).allocate(problem)
    np.testing.assert_array_equal(fast.x, ref.x)


def test_chains_kept_between_searches_choose_what_the_reference_search_chooses_on_a_real_run(monkeypatch):
    """Every search of the flagship on a busy run (the Crius cluster at 800 arrivals an hour, rounds and refills
    between them), made with the chains kept from the search before on an unchanged packing (``Crius._chains``), is
    compared with the reference search on a copy of the same packing: the same packing after it; and chains were
    reused."""
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"searches": 0, "reused": 0}
    chains, place = Crius._chains, Crius._place

    def counting_chains(self, pack, j, score):
        out = chains(self, pack, j, score)
        seen["reused"] += bool(out)  # a search that starts with chains already built
        return out

    def checked_place(self, pack, j, score):
        ref = pack.copy()
        ReferenceCrius._place(self, ref, j, score)
        place(self, pack, j, score)
        np.testing.assert_array_equal(pack.col, ref.col)
        np.testing.assert_array_equal(pack.free, ref.free)
        for (_, free), (_, ref_free) in zip(pack.host, ref.host, strict=True):
            np.testing.assert_array_equal(free, ref_free)
        seen["searches"] += 1

    monkeypatch.setattr(Crius, "_chains", counting_chains)
    monkeypatch.setattr(Crius, "_place", checked_place)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["searches"] > 300
    assert seen["reused"] > 50, seen
