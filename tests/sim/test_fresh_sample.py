"""``benchmarks/fresh_sample.py``: many fresh replay-like traces, the flagship averaged over the rounds' phases
against plain Slurm (issue 23, twentieth session)."""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fresh_sample  # noqa: E402
from phase_spread import spread  # noqa: E402

from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace  # noqa: E402
from slurmplan.sim.trace import write_trace  # noqa: E402


def test_leads_spread_over_one_round() -> None:
    assert fresh_sample.leads(1) == [0.0]
    assert fresh_sample.leads(4) == [0.0, 90.0, 180.0, 270.0]


def test_a_row_is_the_mean_over_the_phases_of_the_replays_own_prediction() -> None:
    """Recomputed here from ``phase_spread.spread`` on the same generated trace: the row's flagship figure is the
    mean of the per-phase runs, plain Slurm runs at phase 0, and the ratios follow."""
    row = fresh_sample.seed_row(1000, 2)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.jsonl"
        write_trace(replay_like_trace(ReplayTraceConfig(num_jobs=28, seed=1000)), trace)
        plain = spread(trace, "slurm_fifo", [0.0], Path(tmp))[0][0]
        ours = [o[0] for o in spread(trace, "slurmplan", [0.0, 180.0], Path(tmp))]
    assert row["plain_h"] == pytest.approx(plain)
    assert row["flagship_by_lead_h"] == pytest.approx(ours)
    assert row["flagship_h"] == pytest.approx(statistics.mean(ours))
    assert row["ratio"] == pytest.approx(statistics.mean(ours) / plain)
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]


def test_the_summary_counts_losses_on_the_mean_and_at_any_phase() -> None:
    rows = [
        {"seed": 1, "ratio": 0.8, "ratio_max": 0.9, "restarts_per_job": 0.5},
        {"seed": 2, "ratio": 0.95, "ratio_max": 1.05, "restarts_per_job": 2.0},
        {"seed": 3, "ratio": 1.04, "ratio_max": 1.10, "restarts_per_job": 0.3},
    ]
    s = fresh_sample.summary(rows)
    assert s["traces"] == 3 and s["median"] == pytest.approx(0.95)
    assert s["losses"] == [3] and s["losses_any_phase"] == 2
    assert s["restart_flags"] == [2]
    assert (s["best"], s["worst"]) == (0.8, 1.04)


def test_bad_seeds_and_leads_name_the_option() -> None:
    assert fresh_sample.parse_seeds("5:8") == [5, 6, 7]
    assert fresh_sample.parse_seeds("3,9") == [3, 9]
    with pytest.raises(SystemExit, match="--seeds"):
        fresh_sample.parse_seeds("8:5")
    with pytest.raises(SystemExit, match="--leads"):
        fresh_sample.main(["--seeds", "1000", "--leads", "0"])


def test_the_command_runs_a_candidate_and_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    out = fresh_sample.main(["--seeds", "1001", "--leads", "1", "--workers", "1", "--flagship-params", "{}"])
    printed = capsys.readouterr().out
    assert "seed 1001:" in printed and "1 traces: flagship / plain Slurm median" in printed
    assert out["summary"]["traces"] == 1 and out["flagship_params"] == "{}"


def test_the_rate_reaches_the_trace_and_a_bad_one_is_refused() -> None:
    busy = fresh_sample.seed_row(1002, 1, rate_per_h=60.0)
    calm = fresh_sample.seed_row(1002, 1)
    assert busy["plain_h"] > calm["plain_h"]  # the same jobs arriving three times as fast wait longer
    with pytest.raises(SystemExit, match="--rate"):
        fresh_sample.main(["--seeds", "1000", "--rate", "0"])
