"""``--drop-infeasible``: a site's history always holds a few jobs the cluster cannot run; tables never print
inf or nan."""

from __future__ import annotations

import json
from pathlib import Path

from slurmplan.cli import main
from slurmplan.sim.trace import TraceJob, write_trace

CLUSTER = "v100:1x2"


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "site.jsonl"
    jobs = [
        TraceJob(0, 0.0, 1, model="llama2-70b", duration_s=3600.0),  # 70B on two V100s: no configuration fits
        TraceJob(1, 0.0, 1, model="bert-large", duration_s=1800.0),
        # elastic, so it runs, but never at its own 4 GPUs (a fixed-size job would keep its 4 and be infeasible)
        TraceJob(2, 60.0, 4, model="bert-large", duration_s=1800.0, extra_hints={"min_gpus": 1, "max_gpus": 4}),
        TraceJob(3, 120.0, 1, model="bert-large", duration_s=900.0),
    ]
    write_trace(jobs, trace)
    return trace


def test_without_the_flag_the_trace_is_refused_and_the_error_names_the_flag(tmp_path: Path, capsys):
    args = ["simulate", "--trace", str(_trace(tmp_path)), "--cluster", CLUSTER, "--policy", "las"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "1 of 4 jobs" in err and "jobs 0 (llama2-70b x1)" in err and "--drop-infeasible" in err
    assert not (tmp_path / "out").exists()


def test_the_flag_runs_the_others_and_names_and_counts_the_dropped(tmp_path: Path, capsys):
    args = ["simulate", "--trace", str(_trace(tmp_path)), "--cluster", CLUSTER, "--policy", "las"]
    assert main([*args, "--drop-infeasible", "--json"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == 3 and summary["finished"] == 3
    assert summary["dropped_infeasible"] == 1 and summary["dropped_jobs"] == [0]
    assert main([*args, "--drop-infeasible"]) == 0
    out = capsys.readouterr().out
    assert "dropped 1 jobs that no GPU type of v100:1x2 can run (--drop-infeasible): 0 (llama2-70b x1)" in out
    # job 2 cannot run as submitted (4 GPUs on a 2-GPU cluster): its bound is infinite, printed as n/a
    table = out.splitlines()[:2]
    assert "n/a" in table[1]
    assert all(word not in cell for cell in table[1].split() for word in ("inf", "nan"))


def test_compare_drops_the_same_jobs_for_every_policy(tmp_path: Path, capsys):
    args = ["compare", "--trace", str(_trace(tmp_path)), "--cluster", CLUSTER, "--policies", "las,slurm_fifo"]
    assert main([*args, "--workers", "1", "--drop-infeasible", "--json"]) == 0
    summaries = json.loads(capsys.readouterr().out)
    assert [s["dropped_jobs"] for s in summaries] == [[0], [0]]
    assert [s["jobs"] for s in summaries] == [3, 3]


def test_a_trace_no_job_of_which_fits_is_refused_even_with_the_flag(tmp_path: Path, capsys):
    trace = tmp_path / "none.jsonl"
    write_trace([TraceJob(0, 0.0, 1, model="llama2-70b", duration_s=60.0)], trace)
    args = ["simulate", "--trace", str(trace), "--cluster", CLUSTER, "--policy", "las", "--drop-infeasible"]
    assert main(args) == 1
    assert "1 of 1 jobs" in capsys.readouterr().err
