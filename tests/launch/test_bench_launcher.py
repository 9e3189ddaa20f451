"""The launcher benchmark runs on one process too: how a one-GPU machine measures the launcher against DDP."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _bench_launcher():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_launcher.py"
    spec = importlib.util.spec_from_file_location("bench_launcher", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_launcher"] = module  # the spawned/forked workers find the target by its module
    spec.loader.exec_module(module)
    return module


def test_the_step_benchmark_runs_on_one_process():
    # One process used to fail: dist.init skips a one-process group, and DDP refused to start without one.
    ratios = _bench_launcher().bench_steps(procs=1, steps=2, warmup=1)
    assert set(ratios) == {1, 2}
    assert all(r > 0 for r in ratios.values())
