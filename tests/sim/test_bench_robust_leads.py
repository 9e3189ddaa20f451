"""``bench_robust.py --leads N`` (twentieth session): every (trace, policy) at N phases of the daemon's rounds
relative to the arrivals, the row on the figures averaged over them.

One phase (lead 0) flagged chance about as often as a rule (nineteenth session: a trace that loses at one phase wins
at another), so a row now reads the mean of the per-lead avg JCTs; ``--leads 1`` stays what the benchmark was."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from argparse import Namespace
from dataclasses import replace

import pytest

from slurmplan.sim.metrics import summarize
from slurmplan.sim.runner import RunSpec, simulate
from tests.benchmark_modules import BENCHMARKS, load_benchmark

POLICIES = ("slurmplan", "slurm_fifo")
KEYS = ("avg_jct_h", "restarts_per_job", "ftf_max", "makespan_h", "unfinished")


def _bench():
    return load_benchmark("bench_robust")


def _case(bench):
    family = next(f for f in bench.FAMILIES if f.name == "replay-like")
    return family, family.loads[0], family.seeds[0]


def _direct(bench, policy: str, lead: float) -> dict:
    """One run the way the benchmark ran every run before ``--leads``: its trace, its options, ``lead_s`` set."""
    family, load, seed = _case(bench)
    trace = tuple(bench.make_trace(family, load, seed, family.quick_jobs))
    return summarize(simulate(RunSpec(trace, family.cluster, policy, replace(bench.options(), lead_s=lead))))


def test_leads_spread_evenly_over_one_round() -> None:
    bench = _bench()
    assert bench.lead_offsets(1) == (0.0,)
    assert bench.lead_offsets(3) == (0.0, 120.0, 240.0)
    with pytest.raises(SystemExit, match="--leads"):
        bench.lead_offsets(0)


def test_plain_slurm_runs_once_where_every_lead_is_its_phase_and_the_flagship_at_each() -> None:
    """Plain Slurm decides at every 30-s tick, so leads 120 s apart put its decisions at the same places; 72 s
    apart they do not. The flagship's 360-s rounds: every lead within a round is a phase of its own."""
    bench = _bench()
    assert bench.phase_runs("slurm_fifo", (0.0, 120.0, 240.0)) == {0.0: 0.0, 120.0: 0.0, 240.0: 0.0}
    assert set(bench.phase_runs("slurm_fifo", bench.lead_offsets(5)).values()) == set(bench.lead_offsets(5))
    assert bench.phase_runs("slurmplan", (0.0, 120.0, 240.0)) == {0.0: 0.0, 120.0: 120.0, 240.0: 240.0}
    assert bench.runs_once(POLICIES, "slurmplan", (0.0, 120.0, 240.0)) == ["slurm_fifo"]


def test_plain_slurm_decides_the_same_at_leads_of_whole_ticks() -> None:
    """Why plain Slurm may run once: its figures at leads 0 and 120 s are the same (only the empty time before the
    first arrival, its utilization and tick count, differ); the flagship's are not."""
    bench = _bench()
    at_0, at_120 = _direct(bench, "slurm_fifo", 0.0), _direct(bench, "slurm_fifo", 120.0)
    assert [at_0[k] for k in KEYS] == [at_120[k] for k in KEYS]
    assert _direct(bench, "slurmplan", 0.0)["avg_jct_h"] != _direct(bench, "slurmplan", 180.0)["avg_jct_h"]


def test_plain_slurm_is_the_same_at_a_lead_of_whole_ticks_on_a_full_trace() -> None:
    """replay-like 24/h seed 1 (full size): job 1 (4 GPUs, ``--constraint`` v100, the first arrival at 21.6 s)
    ran on v100 at lead 0 and on a100 at lead 120 s: the simulator ticked a round an ulp before the first arrival
    (-98.4 + 4 x 30 is 21.599999999999994 < 21.6) and saw the job at a later tick between rounds, where plain
    Slurm's model starts a job on any free type. Fixed in ``sim.engine.next_event`` (twentieth session): ticks less
    than ``ON_TIME_S`` apart are one."""
    bench = _bench()
    family = next(f for f in bench.FAMILIES if f.name == "replay-like")
    trace = tuple(bench.make_trace(family, 24.0, 1, family.jobs))
    at = [
        summarize(simulate(RunSpec(trace, family.cluster, "slurm_fifo", replace(bench.options(), lead_s=lead))))
        for lead in (0.0, 120.0)
    ]
    assert [at[0][k] for k in KEYS] == [at[1][k] for k in KEYS]


def test_two_leads_average_the_per_lead_runs() -> None:
    """A row over leads 0 and 180 s: each policy's avg JCT is the mean of its two runs' (each run as the benchmark
    would make it alone, with that ``lead_s``); the ratios and flags come from the means; the spread is the
    per-lead ratios'."""
    bench = _bench()
    family, load, seed = _case(bench)
    leads = bench.lead_offsets(2)
    args = Namespace(quick=True, workers=1)
    [summaries] = list(bench.run_cases([(family, load, seed)], POLICIES, args, "slurmplan", leads))
    got = bench.averaged_row(family, load, seed, summaries, leads)
    runs = {p: [_direct(bench, p, lead) for lead in leads] for p in POLICIES}
    mean = {p: statistics.fmean(s["avg_jct_h"] for s in runs[p]) for p in POLICIES}
    assert runs["slurmplan"][0]["avg_jct_h"] != runs["slurmplan"][1]["avg_jct_h"]  # the phase matters here
    assert got["avg_jct_h"] == pytest.approx(mean, rel=1e-12)
    assert got["flagship_h"] == pytest.approx(mean["slurmplan"], rel=1e-12)
    assert got["vs_slurm"] == pytest.approx(mean["slurmplan"] / mean["slurm_fifo"], rel=1e-12)
    restarts = statistics.fmean(s["restarts_per_job"] for s in runs["slurmplan"])
    assert got["restarts_per_job"] == pytest.approx(restarts, rel=1e-12)
    ratios = [runs["slurmplan"][i]["avg_jct_h"] / runs["slurm_fifo"][i]["avg_jct_h"] for i in range(2)]
    assert [r["vs_slurm"] for r in got["per_lead"]] == pytest.approx(ratios, rel=1e-12)
    assert (got["vs_slurm_min"], got["vs_slurm_max"]) == pytest.approx((min(ratios), max(ratios)), rel=1e-12)
    assert [r["lead_s"] for r in got["per_lead"]] == [0.0, 180.0]
    loss = mean["slurmplan"] > mean["slurm_fifo"]
    assert bench.flags(got) == (["LOSS"] if loss else []) + (["RESTARTS"] if restarts >= 2.0 else [])


def test_one_lead_gives_the_rows_the_benchmark_gave_before() -> None:
    """``--leads 1`` (the default) through the command line: the same rows, key for key, as one run per policy
    at lead 0 read by ``row`` (what every earlier session's figures came from), and no keys added."""
    bench = _bench()
    family, load, seed = _case(bench)
    command = [sys.executable, str(BENCHMARKS / "bench_robust.py"), "--quick", "--json", "--workers", "1"]
    command += ["--families", family.name, "--policies", ",".join(POLICIES)]
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)}
    for extra in ([], ["--leads", "1"]):
        out = json.loads(subprocess.run(command + extra, env=env, capture_output=True, check=True, text=True).stdout)
        expected = bench.row(family, load, seed, {p: _direct(bench, p, 0.0) for p in POLICIES})
        assert out["rows"] == [expected]
        assert set(out) == {"rows", "medians", "flagged", "wall_s", "flagship_params"}
