"""A lower bound on average JCT that counts contention: a time-bucketed fluid LP over the cluster's GPU types.

The elastic bound (sim/metrics.py) gives every job its best configuration the moment it may start, as if it
were alone; on the LLM trace every job's best configuration is on A100s, which cannot all have them. This LP
relaxes only what a schedule must obey in aggregate: per time bucket, the GPU-seconds given on each type are
within that type's GPUs x bucket length; a job progresses no faster than its best configuration, on a type at
no better work per GPU-second than its most efficient configuration of that type, and not before it arrives.
Every job's JCT is then at least its best run time and at least its mean busy date plus half its best run time
minus its arrival (work at rate <= its best rate cannot finish sooner), the mean busy date counted from each
bucket's start (or the arrival), so the LP optimum is a valid lower bound on average JCT for any schedule
(restart costs, gangs and node boundaries are ignored, which only makes it lower).

    python benchmarks/contention_bound.py --trace llm.jsonl --cluster a100:80x4,a40:160x2,a10:160x2,v100:20x16
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.runner import RunSpec, load_jobs
from slurmplan.sim.workload import build_workloads


def buckets(horizon_s: float, fine_s: float, fine_until_s: float, coarse_s: float) -> np.ndarray:
    """Bucket edges: ``fine_s`` wide up to ``fine_until_s``, then ``coarse_s`` up to ``horizon_s``."""
    fine = np.arange(0.0, fine_until_s, fine_s)
    coarse = np.arange(fine_until_s, horizon_s + coarse_s, coarse_s)
    return np.concatenate([fine, coarse])


def contention_bound(trace: str, cluster: str, edges: np.ndarray) -> tuple[float, float, str]:
    """(bound on average JCT in hours, elastic bound in hours, LP status)."""
    spec = parse_cluster(cluster)
    jobs = load_jobs(RunSpec(trace, cluster, "none"))
    work = build_workloads(jobs, spec, None)
    types = sorted(spec.gpus_by_type())
    cap = np.array([spec.gpus_by_type()[t] for t in types], dtype=float)
    nb, nt, nj = len(edges) - 1, len(types), len(jobs)
    start, length = edges[:-1], np.diff(edges)
    rows_eq, cols_eq, vals_eq, rhs_eq = [], [], [], []
    rows_ub, cols_ub, vals_ub = [], [], []
    cost, var = [], 0
    elastic = 0.0
    cap_row = {(t, b): None for t in range(nt) for b in range(nb)}
    for i, job in enumerate(jobs):
        w = work[job.job_id]
        best_rate = max(c.throughput for c in w.candidates)
        eff = [max((c.throughput / c.cell.gpus for c in w.candidates if c.cell.gpu_type == t), default=0.0)
               for t in types]  # fmt: skip
        r = job.arrival_s
        elastic += w.best_s
        busy_key = ("busy", i)  # mean busy date + best/2 - r <= z_i  (z_i: the job's JCT, z_i >= best)
        cap_row[busy_key] = r - w.best_s / 2
        rate_row = {}
        for b in range(nb):
            if edges[b + 1] <= r:
                continue
            usable = edges[b + 1] - max(edges[b], r)
            when = max(start[b], r)
            for t in range(nt):
                if eff[t] <= 0:
                    continue
                # variable: fraction of job i's work done on type t in bucket b
                cost.append(0.0)
                rows_ub.append(busy_key), cols_ub.append(var), vals_ub.append(when)
                rows_eq.append(i), cols_eq.append(var), vals_eq.append(1.0)
                key = ("cap", t, b)
                cap_row.setdefault(key, None)
                rows_ub.append(key), cols_ub.append(var), vals_ub.append(w.work_total / eff[t])  # GPU-seconds
                rows_ub.append(("rate", i, b)), cols_ub.append(var), vals_ub.append(w.work_total)
                rate_row[("rate", i, b)] = best_rate * usable
                var += 1
        rhs_eq.append(1.0)
        rhs_ub_rate = rate_row
        for k, v in rhs_ub_rate.items():
            cap_row[k] = v
    for t in range(nt):
        for b in range(nb):
            cap_row[("cap", t, b)] = cap[t] * length[b]
    z0 = var
    for i in range(nj):  # z_i with cost 1, bounds [best_s, inf)
        rows_ub.append(("busy", i)), cols_ub.append(var), vals_ub.append(-1.0)
        cost.append(1.0)
        var += 1
    lower = np.zeros(var)
    lower[z0:] = [work[j.job_id].best_s for j in jobs]
    keys = [k for k in cap_row if cap_row[k] is not None]
    pos = {k: n for n, k in enumerate(keys)}
    a_ub = coo_matrix((vals_ub, ([pos[k] for k in rows_ub], cols_ub)), shape=(len(keys), var)).tocsr()
    b_ub = np.array([cap_row[k] for k in keys])
    a_eq = coo_matrix((vals_eq, (rows_eq, cols_eq)), shape=(nj, var)).tocsr()
    res = linprog(np.array(cost), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.array(rhs_eq),
                  bounds=np.column_stack([lower, np.full(var, np.inf)]), method="highs")  # fmt: skip
    if res.status != 0:
        return float("nan"), elastic / nj / 3600, res.message
    return res.fun / nj / 3600, elastic / nj / 3600, "optimal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--fine", type=float, default=600.0, help="bucket seconds while jobs arrive")
    parser.add_argument("--coarse", type=float, default=3600.0, help="bucket seconds after that")
    parser.add_argument("--horizon-h", type=float, default=80.0)
    args = parser.parse_args()
    jobs = load_jobs(RunSpec(args.trace, args.cluster, "none"))
    until = max(j.arrival_s for j in jobs) + 2 * 3600
    edges = buckets(args.horizon_h * 3600, args.fine, until, args.coarse)
    t0 = time.perf_counter()
    bound, elastic, status = contention_bound(args.trace, args.cluster, edges)
    print(f"contention bound {bound:.3f} h (elastic bound without waits {elastic:.3f} h), {len(edges) - 1} buckets, "
          f"{status}, {time.perf_counter() - t0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
