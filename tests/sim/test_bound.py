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


def _elastic(job_id: int, arrival: float, fastest: float, best: float, finish: float, restarts: int = 0, run=None):
    return JobRecord(job_id, arrival, 2, "a", "best-effort", True, fastest, first_start_s=arrival,
                     finish_s=finish, state="completed", fastest_s=fastest, best_s=best, restarts=restarts,
                     run_s=finish - arrival if run is None else run)  # fmt: skip


def test_elastic_bound_uses_each_jobs_best_size_and_the_fixed_bound_is_unchanged():
    # job 0 runs 1000 s at its own size, 400 s at its best size; job 1 cannot go faster at another size
    jobs = [_elastic(0, 0.0, 1000.0, 400.0, 700.0), _elastic(1, 0.0, 300.0, 300.0, 300.0)]
    s = summarize(_result(jobs, 0.0))
    assert math.isclose(s["bound_h"], 650.0 / 3600)  # the fixed-size bound as before
    assert math.isclose(s["elastic_bound_h"], 350.0 / 3600)
    assert math.isclose(s["excess_h"], -150.0 / 3600)  # this policy beats the fixed-size bound ...
    assert math.isclose(s["elastic_excess_h"], 150.0 / 3600)  # ... but not the elastic one
    assert s["elastic_excess_h"] >= 0


def test_no_elastic_bound_for_fixed_size_jobs():
    jobs = [_record(0, 100.0, 1000.0, 2000.0)]  # best_s unknown (nan): a table job
    s = summarize(_result(jobs, 360.0))
    assert math.isnan(s["elastic_bound_h"]) and math.isnan(s["elastic_excess_h"])
    jobs = [_elastic(0, 0.0, 1000.0, 1000.0, 1500.0)]  # known, no faster size
    assert math.isnan(summarize(_result(jobs, 0.0))["elastic_bound_h"])


def test_excess_parts_sum_to_the_excess():
    # job 0: queued 200 s past its start instant, 2 restarts at 78 s, off GPUs 100 s, ran 900 s (best 400 s)
    jobs = [
        JobRecord(
            0,
            0.0,
            2,
            "a",
            "best-effort",
            True,
            1000.0,
            first_start_s=200.0,
            finish_s=1200.0,
            state="completed",
            fastest_s=1000.0,
            best_s=400.0,
            restarts=2,
            run_s=900.0,
        ),  # fmt: skip
        _elastic(1, 0.0, 300.0, 300.0, 300.0),
    ]
    r = SimResult("p", "a100:4", 4, 78.0, 300.0, tuple(jobs), (0.0,), (0,), (0,), 10_000.0)
    s = summarize(r)
    assert math.isclose(s["lost_queue_h"], 100.0 / 3600)
    assert math.isclose(s["lost_off_h"], 50.0 / 3600)
    assert math.isclose(s["lost_restart_h"], 78.0 / 3600)
    assert math.isclose(s["lost_config_h"], (900.0 - 156.0 - 400.0) / 2 / 3600)
    parts = s["lost_queue_h"] + s["lost_off_h"] + s["lost_restart_h"] + s["lost_config_h"]
    assert math.isclose(parts, s["elastic_excess_h"])


def test_llm_trace_job_has_an_elastic_bound_below_its_fixed_one():
    """An elastic model job's candidates span N/2..2N: its best size beats its own size, so the bounds differ
    (a job that gave no min/max keeps its count, so it is elastic here by its bounds)."""
    from slurmplan.domain import Cluster
    from slurmplan.sim.cluster import parse_cluster
    from slurmplan.sim.trace import TraceJob
    from slurmplan.sim.workload import hint_workload, perf_candidates_fn

    job = TraceJob(
        job_id=0, arrival_s=0.0, gpus=8, gpu_type="v100", model="gpt2-1.5b", duration_s=2564.5,
        extra_hints={"min_gpus": 4, "max_gpus": 16},
    )  # fmt: skip
    cluster = Cluster(parse_cluster("a100:80x4,a40:160x2,v100:20x16").nodes())
    w = hint_workload(job, cluster, perf_candidates_fn())
    assert w.best_s < w.fastest_s <= w.dedicated_s
