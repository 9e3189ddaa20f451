"""The flagship's between-rounds step: GPUs freed since the round go to the waiting jobs that never ran.

Issue 23, twelfth session. Between rounds the mechanism keeps the round's decisions and refills freed GPUs only
from the round's X (``mechanism.engine.replay``): a job that arrived since the round starts on a free GPU
(``engine.with_arrivals``), but a job the round left waiting has no row, so the GPUs a finishing job frees stay
idle until the next round, up to ``round_s`` later. Plain Slurm's scheduler starts the next job at every
completion. On the overloaded single-type cluster of ``bench_robust --unseen`` (``u-replay-single``, 16 A100s, 30
jobs/h of 6-70 min) this idle time, not the stops, was what lost to plain Slurm: forbidding every stop left those
losses as they were (sim/RESULTS.md section 7, twelfth session).

The rule (``fill_freed``): between rounds, every waiting job that has never held GPUs gets a row like an arrival's
(its columns of its requested size, weighted by speed), scaled below the arrivals' rows and by its due time (the
ordering step's ``submit + length_weight x expected remaining``), so that the refill serves the round's queue
order. A job that ran and was stopped waits for the round: its stop was priced there, and the next round decides
where it restarts (letting stopped jobs restart on any freed GPU too measured worse on the heavy-tailed LLM
families). Only the tick's problem is read, so the daemon and the simulator refill alike.
"""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.mechanism.priorities import EPS
from slurmplan.policy.flagship_order import expected_remaining_s, sla_floors

TOP = 0.5
"""The first waiting job's row weight: below an arrival's (1.0), so a job that arrived since the round and found a
free GPU keeps it, as before."""


def freed_rows(
    problem: AllocationProblem, x: np.ndarray, free: np.ndarray, floor_s: float, length_weight: float
) -> np.ndarray:
    """X with a row for each job in ``free`` (not running, not fixed by the round) that has no row and never ran:
    its columns of its requested size (for a guaranteed job those that give its SLA), speed-weighted, times
    ``TOP / (1 + rank / count)`` by due time."""
    if problem.num_jobs == 0 or not problem.cells:
        return x
    rows = np.asarray(free, bool) & (x.sum(axis=1) <= EPS) & (problem.column("attained_time") <= 0)
    if not rows.any():
        return x
    est, _ = expected_remaining_s(problem, floor_s)
    due = problem.column("submit_time") + length_weight * np.minimum(est, 1e12)
    idx = np.flatnonzero(rows)
    idx = idx[np.argsort(due[idx], kind="stable")]
    gpus = np.array([c.gpus for c in problem.cells])
    req = problem.requested if problem.requested is not None else np.full(problem.num_jobs, -1)
    sla = sla_floors(problem)
    out = x.copy()
    for rank, j in enumerate(idx.tolist()):
        row = np.asarray(problem.throughput[j], dtype=float)
        if req[j] >= 0:
            row = np.where(gpus == gpus[req[j]], row, 0.0)
        if sla[j] > 0:  # a guaranteed job starts only where it gets its SLA, as an arrival does
            row = np.where(row >= sla[j] - 1e-9, row, 0.0)
        if row.max(initial=0.0) > 0:
            out[j] = row / row.max() * TOP / (1.0 + rank / idx.size)
    return out
