"""The simulated cluster's per-tick loops written inline give what the plain code gives, on every tick of a real LAS
run: ``SimBackend._progress_running`` (every running job brought up to ``now``) the very same floats as
``_progress`` called per job, and ``_due`` (the next completion) the same time and job as the scan with ``max``."""

from __future__ import annotations

import copy
import math

from slurmplan.domain import JobState
from slurmplan.policy.registry import load_policy
from slurmplan.sim.backend import SimBackend
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.metrics import summarize
from slurmplan.sim.workload import build_workloads

FIELDS = ("work_done", "run_seconds", "gpu_seconds", "last_update")


def _compared(backend: SimBackend, seen: list[int]):
    inline = backend._progress_running

    def checked() -> None:
        plain = {j: copy.copy(job) for j, job in backend.running.items()}
        for job in plain.values():
            backend._progress(job)
        inline()
        for j, job in backend.running.items():
            assert [getattr(job, f) for f in FIELDS] == [getattr(plain[j], f) for f in FIELDS], j
        seen.append(sum(1 for job in backend.running.values() if job.work_done > 0))

    return checked


def _plain_due(backend: SimBackend) -> tuple[float, int | None]:
    """The next completion as ``_due`` computes it, with ``max`` rather than conditionals."""
    best, due_id = math.inf, None
    for job in backend.running.values():
        if job.state is not JobState.RUNNING or job.rate <= 0:
            eta = math.inf
        else:
            eta = max(job.last_update, job.restore_until) + max(0.0, job.work_total - job.work_done) / job.rate
        if due_id is None or eta < best or (eta == best and job.job_id < due_id):
            best, due_id = eta, job.job_id
    return best, due_id


def _run(seed: int) -> Simulation:
    jobs = llm_trace(LlmTraceConfig(num_jobs=80, rate_per_h=13000 / 14 / 24, seed=seed), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    return Simulation(
        build_workloads(jobs, spec, None), spec, load_policy("las"), SimOptions(round_s=300.0, tick_s=30.0)
    )


def test_due_matches_the_plain_scan_on_a_real_run():
    sim = _run(seed=4)
    due = sim.backend._due
    seen: list[tuple[float, int | None]] = []

    def checked() -> tuple[float, object]:
        eta, job = due()
        assert (eta, job.job_id if job is not None else None) == _plain_due(sim.backend)
        seen.append((eta, job.job_id if job is not None else None))
        return eta, job

    sim.backend._due = checked  # type: ignore[method-assign]
    assert summarize(sim.run())["finished"] == 80
    assert len(seen) > 100 and sum(1 for eta, _ in seen if math.isfinite(eta)) > 100


def test_progress_running_matches_progress_per_job_on_a_real_run():
    jobs = llm_trace(LlmTraceConfig(num_jobs=80, rate_per_h=13000 / 14 / 24, seed=3), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    sim = Simulation(
        build_workloads(jobs, spec, None), spec, load_policy("las"), SimOptions(round_s=300.0, tick_s=30.0)
    )
    seen: list[int] = []
    sim.backend._progress_running = _compared(sim.backend, seen)  # type: ignore[method-assign]
    assert summarize(sim.run())["finished"] == 80
    assert len(seen) > 100 and max(seen) > 10  # many ticks, many running jobs with progress compared
