"""Start-up time of ``slurmplan devcluster up --accounting`` (MariaDB, slurmdbd, accounts, Slurm) and of plain ``up``.

    python benchmarks/bench_devcluster_accounting.py [--runs 3]

Each run starts a cluster in a fresh state directory (so MariaDB's data directory is created, slurmdbd creates
its tables and sacctmgr creates the default layout's accounts: the cost a test session or a new user pays),
times ``up`` until every node is idle and every account is known to slurmctld, then stops it. Goal (issue 26):
``up --accounting`` under 30 s on the 2-core machine, median of 3. Plain ``up`` is measured alongside for scale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 30.0


def one_run(accounting: bool) -> float:
    state = Path(tempfile.mkdtemp(prefix="bench-acct-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "slurmplan.cli", "devcluster"]
    extra = ["--accounting"] if accounting else []
    try:
        start = time.perf_counter()
        proc = subprocess.run([*cli, "up", *extra, "--state-dir", str(state)], env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"up failed: {proc.stderr.strip()}")
        return took
    finally:
        subprocess.run([*cli, "down", "--state-dir", str(state)], env=env, capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh starts per variant (default 3)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.runs} runs each")
    for name, accounting in (("up (plain)", False), ("up --accounting", True)):
        times = [one_run(accounting) for _ in range(args.runs)]
        med = statistics.median(times)
        goal = f"goal < {GOAL_S:g} s: {'met' if med < GOAL_S else 'NOT met'}" if accounting else ""
        print(f"{name:<18} median {med:6.1f} s  (runs: {', '.join(f'{t:.1f}' for t in times)})  {goal}")


if __name__ == "__main__":
    main()
