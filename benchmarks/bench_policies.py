"""Seconds per allocation for the hot policies on a Crius-like cluster (1,280 GPUs: A100, A40, A10, V100).

Each job has 16 Cells (4 types x 1/2/4/8 GPUs) with synthetic plan-aware throughputs, a third of the jobs
running, a fifth guaranteed with an SLA, three accounts (see ``slurmplan.policy.problem.synthetic_problem``).
Prints the median wall-clock and CPU seconds over ``--repeats`` solves (after one warm-up) per policy and job
count; on a shared machine the CPU time is the steadier figure. The goal from the issue: under 1 s at 2,048
jobs for ``slurmplan`` and ``las``.

    python benchmarks/bench_policies.py [--jobs 256 1024 2048] [--policies slurmplan las] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from slurmplan.policy import load_policy
from slurmplan.policy.problem import synthetic_problem, violations


def bench(policy_name: str, num_jobs: int, repeats: int, seed: int = 0) -> tuple[float, float, str, int]:
    policy = load_policy(policy_name)
    problem = synthetic_problem(num_jobs, seed=seed)
    alloc = policy.allocate(problem)  # warm-up (imports, caches)
    bad = violations(problem, alloc)
    if bad:
        raise SystemExit(f"{policy_name} at {num_jobs} jobs broke constraints: {bad}")
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        alloc = policy.allocate(problem)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    nvars = int((problem.throughput > 0).sum())
    return statistics.median(wall), statistics.median(cpu), alloc.status, nvars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--policies", nargs="+", default=["slurmplan", "las"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'policy':<14} {'jobs':>6} {'vars':>7} {'wall s':>8} {'cpu s':>8}  status")
    for name in args.policies:
        for n in args.jobs:
            wall, cpu, status, nvars = bench(name, n, args.repeats)
            print(f"{name:<14} {n:>6} {nvars:>7} {wall:>8.3f} {cpu:>8.3f}  {status}", flush=True)


if __name__ == "__main__":
    main()
