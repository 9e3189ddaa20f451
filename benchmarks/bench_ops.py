"""Operating costs on the local Slurm cluster: a watchdog fail-open pass, a health check, metrics per tick.

Starts its own dev cluster, submits N held managed jobs (begin time in an hour, so a
released job stays pending and can be held again for the next run), and times (medians over --repeat runs):
- ``slurmplan health`` (library call: heartbeat, journal read-only, one Slurm snapshot);
- a watchdog pass with a fresh heartbeat (nothing to do: what the timer costs every minute);
- a watchdog pass with a stale heartbeat that releases all N jobs (then they are held again for the next run);
- ``DaemonMetrics.observe_tick`` + textfile write after a real tick (the daemon's metrics overhead).

    python benchmarks/bench_ops.py [--jobs 40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slurmplan.control.config import DaemonConfig
from slurmplan.control.health import check_health
from slurmplan.control.heartbeat import write_heartbeat
from slurmplan.control.metrics import DaemonMetrics
from slurmplan.control.runner import Daemon
from slurmplan.control.watchdog import watchdog_pass
from slurmplan.policy.registry import load_policy
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devlayout import load_layout


def _median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        root = Path(tmp)
        cluster = DevCluster(load_layout(), root / "cluster")
        cluster.up(timeout=120)
        try:
            env = {**os.environ, **cluster.env}
            script = root / "job.sh"
            script.write_text("#!/bin/bash\nsleep 900\n")
            ids = []
            for _ in range(args.jobs):
                out = subprocess.run(
                    ["sbatch", "--parsable", "--hold", "--begin=now+3600", "--gres=gpu:1",
                     "--comment", "slurmplan:model=gpt2;gpus=1", "-o", "/dev/null", str(script)],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                ids.append(out.stdout.strip().split(";")[0])
            cfg = DaemonConfig(database=root / "journal.db", report_dir=root / "reports", round_s=60.0)
            backend = SlurmBackend(env=cluster.env)
            hb = cfg.heartbeat_path

            def fresh() -> None:
                write_heartbeat(hb, tick_id=1, round_index=1, stale_after_s=cfg.fail_open_limit_s)

            fresh()
            health_ms = _median_ms(lambda: check_health(cfg, backend), args.repeat)
            idle_ms = _median_ms(lambda: watchdog_pass(cfg, backend), args.repeat)
            release = []
            for _ in range(args.repeat):
                write_heartbeat(hb, tick_id=1, round_index=1, stale_after_s=1, now=time.time() - 1000)
                t0 = time.perf_counter()
                report = watchdog_pass(cfg, backend)
                release.append((time.perf_counter() - t0) * 1000)
                assert len(report.released) == args.jobs, report
                subprocess.run(["scontrol", "hold", *ids], env=env, check=True, capture_output=True)
            fresh()
            cfg.fail_open_path.unlink(missing_ok=True)
            metrics = DaemonMetrics()
            daemon = Daemon(cfg, backend=metrics.wrap_backend(backend), policy=metrics.wrap_policy(load_policy("las")))
            report = daemon.tick()
            textfile = root / "slurmplan.prom"

            def observe() -> None:
                metrics.observe_tick(report, cfg)
                metrics.write_textfile(textfile)

            metrics_ms = _median_ms(observe, max(args.repeat, 5))
            subprocess.run(["scancel", *ids], env=env, capture_output=True)
        finally:
            cluster.down()
    print(f"jobs held: {args.jobs}, repeats: {args.repeat} (medians)")
    print(f"health check (incl. one Slurm snapshot):    {health_ms:8.1f} ms")
    print(f"watchdog pass, daemon alive:                {idle_ms:8.1f} ms")
    print(f"watchdog pass, fail-open releasing {args.jobs:4d} jobs: {statistics.median(release):8.1f} ms")
    print(f"metrics observe_tick + textfile per tick:   {metrics_ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
