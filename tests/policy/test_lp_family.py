"""The rest of Gavel's LP family and the flagship, on problems whose optimum is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy import load_policy, lp
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.las import normalised_score
from slurmplan.policy.problem import type_problem, violations
from slurmplan.policy.registry import build_policy
from slurmplan.policy.waterfill import max_min


def make(objective: str, **params):
    return build_policy(PolicyConfig(objective, objective, params=params))


def test_water_filling_thesis_example_weights_3_1_1_1():
    # Gavel A3 (10): 4 identical jobs, weights 3, 1, 1, 1, 4 identical GPUs. Level 1: job 0 full (3 * 1/3),
    # the others 1/3 each, job 0 bottlenecked; level 2: the others rise to full GPUs.
    problem = type_problem({"v100": [1, 1, 1, 1]}, {"v100": 4})
    idx, score = normalised_score(problem, aware=True)
    res = max_min(idx, score, np.array([3.0, 1, 1, 1]), water_filling=True, efficiency_pass=False)
    assert res.t == pytest.approx(1 / 3, abs=1e-7)
    np.testing.assert_allclose(res.levels, [1, 1, 1, 1], atol=1e-6)
    assert res.iterations == 2
    single = max_min(idx, score, np.array([3.0, 1, 1, 1]), water_filling=False, efficiency_pass=False)
    np.testing.assert_allclose(single.levels, [1, 1 / 3, 1 / 3, 1 / 3], atol=1e-6)


@pytest.mark.parametrize(("inner", "expected"), [("fairness", [0.5, 0.5, 1.0]), ("fifo", [1.0, 0.0, 1.0])])
def test_hierarchical_accounts_by_weight(inner, expected):
    # Account a (weight 1) has jobs 0 and 1 (job 0 older), account b (weight 2) has job 2; 2 identical GPUs.
    problem = type_problem(
        {"v100": [1, 1, 1]},
        {"v100": 2},
        accounts=("a", "a", "b"),
        account_weights={"a": 1.0, "b": 2.0},
        submit_time=np.array([0.0, 1.0, 0.0]),
    )
    x = make("hierarchical", inner=inner).allocate(problem).x
    np.testing.assert_allclose(x[:, 0], expected, atol=1e-6)


def test_makespan_two_jobs_one_gpu():
    # 100 and 300 steps at 10 steps/s on one GPU: both finish together at 400/10 = 40 s.
    problem = type_problem({"v100": [10, 10]}, {"v100": 1}, steps_remaining=np.array([100.0, 300.0]))
    alloc = load_policy("makespan").allocate(problem)
    np.testing.assert_allclose(alloc.x[:, 0], [0.25, 0.75], atol=1e-6)
    assert alloc.objective == pytest.approx(40.0, rel=1e-6)


def test_max_throughput_toy_policy():
    problem = type_problem({"v100": [40, 12], "k80": [10, 4]}, {"v100": 1, "k80": 1})
    alloc = load_policy("max_throughput").allocate(problem)
    np.testing.assert_allclose(alloc.x, [[1, 0], [0, 1]], atol=1e-6)
    assert alloc.objective == pytest.approx(44.0)


def test_min_cost_takes_cheapest_work():
    # job 0: a100 30, a10 20; job 1: a100 30, a10 3; prices 3 and 1 per GPU-hour. Max work = 2/3 + 1.
    # At half of it (5/6): job 0 on the a10 (2/3 work for $1) plus 1/6 of job 1 on the a100 ($0.5).
    problem = type_problem(
        {"a100": [30, 30], "a10": [20, 3]}, {"a100": 1, "a10": 1}, cost_per_gpu_hour={"a100": 3.0, "a10": 1.0}
    )
    alloc = make("min_cost", work_floor=0.5).allocate(problem)
    np.testing.assert_allclose(alloc.x, [[0, 1], [1 / 6, 0]], atol=1e-6)
    assert alloc.objective == pytest.approx((5 / 6) / 1.5, rel=1e-6)


def test_min_cost_slo_meets_deadline_first():
    # Without the SLO job 1 would idle; its deadline needs 600 steps in 60 s = 10 steps/s = half the a10.
    problem = type_problem(
        {"a10": [20, 20]},
        {"a10": 1},
        cost_per_gpu_hour={"a10": 1.0},
        steps_remaining=np.array([1e6, 600.0]),
        deadline=np.array([np.inf, 60.0]),
        submit_time=np.array([0.0, 1.0]),
    )
    alloc = make("min_cost", slo=True, work_floor=0.5).allocate(problem)
    assert alloc.effective_throughput(problem)[1] >= 10.0 - 1e-6
    assert alloc.status == "optimal"


def test_min_cost_needs_prices():
    problem = type_problem({"a10": [20]}, {"a10": 1})
    with pytest.raises(ValueError, match="cost_per_gpu_hour"):
        load_policy("min_cost").allocate(problem)


def test_finish_time_fairness_equalises_rho():
    problem = type_problem(
        {"v100": [10, 10], "k80": [5, 2]},
        {"v100": 1, "k80": 1},
        steps_remaining=np.array([1000.0, 1000.0]),
        time_since_start=np.array([0.0, 0.0]),
    )
    alloc = load_policy("finish_time_fairness").allocate(problem)
    thr = alloc.effective_throughput(problem)
    # Same steps, same start: equal rho means time-to-finish ratios equal to their isolated ones.
    from slurmplan.policy.finish_time import isolated_throughput

    iso = isolated_throughput(problem, lp.index(problem))
    rho = (1000 / thr) / (1000 / iso)
    assert rho[0] == pytest.approx(rho[1], rel=1e-3)
    assert alloc.objective == pytest.approx(rho.max(), rel=1e-3)
    assert not violations(problem, alloc)


def test_sjf_serves_shortest_first():
    problem = type_problem({"v100": [10, 10]}, {"v100": 1}, steps_remaining=np.array([500.0, 50.0]))
    np.testing.assert_array_equal(load_policy("sjf").allocate(problem).x, [[0], [1]])


def test_agnostic_las_equal_time_on_thesis_example():
    problem = type_problem({"v100": [40, 12, 100], "k80": [10, 4, 50]}, {"v100": 1, "k80": 1})
    x = load_policy("las_agnostic").allocate(problem).x
    np.testing.assert_allclose(x.sum(axis=1), [2 / 3] * 3, atol=1e-6)


def flagship_problem(**fields) -> AllocationProblem:
    return AllocationProblem(
        job_ids=(10, 11),
        cells=(Cell("a", 1), Cell("b", 1)),
        throughput=np.array([[10.0, 10.0], [10.0, 10.0]]),
        capacity={"a": 1, "b": 1},
        **fields,
    )


def test_flagship_keeps_running_job_in_its_column():
    moved = 0
    for cur in (0, 1):
        x = load_policy("slurmplan").allocate(flagship_problem(current=np.array([cur, -1]))).x
        assert x[0, cur] == pytest.approx(1.0, abs=1e-6)
        moved += x[1, 1 - cur] > 0.99
    assert moved == 2


def test_highs_and_cvxpy_agree_on_las():
    from slurmplan.policy.problem import synthetic_problem

    problem = synthetic_problem(24, gpus=32, seed=3)
    fast = load_policy("las").allocate(problem)
    slow = make("max_min_fairness")
    slow = build_policy(PolicyConfig("x", "max_min_fairness", solver="CLARABEL"))
    assert slow.allocate(problem).objective == pytest.approx(fast.objective, rel=1e-5)


@pytest.mark.parametrize("inner", ["fairness", "fifo"])
def test_water_filling_same_through_cvxpy_rebuild_path(inner):
    # The warm-started HiGHS model and the rebuild-per-level path (any cvxpy solver) give the same levels.
    problem = type_problem(
        {"v100": [1, 1, 1], "k80": [0.5, 0.2, 0.4]},
        {"v100": 2, "k80": 1},
        accounts=("a", "a", "b"),
        account_weights={"a": 1.0, "b": 2.0},
        submit_time=np.array([0.0, 1.0, 0.0]),
    )
    fast = make("hierarchical", inner=inner).allocate(problem)
    slow = build_policy(PolicyConfig("h", "hierarchical", solver="CLARABEL", params={"inner": inner}))
    slow_alloc = slow.allocate(problem)
    np.testing.assert_allclose(
        slow_alloc.effective_throughput(problem), fast.effective_throughput(problem), rtol=1e-4, atol=1e-5
    )


def test_index_skips_unusable_columns():
    # Column 1's type is absent, column 2 needs more GPUs than its type has, job 1 cannot use column 0.
    problem = AllocationProblem(
        job_ids=(1, 2),
        cells=(Cell("a", 1), Cell("b", 1), Cell("a", 8)),
        throughput=np.array([[1.0, 1.0, 5.0], [0.0, 2.0, 9.0]]),
        capacity={"a": 4},
    )
    idx = lp.index(problem)
    assert list(zip(idx.rows.tolist(), idx.cols.tolist(), strict=True)) == [(0, 0)]
    alloc = load_policy("slurmplan").allocate(problem)
    assert alloc.x[0, 0] == pytest.approx(1.0) and alloc.x[1].sum() == 0.0
    assert not violations(problem, alloc)
