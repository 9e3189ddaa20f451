"""``benchmarks/bench_replay_batch.py``: many fresh replay-like traces, each predicted as ``slurmplan replay``
predicts it (issue 23, sixteenth session). Its figures stand for the replays only if its traces and predictions are
the replay's own: the trace byte for byte as ``slurmplan trace generate replay-like`` writes it, and the prediction
``replay.harness.predict`` gives for that file with the default ``cred_expire``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmplan.cli import main as cli
from slurmplan.replay.harness import ReplayConfig, predict
from slurmplan.sim.metrics import summarize
from slurmplan.slurm.replay_ops import auth_cred_expire_s
from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def batch():
    return load_benchmark("bench_replay_batch")


def test_a_seed_is_the_replays_trace_and_prediction(batch, tmp_path: Path) -> None:
    cli(["trace", "generate", "replay-like", "--jobs", "28", "--seed", "1024", "--out", str(tmp_path / "cli.jsonl")])
    row = batch.predicted(1024, {"plain": "slurm_fifo", "preset": "slurmplan"}, str(tmp_path))
    ours = tmp_path / "replay-like-1024.jsonl"
    assert ours.read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    conf = {"ClusterName": "x"}  # no AuthInfo: Slurm's default cred_expire, as the replays ran
    for name, policy in (("plain", "slurm_fifo"), ("preset", "slurmplan")):
        cfg = ReplayConfig(trace=tmp_path / "cli.jsonl", policy=policy, out_dir=tmp_path)
        s = summarize(predict(cfg, "a100:2x4,v100:2x4,t4:2x2", (auth_cred_expire_s(conf) + 1.0) * cfg.speedup))
        assert row[name]["avg_jct_h"] == s["avg_jct_h"]
        assert row[name]["restarts_per_job"] == s["restarts_per_job"]


def test_the_summary_counts_each_loss_to_plain_slurm(batch, capsys) -> None:
    batch.main(["--seeds", "1023:1026", "--workers", "1", "--json", "--flagship-params", '{"protect_pushed": false}'])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    rows, summary = lines[:-1], lines[-1]["summary"]
    assert [r["seed"] for r in rows] == [1023, 1024, 1025]
    assert set(summary) == {"preset", 'candidate {"protect_pushed": false}'}
    for name, s in summary.items():
        ratios = {r["seed"]: r[name]["avg_jct_h"] / r["plain"]["avg_jct_h"] for r in rows}
        assert {int(k) for k in s["losses"]} == {k for k, v in ratios.items() if v > 1.0}
        assert s["worst_ratio"] == max(ratios.values()) and s["traces"] == 3


def test_bad_seeds_and_params_are_refused_by_name(batch) -> None:
    with pytest.raises(SystemExit, match="--seeds"):
        batch.main(["--seeds", "20:10"])
    with pytest.raises(SystemExit, match="--flagship-params"):
        batch.main(["--seeds", "1:2", "--flagship-params", '{"no_such_param": 1}'])


def test_over_the_rounds_phase_a_flagship_is_the_mean_and_plain_slurm_runs_once(batch, tmp_path: Path) -> None:
    """``--leads`` (twentieth session): each flagship's figure is the mean of its predictions with the daemon started
    0 and 180 s before the first arrival, recomputed here with ``predict``; plain Slurm's is its lead-0 run."""
    assert batch.lead_offsets(1) == (0.0,) and batch.lead_offsets(4) == (0.0, 90.0, 180.0, 270.0)
    row = batch.predicted(1000, {"plain": "slurm_fifo", "preset": "slurmplan"}, str(tmp_path), batch.lead_offsets(2))
    trace = tmp_path / "replay-like-1000.jsonl"
    delay = (auth_cred_expire_s(None) + 1.0) * 30.0
    each = [
        summarize(predict(ReplayConfig(trace=trace, policy="slurmplan", out_dir=tmp_path), batch.DEV_CLUSTER, delay,
                          lead_s=lead))["avg_jct_h"]
        for lead in (0.0, 180.0)
    ]  # fmt: skip
    assert row["preset"]["by_lead_h"] == each
    assert row["preset"]["avg_jct_h"] == pytest.approx(sum(each) / 2)
    plain = summarize(
        predict(ReplayConfig(trace=trace, policy="slurm_fifo", out_dir=tmp_path), batch.DEV_CLUSTER, delay)
    )
    assert row["plain"] == {"avg_jct_h": plain["avg_jct_h"], "restarts_per_job": plain["restarts_per_job"]}
    s = batch.summary([row], ["preset"])["preset"]
    assert s["losses_at_one_phase_or_more"] == int(max(each) > plain["avg_jct_h"])


def test_the_rate_reaches_the_trace_and_bad_leads_or_rates_are_refused(batch, tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "calm").mkdir()
    busy = batch.predicted(1002, {"plain": "slurm_fifo"}, str(tmp_path / "busy"), rate_per_h=60.0)
    calm = batch.predicted(1002, {"plain": "slurm_fifo"}, str(tmp_path / "calm"))
    assert busy["plain"]["avg_jct_h"] > calm["plain"]["avg_jct_h"]  # the same jobs three times as fast wait longer
    with pytest.raises(SystemExit, match="--leads"):
        batch.main(["--seeds", "1:2", "--leads", "0"])
    with pytest.raises(SystemExit, match="--rate"):
        batch.main(["--seeds", "1:2", "--rate", "0"])
