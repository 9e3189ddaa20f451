"""A run whose requeued jobs wait out Slurm's begin time is not stuck: the engine keeps going until they start."""

from __future__ import annotations

from pathlib import Path

from slurmplan.sim.engine import SimOptions
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import read_trace

TRACE = Path(__file__).resolve().parents[2] / "site" / "devcluster" / "replay-trace.jsonl"


def test_jobs_waiting_out_slurms_default_requeue_delay_all_finish():
    # 121 s x K=30: what `slurmplan replay` predicts for a cluster with Slurm's default cred_expire. Before, three
    # rounds with nothing running (every requeued job waiting for its begin time) ended the run as "stuck".
    options = SimOptions(requeue_delay_s=121.0 * 30, round_s=360.0, tick_s=30.0)
    result = simulate(RunSpec(str(TRACE), "a100:2x4,t4:2x2,v100:2x4", "slurmplan", options))
    assert sum(j.finish_s is not None for j in result.jobs) == len(read_trace(TRACE))
