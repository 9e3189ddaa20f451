"""A job's first size must not depend on whether it arrived at a round or just after one (issue 23, nineteenth
session): ``arrival_round`` (``mechanism.engine.arrival_round``; default off, in the preset since the twentieth
session: RESULTS.md section 7). ``arrival_size`` was tried too (tag ``tried-i23-arrival-size``)."""

from __future__ import annotations

from pathlib import Path

from slurmplan.sim.engine import SimOptions
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import TraceJob
from tests.mechanism.helpers import preset_with

OPTIONS = SimOptions(round_s=360.0, tick_s=30.0, reconfig_cost_s=78.0, requeue_delay_s=121.0, start_latency_s=3.5)
ELASTIC = {"min_gpus": 1, "max_gpus": 4}


def _first_size(policy: str, lead_s: float) -> tuple[str, int]:
    """The first (type, GPUs) of an elastic 1-4 GPU job alone on four A100s, the daemon started ``lead_s`` before
    it arrives (0: its arrival opens round 1; 60: round 1 had no job, it arrives between rounds)."""
    jobs = (TraceJob(1, 100.0, 1, model="gpt2", gpu_type="a100", duration_s=1800.0, extra_hints=ELASTIC),)
    result = simulate(RunSpec(jobs, "a100:1x4", policy, SimOptions(**{**OPTIONS.__dict__, "lead_s": lead_s})))
    (job,) = result.jobs
    assert job.state == "completed" and job.configs
    _, gpu_type, gpus = job.configs[0]
    return gpu_type, gpus


def test_a_job_arriving_just_after_a_round_gets_the_size_it_gets_at_a_round(tmp_path: Path) -> None:
    """Fails without the rule: at a round the flagship grows the lone elastic job beyond its requested 1 GPU;
    arriving 60 s after an empty round it started on 1 GPU and was never grown (growing was priced over the
    seconds it had run)."""
    off = preset_with(tmp_path, arrival_round=False)
    at_round, after = _first_size(off, 0.0), _first_size(off, 60.0)
    assert at_round[1] > 1 and after == ("a100", 1)  # the phase decides the size without the rule
    on = preset_with(tmp_path, arrival_round=True)
    assert _first_size(on, 60.0) == _first_size(on, 0.0) == at_round
    assert _first_size(on, 200.0) == at_round  # later in the round too


def test_no_extra_round_while_a_job_that_came_before_waits(tmp_path: Path) -> None:
    """A job that came first and waits may want the free GPUs: the arrival behind it opens no round, and starts
    between rounds at its requested size as without the rule. Job 1 (2 GPUs) runs, job 2 (4 GPUs) waits for them,
    job 3 (elastic, 1 requested) arrives with two A100s free: its first start is the same with the rule as without
    (a round would size it as at a round: on both free GPUs)."""
    jobs = (
        TraceJob(1, 100.0, 2, model="gpt2", gpu_type="a100", duration_s=1800.0),
        TraceJob(2, 110.0, 4, model="gpt2", gpu_type="a100", duration_s=900.0),  # waits for job 1's GPUs
        TraceJob(3, 200.0, 1, model="gpt2", gpu_type="a100", duration_s=1800.0, extra_hints=ELASTIC),
    )
    got = {}
    policies = (("off", preset_with(tmp_path, arrival_round=False)), ("on", preset_with(tmp_path, arrival_round=True)))
    for name, policy in policies:
        result = simulate(RunSpec(jobs, "a100:1x4", policy, SimOptions(**{**OPTIONS.__dict__, "lead_s": 60.0})))
        got[name] = {j.job_id: (j.first_start_s, j.configs[0]) for j in result.jobs}
    assert got["off"][3][0] < 400.0  # it started between rounds (the next round is at 400 s)
    assert got["on"][3] == got["off"][3]
