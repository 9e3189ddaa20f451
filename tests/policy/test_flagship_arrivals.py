"""A job's first size must not depend on whether it arrived at a round or just after one (issue 23, nineteenth
session): ``arrival_round`` (``mechanism.engine.arrival_round``) and ``arrival_size`` (``flagship_arrivals.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy.flagship_arrivals import SIZED, lone_arrivals, never_ran, sized_rows
from slurmplan.policy.registry import policy_dirs
from slurmplan.sim.engine import SimOptions
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import TraceJob

OPTIONS = SimOptions(round_s=360.0, tick_s=30.0, reconfig_cost_s=78.0, requeue_delay_s=121.0, start_latency_s=3.5)
ELASTIC = {"min_gpus": 1, "max_gpus": 4}


def _policy(tmp_path: Path, **params: object) -> str:
    """The shipped preset with ``params`` set on top (every other value as shipped)."""
    text = next(d / "slurmplan.yaml" for d in policy_dirs() if (d / "slurmplan.yaml").is_file()).read_text()
    preset = yaml.safe_load(text)
    preset["params"] = {**preset["params"], **params}
    path = tmp_path / f"slurmplan-{'-'.join(sorted(params)) or 'preset'}.yaml"
    path.write_text(yaml.safe_dump(preset))
    return str(path)


def _first_size(policy: str, lead_s: float) -> tuple[str, int]:
    """The first (type, GPUs) of an elastic 1-4 GPU job alone on four A100s, the daemon started ``lead_s`` before
    it arrives (0: its arrival opens round 1; 60: round 1 had no job, it arrives between rounds)."""
    jobs = (TraceJob(1, 100.0, 1, model="gpt2", gpu_type="a100", duration_s=1800.0, extra_hints=ELASTIC),)
    result = simulate(RunSpec(jobs, "a100:1x4", policy, SimOptions(**{**OPTIONS.__dict__, "lead_s": lead_s})))
    (job,) = result.jobs
    assert job.state == "completed" and job.configs
    _, gpu_type, gpus = job.configs[0]
    return gpu_type, gpus


@pytest.mark.parametrize("params", [{"arrival_round": True}, {"arrival_size": True}])
def test_a_job_arriving_just_after_a_round_gets_the_size_it_gets_at_a_round(tmp_path: Path, params: dict) -> None:
    """Fails without the rule: at a round the flagship grows the lone elastic job beyond its requested 1 GPU;
    arriving 60 s after an empty round it started on 1 GPU and was never grown (growing was priced over the
    seconds it had run)."""
    off = _policy(tmp_path)
    at_round, after = _first_size(off, 0.0), _first_size(off, 60.0)
    assert at_round[1] > 1 and after == ("a100", 1)  # the phase decides the size without the rule
    on = _policy(tmp_path, **params)
    assert _first_size(on, 60.0) == _first_size(on, 0.0) == at_round
    assert _first_size(on, 200.0) == at_round  # later in the round too


def _problem(current: list[int], attained: list[float]) -> AllocationProblem:
    cells = (Cell("a100", 1), Cell("a100", 2))
    n = len(current)
    return AllocationProblem(
        job_ids=tuple(range(1, n + 1)),
        cells=cells,
        throughput=np.tile([10.0, 19.0], (n, 1)),
        capacity={"a100": 4},
        submit_time=np.arange(n, dtype=float),
        attained_time=np.array(attained),
        requested=np.zeros(n, dtype=int),
        current=np.array(current),
        steps_known=np.zeros(n, bool),
    )


def test_lone_arrivals_only_when_every_job_not_running_is_new() -> None:
    p = _problem([0, -1, -1], [50.0, 0.0, 0.0])
    x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    both_new = np.array([False, True, True])
    assert lone_arrivals(p, x, both_new).tolist() == [1, 2]
    one_new = np.array([False, False, True])  # job 2 was left waiting by the round: it came first
    assert lone_arrivals(p, x, one_new) is None
    assert never_ran(p, x, np.array([False, True, True])).tolist() == [1, 2]


def test_sized_rows_put_the_rounds_column_first_and_keep_the_fallback() -> None:
    x = np.array([[1.0, 0.0], [0.5, 0.0]])
    round_x = np.array([[0.0, 1.0], [0.0, 0.0]])  # the round gives row 0 two GPUs, row 1 nothing
    out = sized_rows(x, np.array([0, 1]), round_x)
    assert out[0].tolist() == [1.0, SIZED + 1.0] and out[1].tolist() == [0.5, 0.0]
