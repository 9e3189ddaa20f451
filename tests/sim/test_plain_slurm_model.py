"""Plain Slurm's model decides at every tick, not in the daemon's rounds, in every simulation of ``slurm_fifo``.

Slurm's main scheduler runs at every submission and completion: a job that finds no free GPU on arrival starts
when one frees, and only on its requested type (``--constraint``). The replay's prediction had this rule alone;
``compare`` and ``bench_robust`` kept plain Slurm to 360 s rounds, a model that was wrong both ways."""

from __future__ import annotations

import dataclasses

from slurmplan.policy.registry import load_policy
from slurmplan.sim.engine import SimOptions
from slurmplan.sim.runner import RunSpec, on_events, simulate
from slurmplan.sim.trace import TraceJob

OPTIONS = SimOptions(round_s=360.0, tick_s=30.0, reconfig_cost_s=0.0, requeue_delay_s=0.0, start_latency_s=0.0)


def _jobs() -> tuple[TraceJob, ...]:
    return (
        TraceJob(1, 0.0, 1, model="bert-large", gpu_type="a100", duration_s=600.0),
        TraceJob(2, 30.0, 1, model="bert-large", gpu_type="a100", duration_s=600.0),  # waits for job 1's GPU
        TraceJob(3, 40.0, 1, model="bert-large", gpu_type="t4", duration_s=600.0),  # asks for the slow type
    )


def test_a_waiting_job_starts_when_a_gpu_frees_and_only_on_its_requested_type() -> None:
    result = simulate(RunSpec(_jobs(), "a100:1x1,t4:1x1", "slurm_fifo", OPTIONS))
    assert result.round_s == OPTIONS.tick_s
    starts = {j.job_id: j.first_start_s - j.arrival_s for j in result.jobs}
    finish_1 = next(j.finish_s for j in result.jobs if j.job_id == 1)
    # job 2 starts at the first tick after job 1 ends (in 360 s rounds it waited for the round after)
    assert next(j.first_start_s for j in result.jobs if j.job_id == 2) <= finish_1 + OPTIONS.tick_s
    assert starts[3] <= OPTIONS.tick_s  # the free T4 it asked for
    rounds = simulate(RunSpec(_jobs(), "a100:1x1,t4:1x1", "fifo", OPTIONS))  # Gavel's FIFO keeps its rounds
    assert rounds.round_s == OPTIONS.round_s


def test_only_plain_slurm_and_only_with_event_ticks() -> None:
    assert on_events(load_policy("slurm_fifo"), OPTIONS).round_s == 30.0
    for name in ("fifo", "las", "slurmplan", "crius"):
        assert on_events(load_policy(name), OPTIONS) is OPTIONS
    gavel_rules = dataclasses.replace(OPTIONS, event_ticks=False)  # --round-ticks-only: every policy in rounds
    assert on_events(load_policy("slurm_fifo"), gavel_rules) is gavel_rules
