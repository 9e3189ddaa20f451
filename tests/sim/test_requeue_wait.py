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


def test_the_prediction_sends_requeued_jobs_to_nodes_they_did_not_just_leave():
    # The same placement rule as the daemon's (mechanism.placement: avoid the nodes a job just left while Slurm's
    # delay runs): on the replay trace no requeued job is released onto a node where it must wait 3630 s. Before
    # the rule one was, and its GPUs sat reserved for a trace hour (0.639 h predicted avg JCT, now below 0.6 h).
    from slurmplan.policy.registry import load_policy
    from slurmplan.sim.cluster import parse_cluster
    from slurmplan.sim.engine import Simulation
    from slurmplan.sim.runner import build_workloads, load_jobs

    options = SimOptions(requeue_delay_s=121.0 * 30, round_s=360.0, tick_s=30.0)
    spec = RunSpec(str(TRACE), "a100:2x4,t4:2x2,v100:2x4", "slurmplan", options)
    cluster = parse_cluster(spec.cluster)
    sim = Simulation(build_workloads(load_jobs(spec), cluster, None), cluster, load_policy("slurmplan"), options)
    result = sim.run()
    assert sum(j.finish_s is not None for j in result.jobs) == len(read_trace(TRACE))
    assert sum(j.restarts for j in result.jobs) > 0  # there were requeues to place
    assert sim.backend.requeue_waits == 0
