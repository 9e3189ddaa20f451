"""How long ``tick.decide`` takes for 2,000 jobs x 20 Cells on 1,280 GPUs, excluding the policy solve.

The simulator calls ``decide`` thousands of times, so the mechanism (problem building, priorities, greedy round,
placement, action diff) must stay well under a second. The policy here returns a precomputed X (equal shares of
each job's requested Cell), so its cost is not in the figures. Prints medians over a few repetitions.

    python benchmarks/bench_mechanism.py [--jobs 2000] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np

from slurmplan.domain import (
    Allocation,
    AllocationProblem,
    Candidate,
    Cell,
    Cluster,
    Hints,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
)
from slurmplan.tick import ManagedJob, SchedulerState, TickInput, decide

TYPES = ("a100", "a40", "a10", "v100")
COUNTS = (1, 2, 4, 8, 16)


class PrecomputedPolicy:
    """Equal shares of each job's requested Cell, scaled to capacity; cached per problem shape."""

    name = "precomputed"

    def __init__(self) -> None:
        self.cache: dict[tuple[int, ...], np.ndarray] = {}

    def allocate(self, problem: AllocationProblem) -> Allocation:
        key = problem.job_ids
        if key not in self.cache:
            x = np.zeros(problem.throughput.shape)
            x[np.arange(problem.num_jobs), np.asarray(problem.requested)] = 1.0
            demand = (x * problem.gpus_per_cell).sum()
            self.cache[key] = x * min(1.0, sum(problem.capacity.values()) / max(demand, 1.0))
        return Allocation(problem.job_ids, problem.cells, self.cache[key], self.name)


def build(num_jobs: int, seed: int = 0) -> TickInput:
    rng = np.random.default_rng(seed)
    nodes = tuple(
        Node(f"{t}-{i:03d}", NodeState.IDLE, t, 8, cpus=128, memory_mb=1_000_000) for t in TYPES for i in range(40)
    )
    speed = {"a100": 3.0, "a40": 2.0, "a10": 1.2, "v100": 1.5}
    jobs = []
    for j in range(num_jobs):
        base = rng.uniform(5, 50)
        want = int(rng.choice(COUNTS[:4], p=(0.5, 0.2, 0.2, 0.1)))
        cands = tuple(
            Candidate(Cell(t, g), base * speed[t] * g**0.85, Plan(dp=g), cpus=4 * g, host_memory_mb=8000 * g)
            for t in TYPES
            for g in COUNTS
        )
        job = Job(j + 1, gpu_type=TYPES[j % 4], gpus_per_node=want, submit_time=float(j), held=True)
        jobs.append(ManagedJob(job, Hints(gpus=want, steps=int(rng.integers(1000, 100000))), cands))
    return TickInput(1_700_000_000.0, Cluster(nodes), tuple(jobs))


def with_running(inp: TickInput, out) -> TickInput:
    """The input one tick later, with the jobs the round started now running where they were placed."""
    placed = {a.job_id: a for a in out.assignments if a.nodes}
    jobs = []
    used: dict[str, int] = {}
    for mj in inp.jobs:
        a = placed.get(mj.job.job_id)
        if a is None:
            jobs.append(mj)
            continue
        for n in a.nodes:
            used[n] = used.get(n, 0) + a.gpus_per_node
        job = replace(
            mj.job,
            state=JobState.RUNNING,
            gpu_type=a.cell.gpu_type,
            gpus_per_node=a.gpus_per_node,
            node_count=len(a.nodes),
            nodes=a.nodes,
            held=False,
            start_time=inp.now,
        )
        jobs.append(replace(mj, job=job))
    nodes = tuple(replace(n, gpus_used=used.get(n.name, 0)) for n in inp.cluster.nodes)
    return replace(inp, now=inp.now + 60, cluster=Cluster(nodes), jobs=tuple(jobs))


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    policy = PrecomputedPolicy()
    inp = build(args.jobs)
    first = decide(inp, policy, SchedulerState())  # warms the policy cache
    cells = len(first.allocation.cells)
    t_round = timed(lambda: decide(inp, policy, SchedulerState()), args.reps)
    later = with_running(inp, first)
    t_between = timed(lambda: decide(later, policy, first.state), args.reps)
    mid = decide(later, policy, first.state).state
    next_round = replace(later, now=inp.now + 360)
    t_next = timed(lambda: decide(next_round, policy, mid), args.reps)
    running = sum(1 for mj in later.jobs if mj.job.state is JobState.RUNNING)
    print(f"jobs {args.jobs}, cells {cells}, GPUs {sum(n.gpus for n in inp.cluster.nodes)}, running {running}")
    print(f"decide, first round (all pending):      median {t_round:.3f} s")
    print(f"decide, between rounds (replay, refill): median {t_between:.3f} s")
    print(f"decide, next round (running jobs):       median {t_next:.3f} s")


if __name__ == "__main__":
    main()
