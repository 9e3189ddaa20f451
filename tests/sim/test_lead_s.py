"""``SimOptions.lead_s``: the simulated daemon starts before the first arrival, so the rounds' phase can be moved
(issue 23, nineteenth session, ``benchmarks/phase_spread.py``)."""

from __future__ import annotations

from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import TraceJob
from slurmplan.sim.workload import build_workloads

JOBS = (
    TraceJob(1, 50.9, 1, model="gpt2", gpu_type="a100", duration_s=600.0),
    TraceJob(2, 150.4, 1, model="gpt2", gpu_type="a100", duration_s=600.0),
)


def test_a_start_before_the_first_arrival_ends_and_keeps_the_arrivals() -> None:
    """Fails before the fix: with the daemon 330 s early on a 30-s grid, the grid point for the arrival at 50.9 s
    fell a rounding error below it (-279.1 + 11 x 30), so the simulation ticked there forever."""
    for policy in ("slurm_fifo", "slurmplan"):
        for lead in (0.0, 60.0, 330.0):
            options = SimOptions(round_s=360.0, tick_s=30.0, lead_s=lead, max_time_s=100_000.0)
            result = simulate(RunSpec(JOBS, "a100:1x2", policy, options))
            assert all(j.state == "completed" for j in result.jobs)
            assert all(j.first_start_s >= j.arrival_s for j in result.jobs)


def test_the_first_round_is_lead_s_before_the_first_arrival() -> None:
    """With lead_s the first round is empty and the arrival waits for no round: it is seen at the next tick."""
    result = simulate(RunSpec(JOBS[:1], "a100:1x2", "slurmplan", SimOptions(round_s=360.0, tick_s=30.0, lead_s=100.0)))
    (job,) = result.jobs
    assert job.first_start_s < 50.9 + 30.0 + 1e-6
    assert result.rounds >= 2  # the empty first round, then the arrival's decisions at a later round


def test_a_grid_tick_is_never_before_its_event() -> None:
    """``_on_grid`` (the daemon's next tick at or after an event) on a grid from -279.1 s: 11 steps of 30 s land a
    rounding error below 50.9; the tick must not be before the event (it was, and the run never ended)."""
    cluster = parse_cluster("a100:1x2")
    sim = Simulation(build_workloads(JOBS, cluster, None), cluster, load_policy("slurm_fifo"), SimOptions(tick_s=30.0))
    sim._origin = 50.9 - 330.0
    assert -279.1 + 11 * 30.0 < 50.9  # the rounding this guards against
    assert sim._on_grid(50.9) >= 50.9
    assert sim._on_grid(51.0) == sim._origin + 12 * 30.0


def test_an_arrival_an_ulp_after_the_rounds_grid_is_seen_at_that_round() -> None:
    """Plain Slurm's model decides at every 30-s tick. With the daemon 120 s early its rounds' grid, a sum of round
    lengths from -98.4 s, reaches 21.599999999999994, an ulp before the arrival at 21.6 s. Before the fix the
    simulator ticked a round there and the arrival at a tick of its own an ulp later, between rounds, where a job
    starts on any free type of its size: this v100-constrained job ran on the a100s (twentieth session, found by
    ``bench_robust --leads``)."""
    jobs = (TraceJob(1, 21.6, 4, model="gpt2", gpu_type="v100", duration_s=600.0),)
    for lead in (0.0, 120.0, 240.0):
        options = SimOptions(tick_s=30.0, lead_s=lead, max_time_s=100_000.0)
        result = simulate(RunSpec(jobs, "a100:1x4,v100:1x4", "slurm_fifo", options))
        (job,) = result.jobs
        assert [c[1] for c in job.configs] == ["v100"], lead
