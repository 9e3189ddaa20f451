"""LAS and FIFO on problems whose optimum is known by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slurmplan.policy import load_policy
from slurmplan.policy.problem import type_problem


def thesis_problem():
    # Gavel thesis section A3 (1): T = job0 [40, 10], job1 [12, 4], job2 [100, 50] on 1 V100 + 1 K80.
    return type_problem({"v100": [40, 12, 100], "k80": [10, 4, 50]}, {"v100": 1, "k80": 1})


@pytest.mark.parametrize("solver", ["highs", "CLARABEL"])
def test_thesis_max_min_example(solver):
    from slurmplan.policy.registry import build_policy, load_config

    cfg = load_config("las")
    policy = build_policy(type(cfg)(**{**cfg.__dict__, "solver": solver}))
    alloc = policy.allocate(thesis_problem())
    exact = np.array([[5 / 11, 0.0], [5 / 11, 1 / 11], [1 / 11, 10 / 11]])
    np.testing.assert_allclose(alloc.x, exact, atol=1e-6)
    # The thesis prints X_het truncated to two decimals.
    assert np.array_equal(np.floor(alloc.x * 100 + 1e-6) / 100, [[0.45, 0.0], [0.45, 0.09], [0.09, 0.90]])
    assert np.array_equal(np.round(alloc.x, 2), [[0.45, 0.0], [0.45, 0.09], [0.09, 0.91]])
    assert alloc.objective == pytest.approx(8 / 11, abs=1e-6)


def test_thesis_example_beats_isolated_by_about_ten_percent():
    problem = thesis_problem()
    alloc = load_policy("las").allocate(problem)
    isolated = (problem.throughput * (1 / 3)).sum(axis=1)
    gain = alloc.effective_throughput(problem) / isolated
    assert gain.min() == pytest.approx(1.09, abs=0.005)


def test_weighted_las_gives_twice_the_share_to_weight_two():
    problem = type_problem({"v100": [10, 10]}, {"v100": 1}, weights=np.array([2.0, 1.0]))
    x = load_policy("las").allocate(problem).x
    np.testing.assert_allclose(x[:, 0], [2 / 3, 1 / 3], atol=1e-6)


def test_multi_gpu_job_gets_fair_gpu_share():
    from slurmplan.domain import AllocationProblem, Cell

    problem = AllocationProblem(
        job_ids=(1, 2),
        cells=(Cell("v100", 1), Cell("v100", 2)),
        throughput=np.array([[10.0, 0.0], [0.0, 20.0]]),
        capacity={"v100": 2},
    )
    x = load_policy("las").allocate(problem).x
    # equal GPU-time: 1-GPU job x1 GPUs, 2-GPU job 2*x2 GPUs; max-min of (x1*1, x2*2) with x1 + 2 x2 <= 2.
    assert x[0, 0] * 1 == pytest.approx(x[1, 1] * 2, abs=1e-6)
    assert x[0, 0] + 2 * x[1, 1] == pytest.approx(2.0, abs=1e-6)


def test_fifo_gives_first_job_the_fastest_type():
    problem = type_problem({"v100": [40, 30], "k80": [10, 20]}, {"v100": 1, "k80": 1}, submit_time=np.array([5.0, 1.0]))
    x = load_policy("fifo").allocate(problem).x
    # job 1 arrived first: V100 is its fastest; job 0 then gets the K80.
    np.testing.assert_allclose(x, [[0, 1], [1, 0]], atol=1e-6)


def test_fifo_lp_form_lets_a_later_job_outbid():
    # The thesis' LP weights (M - m) = 2, 1: job 1 first on V100 scores 2*30/30 + 10/40 = 2.25, the swap
    # scores 2*20/30 + 40/40 = 2.33, so the LP swaps: documented, not strict FIFO.
    from slurmplan.policy.base import PolicyConfig
    from slurmplan.policy.registry import build_policy

    problem = type_problem({"v100": [40, 30], "k80": [10, 20]}, {"v100": 1, "k80": 1}, submit_time=np.array([5.0, 1.0]))
    alloc = build_policy(PolicyConfig("f", "fifo", params={"mode": "lp"})).allocate(problem)
    np.testing.assert_allclose(alloc.x, [[1, 0], [0, 1]], atol=1e-6)
    assert alloc.objective == pytest.approx(2 * 20 / 30 + 1, abs=1e-6)


def test_slurm_fifo_uses_request_only_and_backfills():
    problem = type_problem(
        {"v100": [40, 30, 20], "k80": [10, 20, 5]},
        {"v100": 1, "k80": 1},
        requested=np.array([0, 0, 1]),
        submit_time=np.array([0.0, 1.0, 2.0]),
    )
    x = load_policy("slurm_fifo").allocate(problem).x
    np.testing.assert_array_equal(x, [[1, 0], [0, 0], [0, 1]])


def test_slurm_fifo_never_takes_gpus_from_a_running_job_for_an_earlier_one():
    # Job 2 (later) runs on the v100, backfilled while job 0 held it; job 1 (earlier, also v100) now waits.
    # Plain Slurm without preemption lets job 2 finish: the simulator used to stop it for job 1 (4 restarts on
    # the replay trace where the real run has none).
    problem = dataclasses.replace(
        type_problem(
            {"v100": [40, 30, 20], "k80": [10, 20, 5]},
            {"v100": 1, "k80": 1},
            requested=np.array([1, 0, 0]),
            submit_time=np.array([0.0, 1.0, 2.0]),
        ),
        current=np.array([-1, -1, 0]),
    )
    x = load_policy("slurm_fifo").allocate(problem).x
    np.testing.assert_array_equal(x, [[0, 1], [0, 0], [1, 0]])


@pytest.mark.parametrize("name", ["las_agnostic", "finish_time_fairness_agnostic", "makespan_agnostic"])
def test_agnostic_shares_are_spread_over_types_by_their_size(name):
    # Types are invisible to an agnostic policy, so a job's share goes to each type in proportion to its GPUs
    # (Gavel's interior-point solution), not wherever a simplex vertex happens to put it.
    problem = type_problem({"v100": [40, 12, 100, 7], "k80": [10, 4, 50, 7]}, {"v100": 2, "k80": 1})
    x = load_policy(name).allocate(problem).x
    assert x.sum() == pytest.approx(3.0, abs=1e-6)  # the whole cluster is handed out
    np.testing.assert_allclose(x[:, 0], 2 * x[:, 1], atol=1e-6)


def test_agnostic_spread_is_skipped_when_it_would_overfill_a_type():
    from slurmplan.policy.lp import type_blind

    # job 1 cannot use the k80: spreading job 0 evenly would leave job 1 too little v100 to keep its share
    problem = type_problem({"v100": [10, 10], "k80": [10, 0]}, {"v100": 1, "k80": 1})
    x = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(type_blind(problem, x), x)
    np.testing.assert_allclose(type_blind(problem, np.array([[0.5, 0.0], [0.5, 0.0]])), [[0.25, 0.25], [0.5, 0.0]])
