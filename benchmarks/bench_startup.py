"""Start-up time of the ``slurmplan`` command: what every cron-driven tick and every admin's ``--help`` pays.

    python benchmarks/bench_startup.py [--runs 15]

Each command runs ``--runs`` times as a fresh ``python -m slurmplan.cli ...`` process; the median wall time is
printed next to the bare interpreter's (``python -c pass``), which no change to slurmplan can remove. Goals
(issue 18): ``--help`` under 0.3 s, and ``status`` under 0.3 s plus its Slurm calls. ``status`` is timed with a
slurm.conf that does not exist: it imports everything ``status`` needs, parses its arguments and stops at the
file check, before the first Slurm command, so the figure is exactly the part slurmplan adds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS: dict[str, list[str]] = {
    "python -c pass (floor)": ["-c", "pass"],
    "slurmplan --help": ["-m", "slurmplan.cli", "--help"],
    "slurmplan --version": ["-m", "slurmplan.cli", "--version"],
    "slurmplan policies": ["-m", "slurmplan.cli", "policies"],
    "slurmplan status (to its first Slurm call)": ["-m", "slurmplan.cli", "status", "--slurm-conf", "/nonexistent"],
    "slurmplan tick --help": ["-m", "slurmplan.cli", "tick", "--help"],
}
GOALS = {"slurmplan --help": 0.3, "slurmplan status (to its first Slurm call)": 0.3}


def time_command(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of each run. On a shared machine the wall time includes
    waiting for a core; the CPU time is what the command itself costs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per command (default 15)")
    args = parser.parse_args()
    time_command(COMMANDS["slurmplan --help"], 2)  # warm the page cache and .pyc files
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.runs} runs each")
    print(f"{'command':<44} {'wall median s':>13} {'min s':>6} {'cpu median s':>12}  goal (on wall median)")
    for name, argv in COMMANDS.items():
        wall, cpu = time_command(argv, args.runs)
        med = statistics.median(wall)
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"< {goal} s {'met' if med < goal else 'NOT met'}"
        print(f"{name:<44} {med:>13.3f} {min(wall):>6.3f} {statistics.median(cpu):>12.3f}  {verdict}")


if __name__ == "__main__":
    main()
