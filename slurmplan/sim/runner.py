"""Running simulations by name: one policy (``simulate``) or several in parallel processes (``compare``).

The CLI, the benchmark and the closing-note experiments all go through here, so they share one way of turning
(trace, cluster, policy name) into a SimResult. Arguments are plain values so that each policy's run can be sent
to a worker process; the trace is re-read there (cheap) rather than pickled with its candidates.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from slurmplan.perf.gavel_table import load_gavel_table
from slurmplan.policy.base import Policy
from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.result import SimResult
from slurmplan.sim.trace import TraceJob, read_trace
from slurmplan.sim.workload import build_workloads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs, as plain values (picklable)."""

    trace: str | tuple[TraceJob, ...]
    cluster: str
    policy: str
    options: SimOptions = field(default_factory=SimOptions)
    throughputs: str | None = None
    max_jobs: int | None = None


def load_jobs(spec: RunSpec) -> tuple[TraceJob, ...]:
    jobs = read_trace(spec.trace) if isinstance(spec.trace, str | Path) else tuple(spec.trace)
    return jobs[: spec.max_jobs] if spec.max_jobs else jobs


def simulate(spec: RunSpec) -> SimResult:
    """Run one policy over one trace; the policy comes from the policy room's registry."""
    from slurmplan.policy.registry import load_policy

    cluster = parse_cluster(spec.cluster)
    jobs = load_jobs(spec)
    table = load_gavel_table(spec.throughputs) if any(j.is_table_job for j in jobs) else None
    workloads = build_workloads(jobs, cluster, table)
    policy = load_policy(spec.policy)
    log.info("simulating %d jobs on %s with %s", len(jobs), cluster, spec.policy)
    result = Simulation(workloads, cluster, policy, on_events(policy, spec.options)).run()
    # name the result after what the user asked for, so tables line up with --policies
    return replace(result, policy=spec.policy)


def on_events(policy: Policy, options: SimOptions) -> SimOptions:
    """``options`` with every tick a round for a policy that models plain Slurm (``Policy.decides_on_events``).

    With the daemon's 360 s rounds the model of plain Slurm was wrong both ways: a job that found no free GPU on
    arrival waited for the next round although Slurm starts it when GPUs free, and one that arrived between rounds
    started on any free GPU type of its size although Slurm keeps it to its ``--constraint``. On the two traces
    replayed on real Slurm it predicted 0.81 h and 0.47 h where plain Slurm measured 0.99 h and 0.59 h; deciding
    at every tick it predicts 1.00 h and 0.60 h (``slurmplan/sim/RESULTS.md`` section 7, tenth session)."""
    if not policy.decides_on_events or options.tick_s <= 0 or not options.event_ticks:
        return options  # Gavel's rules (round ticks only) keep every policy to its rounds
    return replace(options, round_s=options.tick_s)


def compare(specs: Sequence[RunSpec], workers: int | None = None) -> list[SimResult]:
    """Run several specs, in parallel processes when more than one core is allowed; results in input order."""
    workers = workers or min(len(specs), os.cpu_count() or 1)
    if workers <= 1 or len(specs) == 1:
        return [simulate(s) for s in specs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(simulate, specs))
