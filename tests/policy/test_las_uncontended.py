"""LAS's no-LP path (every job fits on its own best column) gives exactly the LP's allocation, and only then."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.domain import AllocationProblem, Candidate, Cell
from slurmplan.policy import load_policy
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.las import MaxMinFairness, normalised_score

TYPES = ("a100", "v100", "k80")


@st.composite
def problems(draw) -> AllocationProblem:
    """Small problems, capacity from scarce to ample, sometimes with CPU budgets and exact throughput ties."""
    nj = draw(st.integers(1, 8))
    types = TYPES[: draw(st.integers(1, 3))]
    sizes = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=2, unique=True))
    cells = tuple(Cell(t, s) for t in types for s in sizes)
    values = st.sampled_from([0.0, 10.0, 20.0]) if draw(st.booleans()) else st.floats(0, 100)  # ties or not
    thr = np.array(draw(st.lists(st.lists(values, min_size=len(cells), max_size=len(cells)), min_size=nj, max_size=nj)))
    thr[thr < 5] = 0.0
    cap = {t: draw(st.integers(0, 4 * nj)) for t in types}
    host: dict = {}
    if draw(st.booleans()):
        cpus = draw(st.lists(st.integers(0, 16), min_size=nj * len(cells), max_size=nj * len(cells)))
        host["candidates"] = tuple(
            tuple(Candidate(cell, float(thr[j, c]), cpus=cpus[j * len(cells) + c]) for c, cell in enumerate(cells))
            for j in range(nj)
        )
        host["cpu_capacity"] = {t: draw(st.integers(0, 16 * nj)) for t in types}
    return AllocationProblem(
        job_ids=tuple(range(nj)),
        cells=cells,
        throughput=thr,
        capacity=cap,
        weights=np.array(draw(st.lists(st.floats(0.5, 3), min_size=nj, max_size=nj))),
        **host,
    )


_seen = {"fast": 0, "lp": 0}  # counted over a derandomized run: the same problems every time, so the bar below holds


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fast_path_equals_the_lp_whenever_it_answers(problem):
    las = load_policy("las")
    idx, score = normalised_score(problem, True)
    fast = las.uncontended(problem, idx, score)
    solved = las.solve(problem, idx, score)
    if fast is None:
        _seen["lp"] += 1
        return
    _seen["fast"] += 1
    np.testing.assert_allclose(fast.x, solved.x, atol=1e-7)
    assert fast.status == solved.status == "optimal"
    np.testing.assert_allclose(fast.objective, solved.objective, rtol=1e-6)
    assert las.allocate(problem).x.tolist() == fast.x.tolist()  # allocate takes it


def test_both_paths_were_exercised():
    """The property above is only meaningful if the random problems hit both branches."""
    if _seen["fast"] + _seen["lp"] == 0:
        test_fast_path_equals_the_lp_whenever_it_answers()
    # >= 10 of 300 each: after the launcher's tests (torch imported in this process) ties in the random problems
    # break differently and the fast path answers 16 of them (>= 20 when this file runs alone)
    assert _seen["fast"] >= 10 and _seen["lp"] >= 10, _seen


def _two_jobs(cap: int, second_best: float) -> AllocationProblem:
    cells = (Cell("a100", 1), Cell("v100", 1))
    return AllocationProblem(
        job_ids=(1, 2),
        cells=cells,
        throughput=np.array([[10.0, second_best], [10.0, 4.0]]),
        capacity={"a100": cap, "v100": 2},
    )


def test_binding_capacity_or_a_tie_goes_to_the_lp():
    las = load_policy("las")
    for problem, why in ((_two_jobs(1, 5.0), "two jobs want the one a100"), (_two_jobs(2, 10.0), "job 1 ties")):
        idx, score = normalised_score(problem, True)
        assert las.uncontended(problem, idx, score) is None, why
    problem = _two_jobs(2, 5.0)
    idx, score = normalised_score(problem, True)
    fast = las.uncontended(problem, idx, score)
    assert fast is not None and fast.x.tolist() == [[1.0, 0.0], [1.0, 0.0]]


def test_options_that_change_the_answer_turn_it_off():
    problem = _two_jobs(2, 5.0)
    no_pass = MaxMinFairness(PolicyConfig(name="las", objective="max_min_fairness", params={"efficiency_pass": False}))
    idx, score = normalised_score(problem, True)
    assert no_pass.uncontended(problem, idx, score) is None
    zero_weight = AllocationProblem(
        job_ids=problem.job_ids,
        cells=problem.cells,
        throughput=problem.throughput,
        capacity=problem.capacity,
        weights=np.array([1.0, 0.0]),
    )
    idx, score = normalised_score(zero_weight, True)
    assert load_policy("las").uncontended(zero_weight, idx, score) is None
