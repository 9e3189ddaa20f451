"""The simulator's speed work (issue 27) changes no decision beyond ties: avg JCT within 1% of the figure the
engine gave before it, on a short version of ``benchmarks/bench_sim.py``'s trace (same generator, rate, cluster,
round and tick; 150 jobs so that the test takes seconds).

The reference was first measured on the code before the speed work (commit 20b458d: 1.8222 h). Merging main at
fb6b2c8 (issue 23's mechanism: arrivals start at once, moves priced over the remaining time) moved it to
3.1833 h, the same with and without this issue's memos and on main itself; it was re-measured then. Issue 28's
refit of the performance model to the published dataset (GEMM waves per SM, Gavel's batch-256 rows kept
unfitted) moved it to 3.0655 h (-3.7 %), re-measured with this trace. If a policy change elsewhere moves it on
purpose, re-measure it with this test's own trace and say so in the commit.
"""

from __future__ import annotations

import pytest

from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.metrics import summarize
from slurmplan.sim.workload import build_workloads

REFERENCE_AVG_JCT_H = {"las": 3.065467595575989}


@pytest.mark.parametrize("policy", sorted(REFERENCE_AVG_JCT_H))
def test_bench_sim_trace_keeps_its_avg_jct_within_one_percent(policy: str):
    jobs = llm_trace(LlmTraceConfig(num_jobs=150, rate_per_h=13000 / 14 / 24, seed=0), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    result = Simulation(build_workloads(jobs, spec, None), spec, load_policy(policy), options).run()
    summary = summarize(result)
    assert summary["finished"] == 150
    assert summary["avg_jct_h"] == pytest.approx(REFERENCE_AVG_JCT_H[policy], rel=0.01)


def test_a_run_gives_the_garbage_collector_back_as_it_found_it(table):
    """A run freezes the objects it starts with and collects less often (``engine._fewer_collections``); after it
    the thresholds are the caller's again, and nothing stays frozen, also when the run fails."""
    import gc

    from .simkit import hours_job, make_sim

    before = gc.get_threshold()
    sim = make_sim(table, [hours_job(table, i, 0.2, arrival=100.0 * i) for i in range(3)], "v100:2", "las")
    seen: list[tuple] = []
    step = sim.step

    def watched_step():
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return step()

    sim.step = watched_step
    assert summarize(sim.run())["finished"] == 3
    assert seen and all(th[0] >= 20_000 and frozen for th, frozen in seen)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    def broken_step():
        raise RuntimeError("a failing tick")

    failing = make_sim(table, [hours_job(table, 0, 0.2)], "v100:2", "las")
    failing.step = broken_step
    with pytest.raises(RuntimeError):
        failing.run()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
