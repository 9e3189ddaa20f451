"""The launcher benchmark runs on one process too: how a one-GPU machine measures the launcher against DDP."""

from __future__ import annotations

from tests.benchmark_modules import load_benchmark


def _bench_launcher():
    return load_benchmark("bench_launcher")


def test_the_step_benchmark_runs_on_one_process():
    # One process used to fail: dist.init skips a one-process group, and DDP refused to start without one.
    ratios = _bench_launcher().bench_steps(procs=1, steps=2, warmup=1)
    assert set(ratios) == {1, 2}
    assert all(r > 0 for r in ratios.values())
