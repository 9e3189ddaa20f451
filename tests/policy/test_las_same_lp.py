"""LAS reuses last round's answer only when its LP is byte for byte the same (``las.lp_key``, ``_last_lp``).

On a real LAS run on ``bench_sim``'s trace (real HiGHS) every round's allocation is compared with a fresh policy's
(nothing remembered), byte for byte, and the run must have rounds that reuse an answer. On generated problems a
policy that solved one problem and then gets a second (the same, one weight changed, one capacity changed, or
another problem) answers the second exactly as one that solved the first and forgot its answer (but not its
bases, ``las_warm``) does, or, where the LP is the same, with the first answer (a re-solve from that LP's own final
basis repeats it up to the last bits): a key that left out the weights or the
capacities, or a cache that ignored the key, fails here.
"""

from __future__ import annotations

import copy
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


def _copied(warm):
    if warm is None:
        return None
    out = copy.copy(warm)
    out._cells, out._types = dict(warm._cells), dict(warm._types)
    return out


def test_a_real_run_decides_as_with_every_lp_solved(monkeypatch):
    fresh = load_policy("las")
    solve = MaxMinFairness.solve
    counts = {"solves": 0, "reused": 0}

    def checked(self, problem, idx, score):
        if self is fresh:
            return solve(self, problem, idx, score)
        key = lp_key(idx, score, problem.column("weights"), (self.solver, self.prune(), tuple(self.params.items())))
        reused = self._last_lp is not None and self._last_lp[0] == key
        counts["reused"] += int(reused)
        counts["solves"] += 1
        fresh._warm = _copied(self._warm)  # from the same starting bases (las_warm), nothing else remembered
        out = solve(self, problem, idx, score)
        fresh._last_lp = None  # solve it afresh
        again = solve(fresh, problem, idx, score)
        if reused:  # a solve from the LP's own final basis: the same vertex, up to the last bits
            np.testing.assert_allclose(out.x, again.x, rtol=0, atol=1e-9)
        else:
            _same(out, again)
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
    policy, fresh = load_policy("las"), load_policy("las")
    answer = policy.allocate(first)
    fresh.allocate(first)
    fresh._last_lp = None  # solves the second (from the same bases as ``policy`` would)
    last = policy._last_lp
    idx, score = normalised_score(second, True)
    key = lp_key(idx, score, second.column("weights"), (policy.solver, policy.prune(), tuple(policy.params.items())))
    out, again = policy.allocate(second), fresh.allocate(second)
    if last is not None and last[0] == key:  # the same LP: its answer again, which a re-solve from the LP's own
        np.testing.assert_allclose(out.x, again.x, rtol=0, atol=1e-9)  # final basis repeats up to the last bits
        assert np.float64(out.objective).tobytes() == np.float64(answer.objective).tobytes()
    else:
        _same(out, again)


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
