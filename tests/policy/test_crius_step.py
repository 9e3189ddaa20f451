"""Crius's cheapest scaling step reads the arrays that do not change within a problem from a memo
(``Crius._step_parts``, issue 27): every step must be the one the plain computation (``_cheapest_step_plain``)
finds, on a busy flagship run and under CPU limits; a memo that also kept the free GPUs per type fails that."""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.crius import Crius
from slurmplan.policy.problem import synthetic_problem
from tests.policy.test_crius_rooms import _with_cpus


def _checking(monkeypatch, seen: dict) -> None:
    """Patch ``Crius._cheapest_step`` to compare every answer with the plain one (counted in ``seen``)."""
    step = Crius._cheapest_step

    def checked(self, pack, t, j, score):
        got = step(self, pack, t, j, score)
        seen["differ"] += got != Crius._cheapest_step_plain(self, pack, t, j, score)
        seen["calls"] += 1
        seen["steps"] += got is not None
        seen["host"] += bool(pack.host)
        return got

    monkeypatch.setattr(Crius, "_cheapest_step", checked)


def _busy_run() -> None:
    from tests.mechanism.helpers import crius_llm_simulation

    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()


def test_steps_on_a_real_run_are_the_plain_steps(monkeypatch) -> None:
    seen = dict.fromkeys(("calls", "steps", "differ", "host"), 0)
    _checking(monkeypatch, seen)
    _busy_run()
    assert seen["differ"] == 0 and seen["calls"] > 300 and seen["steps"] > 100, seen


@pytest.mark.parametrize(("jobs", "gpus", "seed"), [(120, 64, 0), (250, 128, 1)])
def test_steps_under_cpu_limits_are_the_plain_steps(monkeypatch, jobs, gpus, seed) -> None:
    seen = dict.fromkeys(("calls", "steps", "differ", "host"), 0)
    _checking(monkeypatch, seen)
    problem = _with_cpus(synthetic_problem(jobs, gpus=gpus, seed=seed), seed)
    Crius(PolicyConfig(name="crius", objective="crius", params={"search_depth": 3, "scale_up": True})).allocate(problem)
    assert seen["differ"] == 0 and seen["steps"] >= 3 and seen["host"] == seen["calls"] > 10, seen


def test_a_memo_that_keeps_the_free_gpus_fails(monkeypatch) -> None:
    """Too much remembered: the room on each type (``pack.free``) changes with every step and placement."""
    parts = Crius._step_parts

    def stale(self, pack, t):
        other, same_gpus, same, usable, type_of = parts(self, pack, t)
        kept = self._stale_room = getattr(self, "_stale_room", None) or {}
        room = kept.setdefault((id(pack.problem), t), pack.free.copy())
        return other, same_gpus, same, usable, type_of, room

    step = Crius._cheapest_step

    def with_stale_room(self, pack, t, j, score):
        *five, room = stale(self, pack, t)
        free = pack.free
        pack.free = room
        try:
            with monkeypatch.context() as m:
                m.setattr(Crius, "_step_parts", lambda *_: tuple(five))
                return step(self, pack, t, j, score)
        finally:
            pack.free = free

    monkeypatch.setattr(Crius, "_cheapest_step", with_stale_room)
    seen = dict.fromkeys(("calls", "steps", "differ", "host"), 0)
    _checking(monkeypatch, seen)
    _busy_run()
    assert seen["differ"] > 0, seen


def test_the_memo_follows_a_new_problem() -> None:
    """A second problem (new arrays) is not answered from the first one's parts."""
    policy = Crius(PolicyConfig(name="crius", objective="crius", params={"search_depth": 3, "scale_up": True}))
    for seed in (0, 1):
        problem = synthetic_problem(150, gpus=64, seed=seed)
        policy.allocate(problem)
        assert policy._last_steps is None or policy._last_steps[0] is problem.throughput
    assert np.isfinite(policy.allocate(synthetic_problem(150, gpus=64, seed=0)).x).all()
