"""The lower bound on average JCT and the excess over it (issue 17): by hand, and against real simulations."""

from __future__ import annotations

import math

import pytest

from slurmplan.sim.metrics import lower_bound_s, summarize
from slurmplan.sim.result import JobRecord, SimResult

from .simkit import hours_job, run


def _record(job_id: int, arrival: float, fastest: float, finish: float | None) -> JobRecord:
    state = "completed" if finish is not None else "running"
    return JobRecord(job_id, arrival, 1, "a", "best-effort", True, fastest, finish_s=finish, state=state,
                     fastest_s=fastest)  # fmt: skip


def _result(jobs, grid: float) -> SimResult:
    return SimResult("p", "v100:1", 1, 0.0, 360.0, tuple(jobs), (0.0,), (0,), (0,), 10_000.0, start_grid_s=grid)


def test_bound_is_wait_to_the_next_round_plus_the_fastest_run_by_hand():
    jobs = [_record(0, 100.0, 1000.0, 2000.0), _record(1, 500.0, 200.0, 3000.0)]
    # rounds from the first arrival (100 s): job 0 starts at 100 s, job 1 at the boundary 820 s (320 s wait)
    assert lower_bound_s(_result(jobs, 360.0), jobs).tolist() == [1000.0, 520.0]
    assert lower_bound_s(_result(jobs, 0.0), jobs).tolist() == [1000.0, 200.0]
    s = summarize(_result(jobs, 360.0))
    assert math.isclose(s["bound_h"], 760.0 / 3600)
    assert math.isclose(s["excess_h"], (1900.0 + 2500.0) / 2 / 3600 - 760.0 / 3600)


def test_excess_is_nan_while_a_job_is_unfinished():
    jobs = [_record(0, 0.0, 1000.0, 2000.0), _record(1, 0.0, 200.0, None)]
    s = summarize(_result(jobs, 360.0))
    assert math.isnan(s["excess_h"]) and s["bound_h"] > 0


def test_one_job_alone_on_the_fast_type_meets_the_bound_and_a_slow_cluster_does_not(table):
    jobs = [hours_job(table, 0, 2.0, arrival=0.0)]
    fast = summarize(run(table, jobs, "v100:1,k80:1", "las", event_ticks=False, round_s=360.0))
    assert math.isclose(fast["bound_h"], 2.0, rel_tol=1e-6)
    assert abs(fast["excess_h"]) < 0.11  # at most the last round's tail
    slow = summarize(run(table, [hours_job(table, 0, 2.0, arrival=0.0)], "k80:1", "las", event_ticks=False))
    assert slow["bound_h"] > 2.0 and slow["excess_h"] < 0.11  # the bound uses the fastest type *of this cluster*


def test_simulate_prints_bound_and_excess(tmp_path, capsys, table):
    import json

    from slurmplan.cli import main
    from slurmplan.sim.trace import write_trace

    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0 + i, arrival=600.0 * i) for i in range(3)], trace)
    args = ["simulate", "--trace", str(trace), "--cluster", "v100:1,k80:1", "--policy", "slurmplan", "--zero-cost"]
    assert main([*args, "--round-ticks-only", "--round", "360"]) == 0
    head, row = capsys.readouterr().out.strip().splitlines()[-2:]
    assert "bound h" in head and "excess h" in head
    assert main([*args, "--round-ticks-only", "--round", "360", "--json"]) == 0
    (s,) = json.loads(capsys.readouterr().out)
    assert s["bound_h"] > 0 and s["excess_h"] == pytest.approx(s["avg_jct_h"] - s["bound_h"])
    assert f"{s['bound_h']:.2f}" in row and s["excess_h"] >= -1e-9
