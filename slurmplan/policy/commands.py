"""``slurmplan allocate`` (solve one allocation from a jobs file) and ``slurmplan policies`` (what ships)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from slurmplan.domain import Allocation
from slurmplan.policy.jobs_file import JobsInput, load_jobs, parse_mapping
from slurmplan.policy.registry import list_policies, load_config, load_policy


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "allocate",
        help="solve one allocation X for a list of jobs",
        description="Solve one allocation with a policy and print X (share of time per job and Cell), each "
        "job's effective throughput and the objective.",
    )
    p.add_argument("--jobs", required=True, help="JSON file: a list of jobs with 'throughputs' or 'hints'")
    p.add_argument("--cluster", required=True, help="GPUs per type, e.g. v100:36,p100:36,k80:36")
    p.add_argument("--policy", default="slurmplan", help="a policy name (see 'slurmplan policies') or YAML path")
    p.add_argument("--prices", help="cost per GPU-hour per type for cost policies, e.g. v100:2.48,k80:0.45")
    p.add_argument("--accounts", help="account weights, e.g. research:2,prod:1 (default 1 each)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_allocate)

    q = subparsers.add_parser("policies", help="list the policies that ship", description="List policies.")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=run_policies)


def run_allocate(args: argparse.Namespace) -> int:
    capacity = parse_mapping(args.cluster, "--cluster", int)
    policy = load_policy(args.policy)
    inp = load_jobs(args.jobs, capacity)
    fields = {}
    if args.prices:
        fields["cost_per_gpu_hour"] = parse_mapping(args.prices, "--prices", float)
    if args.accounts:
        fields["account_weights"] = parse_mapping(args.accounts, "--accounts", float)
    problem = dataclasses.replace(inp.problem, **fields) if fields else inp.problem
    inp = JobsInput(problem, inp.names)
    start = time.perf_counter()
    alloc = policy.allocate(problem)
    elapsed = time.perf_counter() - start
    report = allocation_report(inp, alloc, elapsed)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report))
    return 0 if alloc.status != "infeasible" else 1


def allocation_report(inp: JobsInput, alloc: Allocation, seconds: float) -> dict:
    """X, effective throughputs and totals as plain data (the --json output)."""
    eff = alloc.effective_throughput(inp.problem)
    jobs = []
    for j, name in enumerate(inp.names):
        shares = {cell.short(): round(float(v), 6) for cell, v in zip(alloc.cells, alloc.x[j], strict=True) if v > 1e-6}
        jobs.append({"id": name, "shares": shares, "throughput": round(float(eff[j]), 6)})
    used: dict[str, float] = {}
    for c, cell in enumerate(alloc.cells):
        used[cell.gpu_type] = used.get(cell.gpu_type, 0.0) + float(alloc.x[:, c].sum()) * cell.gpus
    objective = alloc.objective if np.isfinite(alloc.objective) else None
    return {
        "policy": alloc.policy,
        "status": alloc.status,
        "objective": objective,
        "solve_seconds": round(seconds, 4),
        "gpus_used": {t: round(used.get(t, 0.0), 4) for t in inp.problem.capacity},
        "capacity": dict(inp.problem.capacity),
        "jobs": jobs,
    }


def format_report(report: dict) -> str:
    lines = [f"policy {report['policy']}: {report['status']}, objective {report['objective']}"]
    width = max([len(j["id"]) for j in report["jobs"]] + [3])
    lines.append(f"{'job':<{width}}  {'throughput':>12}  shares")
    for job in report["jobs"]:
        shares = ", ".join(f"{k} {v:.3f}" for k, v in job["shares"].items()) or "-"
        lines.append(f"{job['id']:<{width}}  {job['throughput']:>12.3f}  {shares}")
    used = ", ".join(f"{t} {u:.2f}/{report['capacity'][t]}" for t, u in report["gpus_used"].items())
    lines.append(f"GPUs used: {used}   (solved in {report['solve_seconds']:.3f} s)")
    return "\n".join(lines) + "\n"


def run_policies(args: argparse.Namespace) -> int:
    configs = [load_config(name) for name in list_policies()]
    if args.json:
        rows = [
            {"name": c.name, "objective": c.objective, "params": dict(c.params), "source": c.source} for c in configs
        ]
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(f"{'NAME':<30} {'OBJECTIVE':<22} DESCRIPTION\n")
    for c in configs:
        sys.stdout.write(f"{c.name:<30} {c.objective:<22} {c.description}\n")
    return 0
