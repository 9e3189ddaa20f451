"""Helpers for the simulator's tests: tiny traces whose outcome can be worked out by hand."""

from __future__ import annotations

from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.result import SimResult
from slurmplan.sim.trace import TraceJob
from slurmplan.sim.workload import build_workloads

RESNET = "ResNet-18 (batch size 64)"


def hours_job(table, job_id: int, hours: float, arrival: float = 0.0, gpus: int = 1, **kw) -> TraceJob:
    """A ResNet-18 job that needs ``hours`` on ``gpus`` dedicated V100s."""
    steps = hours * 3600 * table.throughput(RESNET, gpus, "v100")
    return TraceJob(job_id, arrival, gpus, job_type=RESNET, total_steps=steps, **kw)


def make_sim(table, jobs, cluster: str, policy: str, cost: float = 0.0, **opts) -> Simulation:
    spec = parse_cluster(cluster)
    workloads = build_workloads(jobs, spec, table)
    return Simulation(workloads, spec, load_policy(policy), SimOptions(reconfig_cost_s=cost, **opts))


def run(table, jobs, cluster: str, policy: str, cost: float = 0.0, **opts) -> SimResult:
    return make_sim(table, jobs, cluster, policy, cost, **opts).run()


def run_jobs(jobs, cluster: str, policy: str, cost: float = 0.0, **opts) -> SimResult:
    """Run jobs that may be model (hint) jobs: candidates come from the performance model."""
    from slurmplan.perf.gavel_table import load_gavel_table

    spec = parse_cluster(cluster)
    workloads = build_workloads(jobs, spec, load_gavel_table())
    return Simulation(workloads, spec, load_policy(policy), SimOptions(reconfig_cost_s=cost, **opts)).run()
