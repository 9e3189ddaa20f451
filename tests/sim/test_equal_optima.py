"""Issue 27's speed guard: the simulator's faster LP solves change decisions only where equal optima are broken
differently, and the avg JCT stays within 1 %.

``highs.FAST`` (no presolve, Devex, primal simplex for the efficiency pass) returns the same optimum as HiGHS's
defaults (``highs.REFERENCE``, every solve before it) but, where the optimum is not unique, possibly another
vertex of it: another X, so other decisions downstream. The criterion for "equal optima": every LP the fast run
solves is also solved afresh with the reference options, and both optimal objective values agree (the max-min
level ``t``, then the efficiency pass's total score under the same level rows). A solve that stopped at a worse
point, or a model edited differently, would show here. Real HiGHS on a short version of ``bench_sim``'s trace
(same generator, rate, cluster, round and tick); nothing is mocked, the check only re-solves a copy.

LAS's LP also leaves out its dominated variables (``las.undominated``, issue 27's sixteenth session) except under
``reference_solves``, so for LAS this compares both changes with every solve before them (the pruned LP against the
whole one, round by round: ``tests/policy/test_las_pruned.py``), and its LPs start from the last round's bases
(``las_warm``, the seventeenth session; ``tests/policy/test_las_warm.py``), which the reference solves do not.

The policies are the two whose max-min LPs take ``highs.FAST``: LAS and makespan (water filling keeps the defaults;
``las_agnostic`` is the same code as LAS). When written (after main e4d097b): LAS 3.0284 h with the defaults,
3.0206 h fast (-0.26 %), 392 LPs; makespan 3.1728 h and 3.1634 h (-0.29 %), 1,448 LPs.
"""

from __future__ import annotations

import highspy
import numpy as np
import pytest

from slurmplan.policy import highs
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.metrics import summarize
from slurmplan.sim.workload import build_workloads

JOBS = 400


def _run(policy: str) -> dict:
    jobs = llm_trace(LlmTraceConfig(num_jobs=JOBS, rate_per_h=13000 / 14 / 24, seed=0), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    return summarize(Simulation(build_workloads(jobs, spec, None), spec, load_policy(policy), options).run())


def _reference_objective(model: highs.HighsModel) -> float:
    """The model as it stands, solved from scratch with the reference options."""
    h = highs._quiet_highs()
    h.passModel(model._h.getLp())
    for name, value in highs.REFERENCE.fresh:
        h.setOptionValue(name, value)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return float(h.getInfo().objective_function_value)


@pytest.mark.parametrize("policy", ["las", "makespan"])
def test_fast_solves_break_only_ties_and_keep_avg_jct_within_one_percent(policy: str, monkeypatch):
    with highs.reference_solves():
        reference = _run(policy)

    solved: list[tuple[float, float, bool]] = []
    run = highs.HighsModel.run

    def checked_run(model: highs.HighsModel):
        res = run(model)
        if res.ok:
            solved.append((res.objective, _reference_objective(model), model.options is highs.FAST))
        return res

    monkeypatch.setattr(highs.HighsModel, "run", checked_run)
    fast = _run(policy)

    assert fast["finished"] == reference["finished"] == JOBS
    assert sum(f for _, _, f in solved) > 250, "the fast options were not used"  # LAS: 296 (las.lp_key reuses some)
    got, want = np.array([s[0] for s in solved]), np.array([s[1] for s in solved])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert fast["avg_jct_h"] == pytest.approx(reference["avg_jct_h"], rel=0.01)


def test_reference_solves_restores_the_fast_options_also_when_the_block_raises():
    assert highs._mode.value is highs.FAST
    with pytest.raises(RuntimeError), highs.reference_solves():
        assert highs._mode.value is highs.REFERENCE
        raise RuntimeError("a failing run")
    assert highs._mode.value is highs.FAST
