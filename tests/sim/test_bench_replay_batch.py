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
