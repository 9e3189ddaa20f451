"""Properties every policy keeps on random problems: capacity, bounds, and agnostic == aware when homogeneous."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.domain import AllocationProblem, Candidate, Cell, JobClass
from slurmplan.policy import list_policies, load_policy
from slurmplan.policy.problem import type_problem, violations

TYPES = ("a100", "v100", "k80")


@st.composite
def problems(draw, homogeneous: bool = False) -> AllocationProblem:
    nj = draw(st.integers(1, 7))
    types = TYPES[:1] if homogeneous else TYPES[: draw(st.integers(1, 3))]
    sizes = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=2, unique=True))
    cells = tuple(Cell(t, s) for t in types for s in sizes)
    thr = np.array(
        draw(st.lists(st.lists(st.floats(0, 100), min_size=len(cells), max_size=len(cells)), min_size=nj, max_size=nj))
    )
    thr[thr < 5] = 0.0
    cap = {t: draw(st.integers(0, 6)) for t in types}
    guaranteed = draw(st.lists(st.booleans(), min_size=nj, max_size=nj))
    host = {}
    if draw(st.booleans()):  # CPUs limit X too: every column needs some, each type has a CPU budget
        cpus = draw(st.lists(st.integers(0, 16), min_size=nj * len(cells), max_size=nj * len(cells)))
        host["candidates"] = tuple(
            tuple(Candidate(cell, float(thr[j, c]), cpus=cpus[j * len(cells) + c]) for c, cell in enumerate(cells))
            for j in range(nj)
        )
        host["cpu_capacity"] = {t: draw(st.integers(0, 32)) for t in types}
    return AllocationProblem(
        job_ids=tuple(range(nj)),
        cells=cells,
        throughput=thr,
        capacity=cap,
        weights=np.array(draw(st.lists(st.floats(0.5, 3), min_size=nj, max_size=nj))),
        steps_remaining=np.array(draw(st.lists(st.floats(10, 1e5), min_size=nj, max_size=nj))),
        time_since_start=np.zeros(nj),
        submit_time=np.arange(nj, dtype=float),
        deadline=np.full(nj, 3600.0),
        accounts=tuple(draw(st.lists(st.sampled_from("xyz"), min_size=nj, max_size=nj))),
        account_weights={"x": 1.0, "y": 2.0, "z": 3.0},
        job_class=tuple(JobClass.GUARANTEED if g else JobClass.BEST_EFFORT for g in guaranteed),
        sla_throughput=thr.max(axis=1) * 0.3,
        requested=np.zeros(nj, dtype=int),
        current=np.where(np.arange(nj) % 2 == 0, 0, -1),
        cost_per_gpu_hour=dict.fromkeys(types, 1.5),
        **host,
    )


POLICIES = list_policies()


@pytest.mark.parametrize("name", POLICIES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
def test_valid_allocation(name, problem):
    alloc = load_policy(name).allocate(problem)
    assert alloc.x.shape == problem.throughput.shape
    assert violations(problem, alloc) == []
    assert alloc.job_ids == problem.job_ids


@pytest.mark.parametrize(
    ("aware", "agnostic"),
    [
        ("las", "las_agnostic"),
        ("makespan", "makespan_agnostic"),
        ("finish_time_fairness", "finish_time_fairness_agnostic"),
    ],
)
@settings(max_examples=15, deadline=None)
@given(problem=problems(homogeneous=True))
def test_agnostic_equals_aware_on_homogeneous_cluster(aware, agnostic, problem):
    # One GPU type: an agnostic policy sees each job's own throughput per Cell size, so both solve the same
    # program; compare optimal values (the optimal X need not be unique).
    a = load_policy(aware).allocate(problem)
    b = load_policy(agnostic).allocate(problem)
    if np.isfinite(a.objective) or np.isfinite(b.objective):
        assert a.objective == pytest.approx(b.objective, rel=1e-4, abs=1e-6)


@settings(max_examples=20, deadline=None)
@given(problem=problems(homogeneous=True))
def test_fifo_agnostic_equals_aware_on_homogeneous_cluster(problem):
    a = load_policy("fifo").allocate(problem)
    b = load_policy("fifo_agnostic").allocate(problem)
    np.testing.assert_allclose(a.effective_throughput(problem), b.effective_throughput(problem))


def test_homogeneous_single_size_is_plain_las():
    problem = type_problem({"v100": [5, 50, 500]}, {"v100": 2})
    np.testing.assert_allclose(load_policy("las").allocate(problem).x[:, 0], [2 / 3] * 3, atol=1e-6)


def test_within_scales_an_interior_point_answer_onto_the_constraints():
    # The hypothesis run above once drew an FTF answer 1e-5 over a CPU budget of 1 (CLARABEL's tolerance):
    # lp.within is what makes a conic solver's x meet a @ x <= b exactly. Rows: job 0's two shares, job 1's
    # share, and a CPU budget of 1 that columns 0 and 2 need 9 CPUs of.
    import scipy.sparse as sp

    from slurmplan.policy.lp import within

    a = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [9.0, 0.0, 9.0]]))
    b = np.ones(3)
    over = np.array([0.5, 0.6, 1 / 9 + 1e-5])
    v = within(a, b, over)
    assert (a @ v <= b * (1 + 1e-12)).all()
    assert (v <= over).all() and (v > 0).all()  # only shrunk, nothing dropped
    feasible = np.array([0.05, 0.3, 0.05])
    np.testing.assert_array_equal(within(a, b, feasible), feasible)  # a feasible answer is left exactly as it is
    np.testing.assert_array_equal(within(a, np.array([1.0, 1.0, 0.0]), feasible), [0.0, 0.3, 0.0])  # no CPUs
