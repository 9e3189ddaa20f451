"""LAS reuses last round's answer only when its LP is byte for byte the same (``las.lp_key``, ``_last_lp``).

On a real LAS run on ``bench_sim``'s trace (real HiGHS) every round's allocation is compared with a fresh policy's
(nothing remembered), byte for byte, and the run must have rounds that reuse an answer. On generated problems a
policy that solved one problem and then gets a second (the same, one weight changed, one capacity changed, or
another problem) answers the second exactly as a fresh policy does: a key that left out the weights or the
capacities, or a cache that ignored the key, fails here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy.las import MaxMinFairness, lp_key, normalised_score
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads
from tests.policy.test_las_uncontended import problems


def _same(a, b) -> None:
    assert a.status == b.status
    assert np.float64(a.objective).tobytes() == np.float64(b.objective).tobytes()  # NaN: no job has a column
    assert a.x.tobytes() == b.x.tobytes()


def test_a_real_run_decides_as_with_every_lp_solved(monkeypatch):
    fresh = load_policy("las")
    solve = MaxMinFairness.solve
    counts = {"solves": 0, "reused": 0}

    def checked(self, problem, idx, score):
        if self is fresh:
            return solve(self, problem, idx, score)
        key = lp_key(idx, score, problem.column("weights"), (self.solver, self.prune(), tuple(self.params.items())))
        counts["reused"] += int(self._last_lp is not None and self._last_lp[0] == key)
        counts["solves"] += 1
        out = solve(self, problem, idx, score)
        fresh._last_lp = None  # solve it afresh
        _same(out, solve(fresh, problem, idx, score))
        return out

    monkeypatch.setattr(MaxMinFairness, "solve", checked)
    jobs = llm_trace(LlmTraceConfig(num_jobs=250, rate_per_h=13000 / 14 / 24, seed=0), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    Simulation(build_workloads(jobs, spec, None), spec, load_policy("las"), options).run()
    assert counts["solves"] > 50 and counts["reused"] > 0, counts


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), problems(), st.sampled_from(["same", "weight", "capacity", "other"]))
def test_the_second_problem_is_answered_as_by_a_fresh_policy(first, other, change):
    if change == "same":
        second = first
    elif change == "weight":
        weights = first.column("weights").copy()
        weights[0] *= 2.0
        second = replace(first, weights=weights)
    elif change == "capacity":
        gpu_type = next(iter(first.capacity))
        second = replace(first, capacity={**first.capacity, gpu_type: first.capacity[gpu_type] + 1})
    else:
        second = other
    policy = load_policy("las")
    policy.allocate(first)
    _same(policy.allocate(second), load_policy("las").allocate(second))


def test_the_key_sees_weights_scores_and_capacities():
    problem = AllocationProblem(
        job_ids=(1, 2), cells=(Cell("a100", 1), Cell("v100", 2)), throughput=np.array([[10.0, 12.0], [5.0, 0.0]]),
        capacity={"a100": 1, "v100": 2}, weights=np.array([1.0, 2.0]),
    )  # fmt: skip
    idx, score = normalised_score(problem, True)
    weights = problem.column("weights")
    key = lp_key(idx, score, weights, ())
    assert lp_key(idx, score.copy(), weights.copy(), ()) == key
    assert lp_key(idx, score, weights * 2, ()) != key
    assert lp_key(idx, score + 1, weights, ()) != key
    assert lp_key(replace(idx, capacity=idx.capacity + 1), score, weights, ()) != key
    assert lp_key(idx, score, weights, ("other",)) != key
    assert lp_key(idx, score.astype(np.float32), weights, ()) != key
