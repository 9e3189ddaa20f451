"""Every job the simulated Slurm starts runs on the nodes of the daemon's latest decision for it.

Regression (77d0d8b + 85ff4ba): a pending job whose comment already named its Cell and plan was not updated, so
when a round moved it to other nodes of the same Cell its Slurm pin (``ReqNodeList``) stayed on the old nodes.
It then started there, on GPUs the round had given to another job, and was moved again: on the LLM trace crius
went from 1.25 to 9.98 restarts per job. The check here is the invariant itself, not a figure, so it holds
whatever the policy decides.

On a whole trace (the figures in the report): ``python3 tests/sim/test_pinned_starts.py TRACE.jsonl``.
"""

from __future__ import annotations

import sys

from slurmplan.domain import JobState
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.trace import TraceJob, read_trace
from slurmplan.sim.workload import build_workloads


def starts_off_decision(
    jobs: list[TraceJob], cluster: str = CRIUS_CLUSTER, policy: str = "crius"
) -> tuple[int, list[str]]:
    """Simulate as ``slurmplan compare --round 300`` does (30 s ticks) and return the number of job starts and
    those on nodes other than the latest decision for the job (decided while it was pending)."""
    spec = parse_cluster(cluster)
    sim = Simulation(
        build_workloads(jobs, spec, None), spec, load_policy(policy), SimOptions(round_s=300.0, tick_s=30.0)
    )
    sim.backend.start_at(jobs[0].arrival_s)
    decided: dict[int, frozenset[str]] = {}
    wrong: list[str] = []
    starts = 0

    def running() -> dict[int, frozenset[str]]:
        return {j.job_id: frozenset(j.nodes) for j in sim.backend.snapshot().jobs if j.state is JobState.RUNNING}

    def check(before: dict[int, frozenset[str]], when: str) -> None:
        nonlocal starts
        for job_id, nodes in running().items():
            if before.get(job_id) != nodes:
                starts += 1
                want = decided.get(job_id, frozenset())
                if want != nodes:
                    wrong.append(f"job {job_id} started {when} on {sorted(nodes)}, decided {sorted(want)}")

    while True:
        before = running()
        out = sim.step()
        for a in out.assignments:
            if a.job_id not in before:  # pending (or arriving) when decided
                decided[a.job_id] = frozenset(a.nodes)
        check(before, f"by the tick at {sim.backend.now:.0f}")
        if not sim.backend.jobs and not sim.arrivals_left:
            return starts, wrong
        before = running()
        sim.backend.advance(sim.next_event())
        check(before, f"between ticks, by {sim.backend.now:.0f}")


def test_crius_on_a_small_llm_trace_starts_every_job_where_it_was_last_decided() -> None:
    jobs = llm_trace(LlmTraceConfig(num_jobs=60, rate_per_h=100.0, seed=0), perf_feasible(CRIUS_CLUSTER))
    starts, wrong = starts_off_decision(jobs)
    assert starts >= len(jobs)
    assert wrong == []  # on main (62de371): dozens of starts on stale pins


if __name__ == "__main__":
    n, off = starts_off_decision(list(read_trace(sys.argv[1])))
    print(f"{n} starts, {len(off)} on nodes other than the latest decision")
