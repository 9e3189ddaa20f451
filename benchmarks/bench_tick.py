"""Tick wall time on the local Slurm cluster with N managed jobs, split into observe / decide / act.

Starts its own dev cluster (default layout: a100, v100, t4 nodes), submits N held managed jobs of mixed
models and sizes, then runs ticks with ``round_s`` = 1 s so that every tick is a new round (the worst case:
policy solved, mechanism run, actions diffed), then ticks between rounds (confirm, renew, refill). Prints the
median of each phase for both kinds of tick.

    python benchmarks/bench_tick.py [--jobs 200] [--ticks 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from slurmplan.control.config import DaemonConfig
from slurmplan.control.runner import Daemon, TickReport
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devlayout import load_layout

MODELS = ("gpt2", "bert-large", "vit-b", "llama2-7b", "t5-large")


def submit(env: dict[str, str], workdir: Path, n: int) -> None:
    script = workdir / "job.sh"
    script.write_text("#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 900 & wait\n")
    for i in range(n):
        gpus = (1, 1, 2, 4)[i % 4]
        hint = f"slurmplan:model={MODELS[i % len(MODELS)]};gpus={gpus};min={gpus};max={gpus}"
        subprocess.run(
            ["sbatch", "--hold", f"--gres=gpu:{gpus}", "--comment", hint, "-o", "/dev/null", str(script)],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            cwd=workdir,
        )


def run_ticks(daemon: Daemon, n: int, pause: float) -> list[TickReport]:
    reports = []
    for _ in range(n):
        time.sleep(pause)
        r = daemon.tick()
        print(
            f"  tick {r.tick_id}: {r.managed} managed, {len(r.actions)} actions, observe {r.observe_s:.3f} s, "
            f"decide {r.decide_s:.3f} s, act {r.act_s:.3f} s{' SKIPPED ' + r.skipped if r.skipped else ''}",
            flush=True,
        )
        if not r.skipped:
            reports.append(r)
    return reports


def print_medians(what: str, ok: list[TickReport]) -> None:
    if not ok:
        print(f"{what}: no tick ran")
        return
    med = {k: statistics.median(getattr(r, f"{k}_s") for r in ok) for k in ("observe", "decide", "act")}
    total = statistics.median(r.observe_s + r.decide_s + r.act_s for r in ok)
    print(
        f"{what}, median of {len(ok)} with {ok[0].managed} managed jobs: observe {med['observe']:.3f} s, "
        f"decide {med['decide']:.3f} s, act {med['act']:.3f} s, total {total:.3f} s",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--policy", default="las")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tick-"))
    cluster = DevCluster(load_layout(), root / "cluster")
    cluster.up(timeout=120)
    try:
        t0 = time.perf_counter()
        submit(cluster.env, root, args.jobs)
        print(f"submitted {args.jobs} held managed jobs in {time.perf_counter() - t0:.1f} s", flush=True)
        config = DaemonConfig(database=root / "journal.db", report_dir=root / "reports", round_s=1.0,
                              policy=args.policy)  # fmt: skip
        backend = SlurmBackend(env=cluster.env)
        rounds = run_ticks(Daemon(config, backend=backend), args.ticks, pause=1.1)  # past round_s: new rounds
        print_medians("new-round ticks", rounds)
        steady = run_ticks(Daemon(replace(config, round_s=3600.0), backend=backend), args.ticks, pause=0.2)
        print_medians("between-round ticks", steady)
        if not rounds:
            return 1
        return 0
    finally:
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
