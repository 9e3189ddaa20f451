"""LAS's LPs started from the last round's bases (``las_warm``) reach the same optima, in far fewer iterations.

On a real LAS run on ``bench_sim``'s trace (real HiGHS) every warm-started LP's max-min value and efficiency-pass
total score equal a cold solve's of the same LP, and the run's warm solves take under half the cold solves'
simplex iterations (a start that carried statuses to the wrong columns or rows would not). The carrying itself is
checked on keys that come, go and move.
"""

from __future__ import annotations

import numpy as np

from slurmplan.policy import las_warm
from slurmplan.policy.las import MaxMinFairness, undominated, without
from slurmplan.policy.registry import load_policy
from slurmplan.policy.waterfill import max_min
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads


def test_statuses_follow_their_keys():
    last = np.array([40, 10, 30, 20])
    statuses = np.array([2, 1, 0, 4], dtype=np.int8)
    carried = las_warm._carried(last, statuses, np.array([10, 20, 50, 40, 30]), 3)
    assert carried.tolist() == [1, 4, 3, 2, 0]
    assert las_warm._carried(last, statuses, np.array([99, 0]), 3).tolist() == [3, 3]
    assert las_warm._carried(np.array([], dtype=np.int64), statuses[:0], np.array([1, 2]), 3).tolist() == [3, 3]


class _Iterations:
    """A start that only counts each phase's simplex iterations (a cold solve's)."""

    def __init__(self) -> None:
        self.count = [0, 0]

    def before(self, model, phase: int) -> None:
        pass

    def after(self, model, phase: int, x) -> None:
        self.count[phase] += model._h.getInfo().simplex_iteration_count


def test_warm_lps_reach_the_cold_optima_in_fewer_iterations(monkeypatch):
    warm_iterations = [0, 0]
    after = las_warm.WarmStart.after

    def counted(self, model, phase, x):
        warm_iterations[phase] += model._h.getInfo().simplex_iteration_count
        after(self, model, phase, x)

    monkeypatch.setattr(las_warm.WarmStart, "after", counted)
    cold = _Iterations()
    seen = {"solves": 0}
    solve = MaxMinFairness.solve

    def checked(self, problem, idx, score):
        out = solve(self, problem, idx, score)
        keep = undominated(idx, score)
        whole = max_min(without(idx, keep), score[keep], problem.column("weights"), "highs", start=cold)  # cold
        seen["solves"] += 1
        np.testing.assert_allclose(out.objective, whole.t, rtol=1e-9, atol=1e-12)
        x = out.x[idx.rows, idx.cols]
        np.testing.assert_allclose(score @ x, score[keep] @ whole.x, rtol=1e-9, atol=1e-9)
        return out

    monkeypatch.setattr(MaxMinFairness, "solve", checked)
    jobs = llm_trace(LlmTraceConfig(num_jobs=250, rate_per_h=13000 / 14 / 24, seed=0), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    las = load_policy("las")
    Simulation(build_workloads(jobs, spec, None), spec, las, options).run()
    assert seen["solves"] > 50
    assert las._warm is not None and las._warm._last is not None
    assert sum(warm_iterations) < 0.5 * sum(cold.count), (warm_iterations, cold.count)


def test_an_alien_start_is_accepted():
    """HiGHS takes statuses that are not a basis (too many basic) and still solves to the optimum."""
    import scipy.sparse as sp

    from slurmplan.policy.highs import HighsModel

    a = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 0.0]]))
    model = HighsModel(np.array([-1.0, -2.0]), a, np.array([1.0, 0.5]), np.zeros(2), np.ones(2))
    assert model.start_from(np.ones(2, dtype=np.int8), np.ones(2, dtype=np.int8))  # every status basic
    res = model.run()
    assert res.ok and np.allclose(res.x, [0.0, 1.0])


def test_the_basis_codes_are_highs_own():
    """``basis``'s codes, read from the basic variables and the solution, equal ``getBasis``'s statuses."""
    import scipy.sparse as sp

    from slurmplan.policy.highs import HighsModel

    rng = np.random.default_rng(0)
    for _ in range(20):
        a = sp.random(30, 60, density=0.2, format="csc", random_state=rng)
        model = HighsModel(-rng.random(60), a, rng.random(30) * 3, np.zeros(60), np.ones(60))
        res = model.run()
        cols, rows = model.basis(res.x)
        b = model._h.getBasis()
        assert cols.tolist() == [int(s) for s in b.col_status]
        assert rows.tolist() == [int(s) for s in b.row_status]
