"""``benchmarks/tick_kinds.py --fit``: a tick's CPU split into a fixed part and a cost per steady and per other row
(issue 27: how much an incremental tick could save). The fit must give back the costs a set of ticks was made
with, and tell the two kinds of rows apart."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def tk():
    sys.path.insert(0, str(BENCH))
    try:
        import tick_kinds

        yield tick_kinds
    finally:
        sys.path.remove(str(BENCH))


def test_the_fit_gives_back_the_costs_the_ticks_were_made_with(tk) -> None:
    rng = np.random.default_rng(3)
    steady = rng.integers(50, 250, 400).astype(float)
    other = rng.integers(0, 30, 400).astype(float)
    cpu = 0.0005 + 20e-6 * steady + 80e-6 * other + rng.normal(0, 1e-6, 400)
    fixed, per_steady, per_other = tk.fit_rows(cpu, steady, other)
    assert fixed == pytest.approx(0.0005, abs=2e-6)
    assert per_steady == pytest.approx(20e-6, rel=0.01)
    assert per_other == pytest.approx(80e-6, rel=0.01)


def test_the_printed_fit_names_the_steady_rows_share(tk, capsys) -> None:
    ticks = [(0.001 + 10e-6 * s + 50e-6 * o, s, o, {"assign": 8e-6 * s, "apply": 40e-6 * o}) for s, o in
             [(100, 2), (150, 5), (200, 1), (120, 9), (180, 4)]]  # fmt: skip
    tk._print_fit(ticks, total=2 * sum(t[0] for t in ticks))
    out = capsys.readouterr().out
    assert "10.0 us a steady row, 50.0 us another row" in out
    assert "assign" in out and "8.00" in out  # the stage that grows with the steady rows is listed


@pytest.mark.parametrize("site", [False, True])
def test_it_splits_the_run_its_benchmark_times(tk, site: bool) -> None:
    """The split describes the benchmark's own trace: the site's month at its offered load (0.8), not the
    generator's durations (1.87x the cluster), which ``--site`` simulated before and ``--load 0`` still gives."""
    import bench_sim
    import bench_site_history

    scene = bench_site_history.scenario(0.05) if site else bench_sim.scenario(0.05)
    jobs, spec, offered = bench_sim.scenario_trace(scene)
    sim = tk._simulation(0.05, site, scene.policy, None)
    assert sim.options == scene.options and sim.cluster == spec
    assert {w.job_id: w.trace for w in sim.workloads.values()} == {j.job_id: j for j in jobs}
    if site:
        assert offered == pytest.approx(bench_site_history.SITE_LOAD)
        raw = tk._simulation(0.05, site, scene.policy, 0.0)
        assert [w.trace.duration_s for w in raw.arrivals] != [w.trace.duration_s for w in sim.arrivals]
