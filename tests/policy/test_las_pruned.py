"""LAS's LP without its dominated variables (``las.undominated``) reaches the same optima as the whole LP.

The mask is checked against its definition pair by pair on generated problems; then, on every contested round of a
real LAS run on ``bench_sim``'s trace (real HiGHS), the pruned LP's max-min value and efficiency-pass total score
equal the whole LP's, and the whole LP's own solution never puts a share on a pruned variable (every optimum of the
efficiency pass leaves them at 0). A mask that dropped a variable some job needs would lower one of the two values.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.policy import highs
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.las import MaxMinFairness, normalised_score, undominated, without
from slurmplan.policy.registry import build_policy, load_policy
from slurmplan.policy.waterfill import max_min
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads
from tests.policy.test_las_uncontended import problems


def dominated_by_definition(idx, score) -> np.ndarray:
    """Pair by pair: another variable of the same job and GPU type, no more GPUs, a strictly higher score."""
    out = np.zeros(idx.size, dtype=bool)
    for v in range(idx.size):
        same = (idx.rows == idx.rows[v]) & (idx.type_of == idx.type_of[v]) & (np.arange(idx.size) != v)
        out[v] = bool((same & (idx.gpus <= idx.gpus[v]) & (score > score[v])).any())
    return out


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.booleans())
def test_the_mask_is_the_definition(problem, aware):
    idx, score = normalised_score(problem, aware)
    keep = undominated(idx, score)
    if idx.host:
        assert keep.all()  # with host limits nothing is pruned
        return
    np.testing.assert_array_equal(~keep, dominated_by_definition(idx, score))


def test_the_mask_on_ties_and_equal_gpus():
    """Equal scores never dominate; a higher score on as many GPUs does; another type or job never does."""
    from slurmplan.policy import lp

    idx = lp.LpIndex(
        num_jobs=2, num_cells=5, rows=np.array([0, 0, 0, 0, 0, 1]), cols=np.array([0, 1, 2, 3, 4, 1]),
        thr=np.ones(6), gpus=np.array([1.0, 2.0, 2.0, 4.0, 1.0, 8.0]), types=("a", "b"),
        type_of=np.array([0, 0, 0, 0, 1, 0]), capacity=np.array([8.0, 8.0]),
    )  # fmt: skip
    score = np.array([0.5, 0.5, 0.7, 0.6, 0.1, 0.01])
    # 0: nothing before it; 1: 0.5 ties 0.5 and loses to 0.7 on as many GPUs; 2: best; 3: 0.7 on fewer GPUs;
    # 4: alone on type b; 5: another job
    np.testing.assert_array_equal(undominated(idx, score), [True, False, True, False, True, True])


def test_pruned_lps_reach_the_whole_lps_optima_on_a_real_run(monkeypatch):
    seen: list[tuple] = []
    solve = MaxMinFairness.solve

    def recorded(self, problem, idx, score):
        out = solve(self, problem, idx, score)
        seen.append((problem, idx, score, out))
        return out

    monkeypatch.setattr(MaxMinFairness, "solve", recorded)
    jobs = llm_trace(LlmTraceConfig(num_jobs=250, rate_per_h=13000 / 14 / 24, seed=0), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    las = load_policy("las")
    assert las.prune() and highs.fast_solves()
    Simulation(build_workloads(jobs, spec, None), spec, las, options).run()

    pruned_any = 0
    for problem, idx, score, out in seen:
        keep = undominated(idx, score)
        pruned_any += int(not keep.all())
        weights = problem.column("weights")
        whole = max_min(idx, score, weights, "highs")
        part = max_min(without(idx, keep), score[keep], weights, "highs")
        assert whole.ok and part.ok
        np.testing.assert_allclose(part.t, whole.t, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.objective, whole.t, rtol=1e-9, atol=1e-12)
        x = out.x[idx.rows, idx.cols]  # what LAS returned, back on the whole LP's variables
        assert (x[~keep] == 0).all()
        np.testing.assert_allclose(score @ x, score @ whole.x, rtol=1e-9, atol=1e-9)
        assert (whole.x[~keep] <= 1e-9).all(), "the whole LP's optimum used a variable called dominated"
    assert len(seen) > 50 and pruned_any > 0.9 * len(seen)


def test_reference_solves_and_water_filling_do_not_prune():
    def las(**params) -> MaxMinFairness:
        return build_policy(PolicyConfig(name="las", objective="max_min_fairness", params=params))

    assert las().prune()
    with highs.reference_solves():
        assert not las().prune()
    assert not las(water_filling=True).prune()
    assert not las(efficiency_pass=False).prune()
