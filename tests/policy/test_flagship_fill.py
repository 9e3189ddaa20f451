"""The flagship's between-rounds step (``policy/flagship_fill.py``, ``fill_freed``): GPUs freed since the round go
to the waiting jobs that never ran, as plain Slurm starts the next job at each completion (issue 23)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from slurmplan.domain import AllocationProblem, Cell, JobClass
from slurmplan.policy.flagship_fill import TOP, freed_rows
from slurmplan.sim.engine import SimOptions
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import TraceJob
from tests.mechanism.helpers import preset_with

OPTIONS = SimOptions(round_s=360.0, tick_s=30.0, reconfig_cost_s=78.0, requeue_delay_s=121.0, start_latency_s=0.0)


def _second_start(policy: str) -> float:
    jobs = (
        TraceJob(1, 0.0, 1, model="bert-large", gpu_type="a100", duration_s=450.0),  # ends between rounds
        TraceJob(2, 300.0, 1, model="bert-large", gpu_type="a100", duration_s=600.0),  # the round leaves it waiting
    )
    result = simulate(RunSpec(jobs, "a100:1x1", policy, OPTIONS))
    first = {j.job_id: j for j in result.jobs}
    assert first[1].finish_s < 2 * OPTIONS.round_s  # job 1's GPU frees between the rounds at 360 s and 720 s
    return first[2].first_start_s


def test_the_preset_starts_a_waiting_job_on_a_gpu_freed_between_rounds(tmp_path: Path) -> None:
    """Fails on the eleventh session's flagship: job 2 waited for the round at 720 s with the GPU idle."""
    finish_1 = 450.0
    assert _second_start("slurmplan") <= finish_1 + 2 * OPTIONS.tick_s  # the shipped preset fills
    assert _second_start(preset_with(tmp_path, fill_freed=True)) <= finish_1 + 2 * OPTIONS.tick_s
    assert _second_start(preset_with(tmp_path, fill_freed=False)) >= 2 * OPTIONS.round_s  # off: idle until the round


def _problem(**fields) -> AllocationProblem:
    cells = (Cell("a100", 1), Cell("t4", 1), Cell("a100", 2))
    thr = np.array([[10.0, 2.0, 19.0], [10.0, 2.0, 19.0], [10.0, 2.0, 19.0], [10.0, 2.0, 19.0]])
    base = dict(
        job_ids=(1, 2, 3, 4),
        cells=cells,
        throughput=thr,
        capacity={"a100": 2, "t4": 1},
        submit_time=np.array([0.0, 50.0, 10.0, 5.0]),
        attained_time=np.array([0.0, 0.0, 0.0, 600.0]),  # job 4 ran and was stopped
        requested=np.array([0, 0, 0, 0]),
        steps_known=np.zeros(4, bool),
    )
    base.update(fields)
    return AllocationProblem(**base)


def test_rows_go_to_never_run_jobs_in_due_order_on_their_requested_size_and_never_to_a_stopped_job() -> None:
    p = _problem()
    x = np.zeros((4, 3))
    x[0] = [1.0, 0.2, 0.0]  # an arrival's row (engine.with_arrivals): kept as it is
    out = freed_rows(p, x, np.ones(4, bool), 360.0, 1.0)
    np.testing.assert_array_equal(out[0], x[0])
    assert out[3].sum() == 0  # stopped: waits for the round, where its restart is decided
    assert out[2, 0] == TOP and out[1, 0] < out[2, 0]  # job 3 (submitted at 10 s) before job 2 (at 50 s)
    assert out[1, 2] == 0 and out[2, 2] == 0  # only columns of the requested size (1 GPU)
    assert 0 < out[2, 1] < out[2, 0]  # weighted by speed
    assert freed_rows(p, x, np.zeros(4, bool), 360.0, 1.0) is x  # nobody free to start: X unchanged


def test_a_guaranteed_job_gets_a_row_only_where_it_meets_its_sla() -> None:
    cls = (JobClass.BEST_EFFORT, JobClass.GUARANTEED, JobClass.BEST_EFFORT, JobClass.BEST_EFFORT)
    p = _problem(job_class=cls, sla_throughput=np.array([0.0, 5.0, 0.0, 0.0]))
    out = freed_rows(p, np.zeros((4, 3)), np.ones(4, bool), 360.0, 1.0)
    assert out[1, 0] > 0 and out[1, 1] == 0  # the T4 (2 samples/s) misses its 5 samples/s
    assert out[2, 1] > 0  # a best-effort job may take it
