"""The CLI end to end on tiny traces, and metrics checked against hand-computed values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.sim.metrics import fairness, summarize, utilization
from slurmplan.sim.report import format_table
from slurmplan.sim.result import JobRecord, SimResult
from slurmplan.sim.trace import write_trace

from .simkit import hours_job


def test_trace_generate_then_simulate_json(tmp_path: Path, capsys):
    trace = tmp_path / "g.jsonl"
    assert main(["trace", "generate", "gavel-single", "--jobs", "6", "--rate", "4", "--out", str(trace)]) == 0
    capsys.readouterr()
    args = ["simulate", "--trace", str(trace), "--cluster", "v100:2,k80:2", "--policy", "las", "--round", "3600"]
    code = main([*args, "--json"])
    assert code == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["policy"] == "las" and summary["jobs"] == 6 and summary["finished"] == 6
    assert summary["avg_jct_h"] > 0 and 0 < summary["utilization"] <= 1


def test_compare_prints_ratios_to_the_first_and_writes_plots(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0, arrival=60.0 * i) for i in range(4)], trace)
    args = ["compare", "--trace", str(trace), "--cluster", "v100:1,k80:1", "--policies", "las,slurm_fifo"]
    code = main([*args, "--workers", "1", "--zero-cost", "--plots", str(tmp_path / "plots"), "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("policy") and "x1st" in lines[0]
    assert lines[1].startswith("las") and lines[1].split()[-1] == "1.00"
    assert lines[2].startswith("slurm_fifo")
    for name in ("jct_cdf.png", "utilization.png", "policies.png", "summary.csv", "jobs_las.csv"):
        assert (tmp_path / "plots" / name).stat().st_size > 0
    assert json.loads((tmp_path / "summary.json").read_text())[1]["policy"] == "slurm_fifo"


def test_bad_trace_line_is_a_clear_cli_error(tmp_path: Path, capsys):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"job_id": 0, "job_type": "A3C", "total_steps": 10}\n{"job_id": 1, "job_type": "A3C"}\n')
    assert main(["simulate", "--trace", str(trace), "--policy", "las"]) == 1
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "total_steps" in err


def _result(jobs, times, busy, active, end, gpus=2) -> SimResult:
    return SimResult("p", "v100:2", gpus, 0.0, 360.0, tuple(jobs), tuple(times), tuple(busy), tuple(active), end)


def test_metrics_by_hand():
    jobs = [
        JobRecord(0, 0.0, 1, "a", "guaranteed", True, 3600.0, 0.0, 3600.0, "completed", deadline_s=4000.0),
        JobRecord(1, 0.0, 1, "a", "best-effort", True, 3600.0, 3600.0, 7200.0, "completed", deadline_s=5000.0),
        JobRecord(2, 100.0, 4, "b", "guaranteed", True, 3600.0, state="pending"),
    ]
    # 1 GPU busy 0-7200 of 2 GPUs, then the run ends at 7200
    res = _result(jobs, [0.0, 7200.0], [1, 0], [3, 1], 7200.0)
    s = summarize(res)
    assert s["avg_jct_h"] == pytest.approx(1.5)
    assert s["median_jct_h"] == pytest.approx(1.5)
    assert s["makespan_h"] == pytest.approx(2.0)
    assert s["avg_queue_h"] == pytest.approx(0.5)
    assert s["utilization"] == pytest.approx(0.5)
    assert s["unfinished"] == 1
    assert s["sla_misses"] == 1  # job 2 never ran; job 0 ran at full speed
    assert s["deadline_misses"] == 1  # job 1 finished at 7200 > 5000
    # 3 active jobs over each life: a 1-GPU job's fair share (2/3 GPU) is below its need, so T_iso = 1.5 h
    rho = fairness(res, jobs[:2])
    assert rho == pytest.approx([1 / 1.5, 2 / 1.5])
    assert utilization(res, 0.0, 3600.0) == pytest.approx(0.5)
    assert "p" in format_table([s, s]) and math.isnan(summarize(_result([], [], [], [], 0.0))["avg_jct_h"])


def test_parallel_compare_equals_sequential_runs_deterministic(table):
    from slurmplan.sim.engine import SimOptions
    from slurmplan.sim.runner import RunSpec, compare

    jobs = tuple(hours_job(table, i, 0.5 + 0.1 * i, arrival=120.0 * i) for i in range(5))
    specs = [RunSpec(jobs, "v100:1,k80:2", p, SimOptions(reconfig_cost_s=78.0)) for p in ("las", "slurm_fifo")]
    parallel = compare(specs, workers=2)
    sequential = compare(specs, workers=1)
    assert [r.policy for r in parallel] == ["las", "slurm_fifo"]
    for a, b in zip(parallel, sequential, strict=True):
        assert a.jobs == b.jobs and a.times == b.times and a.busy_gpus == b.busy_gpus


def test_compare_refuses_an_unknown_policy_before_any_worker(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0) for i in range(2)], trace)
    args = ["compare", "--trace", str(trace), "--cluster", "v100:1", "--policies", "las,bogus", "--workers", "2"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "invalid policy 'bogus'" in err and "las" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_bad_numbers_are_refused_naming_the_option(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, 0, 1.0)], trace)
    assert main(["simulate", "--trace", str(trace), "--policy", "las", "--round", "-5"]) == 1
    assert "invalid --round -5.0: a number of seconds > 0" in capsys.readouterr().err


def test_plots_without_matplotlib_say_which_extra_before_any_work(tmp_path: Path, capsys, table, monkeypatch):
    # Uninstalling matplotlib is not possible inside the test run; a None entry makes ``import matplotlib`` raise
    # ImportError exactly as a missing package does.
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, 0, 1.0)], trace)
    args = ["simulate", "--trace", str(trace), "--policy", "las", "--out", str(tmp_path / "o")]
    assert main([*args, "--plots", str(tmp_path / "p")]) == 1
    assert "pip install 'slurmplan[plots]'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_cluster_no_job_fits_is_refused_naming_the_jobs(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0) for i in range(3)], trace)
    assert main(["simulate", "--trace", str(trace), "--policy", "las", "--cluster", "h100:2x8"]) == 1
    err = capsys.readouterr().err
    assert "invalid --cluster 'h100:2x8'" in err and "3 of 3 jobs" in err and "jobs 0 (" in err


def test_an_output_folder_that_is_a_file_is_refused_before_the_run(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, 0, 1.0)], trace)
    assert main(["simulate", "--trace", str(trace), "--policy", "las", "--out", str(trace)]) == 1
    assert "invalid --out" in capsys.readouterr().err


def test_requeue_delay_flag_reaches_the_simulation_and_is_validated(tmp_path: Path, capsys, table):
    """``--requeue-delay`` models Slurm's cred_expire + 1 wait: jobs that LAS swaps on one GPU type restart later."""
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0, arrival=400.0 * i) for i in range(4)], trace)
    args = ["simulate", "--trace", str(trace), "--cluster", "v100:2", "--policy", "las", "--round", "360", "--json"]
    summaries = {}
    for delay in ("0", "600"):
        assert main([*args, "--requeue-delay", delay]) == 0
        (summaries[delay],) = json.loads(capsys.readouterr().out)
    assert summaries["0"]["restarts_per_job"] > 0  # jobs were moved: the wait applies
    assert summaries["600"]["finished"] == summaries["0"]["finished"] == 4
    assert summaries["600"]["avg_jct_h"] > summaries["0"]["avg_jct_h"]
    assert main([*args, "--requeue-delay", "-1"]) == 1
    err = capsys.readouterr().err
    assert "--requeue-delay" in err and "-1" in err and ">= 0" in err


def test_start_latency_flag_delays_every_start_and_is_validated(tmp_path: Path, capsys, table):
    """``--start-latency`` models Slurm's launch: each of one-at-a-time jobs ends that much later than the last."""
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 1.0, arrival=0.0) for i in range(3)], trace)
    args = ["simulate", "--trace", str(trace), "--cluster", "v100:1", "--policy", "fifo", "--tick", "0", "--json"]
    args += ["--round", "600"]  # a 1 h job plus 600 s ends on a round boundary: the next job starts at once
    summaries = {}
    for latency in ("0", "600"):
        assert main([*args, "--start-latency", latency]) == 0
        (summaries[latency],) = json.loads(capsys.readouterr().out)
    assert summaries["600"]["finished"] == summaries["0"]["finished"] == 3
    # one GPU, three jobs in a row: the k-th ends k latencies later, so the mean moves by 2 x 600 s
    assert summaries["600"]["avg_jct_h"] - summaries["0"]["avg_jct_h"] == pytest.approx(1200 / 3600, abs=0.02)
    assert main([*args, "--start-latency", "-1"]) == 1
    err = capsys.readouterr().err
    assert "--start-latency" in err and "-1" in err and ">= 0" in err
