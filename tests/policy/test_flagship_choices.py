"""The flagship's column choices read from the round's kept arrays give what the plain per-call code gave.

``Slurmplan._choices`` is asked about twice per job per round; it reads the problem's throughput and the columns'
GPU counts from a memo kept per problem (``flagship._columns_of``), compares sizes as one array operation, and
remembers its answers per job and floor for the same problem (issue 27). The plain computation below is the code
before that change; both must give the same lists on the problems of a real simulated run, for floors of none, an
SLA's and a catch-up's (infinite), asked once and again. At floor 0 (most jobs) every job's answer comes from one
sort of the whole matrix (``flagship._floorless``).
"""

from __future__ import annotations

import math

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.policy import flagship
from slurmplan.policy.flagship import Slurmplan
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads


def _plain_choices(problem: AllocationProblem, j: int, floor: float) -> list[int]:
    row = np.asarray(problem.throughput[j], dtype=float)
    usable = np.nonzero(row > 0)[0]
    req = -1 if problem.requested is None else int(problem.requested[j])
    size = problem.cells[req].gpus if req >= 0 else None
    other = np.array([size is not None and problem.cells[c].gpus != size for c in usable], dtype=bool)
    if math.isinf(floor):
        other[:] = False
    below = row[usable] < floor - 1e-12 if floor > 0 else np.zeros(usable.size, dtype=bool)
    return usable[np.lexsort((-row[usable], other, below))].tolist()


def _problems() -> list[AllocationProblem]:
    """The problems the flagship allocated for in the first hours of ``bench_sim``'s trace."""
    jobs = llm_trace(LlmTraceConfig(num_jobs=120, rate_per_h=40.0, seed=3), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    policy = load_policy("slurmplan")
    seen: list[AllocationProblem] = []
    allocate = policy.allocate

    def recording(problem: AllocationProblem):
        seen.append(problem)
        return allocate(problem)

    policy.allocate = recording  # type: ignore[method-assign]
    options = SimOptions(round_s=300.0, tick_s=30.0, max_time_s=4 * 3600.0)
    Simulation(build_workloads(jobs, spec, None), spec, policy, options).run()
    return seen


def test_the_kept_columns_give_the_plain_choices() -> None:
    problems = _problems()
    assert len(problems) > 10
    compared = 0
    for problem in problems:
        for j in range(problem.num_jobs):
            sla = float(np.asarray(problem.throughput[j]).max()) / 2
            for floor in (0.0, sla, math.inf):
                want = _plain_choices(problem, j, floor)
                first = Slurmplan._choices(problem, j, floor)
                assert first == want
                first.append(-1)  # a caller's change to its list must not reach the next caller's
                assert Slurmplan._choices(problem, j, floor) == want  # the remembered answer
                compared += 1
        assert flagship._last_floorless.value[0] is problem  # floor 0 was answered from the one sort
    # other sizes than the requested one were in play (else the size test would not be exercised)
    assert any(len({c.gpus for c in p.cells}) > 1 for p in problems)
    assert compared > 300
