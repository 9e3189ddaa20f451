"""Rubick, Crius and EasyScale on small problems whose greedy outcome is worked out by hand."""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem, Cell, JobClass
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.problem import violations
from slurmplan.policy.registry import build_policy, load_policy


def cells_of(x: np.ndarray, cells) -> list[str | None]:
    return [cells[int(np.argmax(row))].short() if row.max() > 0.5 else None for row in x]


def one_type(thr: list[list[float]], sizes=(1, 2, 4), gpus: int = 4, **fields) -> AllocationProblem:
    return AllocationProblem(
        job_ids=tuple(range(len(thr))),
        cells=tuple(Cell("a", s) for s in sizes),
        throughput=np.array(thr, dtype=float),
        capacity={"a": gpus},
        **fields,
    )


def test_rubick_best_effort_by_slope_then_sla_for_guaranteed():
    # job 0 scales linearly, job 1 saturates; both requested 1 GPU (scores = speedup over 1 GPU).
    thr = [[10, 20, 40], [10, 12, 13]]
    best_effort = one_type(thr, requested=np.array([0, 0]))
    alloc = load_policy("rubick").allocate(best_effort)
    assert cells_of(alloc.x, best_effort.cells) == ["ax4", None]  # job 1 preempted: best-effort
    guaranteed = one_type(
        thr,
        requested=np.array([0, 0]),
        job_class=(JobClass.BEST_EFFORT, JobClass.GUARANTEED),
        sla_throughput=np.array([0.0, 10.0]),
    )
    alloc = load_policy("rubick").allocate(guaranteed)
    # job 1 holds its minRes (1 GPU); job 0 climbs to 2 (slope 1, ties to more GPUs); the last GPU still
    # helps job 1 (slope 0.2), so nothing idles.
    assert cells_of(alloc.x, guaranteed.cells) == ["ax2", "ax2"]
    assert not violations(guaranteed, alloc)


def test_rubick_min_res_may_use_fewer_gpus_with_a_better_plan():
    # Requested 4 GPUs giving 30/s; the 2-GPU Cell's best plan already gives 32/s: minRes = 2 GPUs.
    problem = one_type(
        [[20, 32, 30], [10, 20, 40]],
        requested=np.array([2, 0]),
        job_class=(JobClass.GUARANTEED, JobClass.BEST_EFFORT),
        sla_throughput=np.array([30.0, 0.0]),
    )
    alloc = load_policy("rubick").allocate(problem)
    assert alloc.effective_throughput(problem)[0] >= 30.0
    assert cells_of(alloc.x, problem.cells) == ["ax2", "ax2"]


def test_rubick_starving_best_effort_job_is_served():
    problem = one_type(
        [[10, 20, 40], [10, 12, 13]],
        requested=np.array([0, 0]),
        time_since_start=np.array([0.0, 7200.0]),
        attained_time=np.array([0.0, 0.0]),
    )
    assert cells_of(load_policy("rubick").allocate(problem).x, problem.cells) == ["ax2", "ax2"]


def test_easyscale_accepts_highest_speedup_per_gpu():
    problem = one_type([[10, 19, 36], [10, 14, 18]])
    alloc = load_policy("easyscale").allocate(problem)
    assert cells_of(alloc.x, problem.cells) == ["ax2", "ax2"]


def test_easyscale_scales_out_within_its_gpu_type():
    problem = AllocationProblem(
        job_ids=(1,),
        cells=(Cell("v100", 1), Cell("v100", 2), Cell("a100", 4)),
        throughput=np.array([[10.0, 19.0, 100.0]]),
        capacity={"v100": 2, "a100": 4},
        current=np.array([0]),
    )
    alloc = load_policy("easyscale").allocate(problem)
    assert cells_of(alloc.x, problem.cells) == ["v100x2"]


def test_crius_scales_a_running_job_down_to_place_a_new_one():
    fields = dict(current=np.array([2, -1]), submit_time=np.array([0.0, 1.0]))
    problem = one_type([[10, 19, 36], [0, 20, 38]], **fields)
    assert cells_of(load_policy("crius").allocate(problem).x, problem.cells) == ["ax2", "ax2"]
    shallow = build_policy(PolicyConfig("c", "crius", params={"search_depth": 0}))
    assert cells_of(shallow.allocate(problem).x, problem.cells) == ["ax4", None]


def test_crius_moves_a_job_to_another_type_with_room():
    # Two types of 2 GPUs: job 0 runs on a x2; job 1 can only use a x2. Crius moves job 0 to b x2.
    problem = AllocationProblem(
        job_ids=(0, 1),
        cells=(Cell("a", 2), Cell("b", 2)),
        throughput=np.array([[20.0, 15.0], [20.0, 0.0]]),
        capacity={"a": 2, "b": 2},
        current=np.array([0, -1]),
        submit_time=np.array([0.0, 1.0]),
    )
    alloc = load_policy("crius").allocate(problem)
    assert cells_of(alloc.x, problem.cells) == ["bx2", "ax2"]


def with_cpus(problem: AllocationProblem, cpus: list[list[int]], cap: int | None) -> AllocationProblem:
    from dataclasses import replace

    from slurmplan.domain import Candidate

    cands = tuple(
        tuple(Candidate(cell, float(problem.throughput[j, c]), cpus=cpus[j][c]) for c, cell in enumerate(problem.cells))
        for j in range(problem.num_jobs)
    )
    return replace(problem, candidates=cands, cpu_capacity=None if cap is None else {"a": cap})


def test_rubick_respects_cpus():
    # job 0's 2-GPU plan needs 16 CPUs (offload), job 1's only 8; with 12 CPUs job 0 must stay on 1 GPU.
    base = one_type([[10, 21], [10, 20]], sizes=(1, 2), requested=np.array([0, 0]))
    cpus = [[4, 16], [4, 8]]
    assert cells_of(load_policy("rubick").allocate(with_cpus(base, cpus, None)).x, base.cells) == ["ax2", "ax2"]
    limited = with_cpus(base, cpus, 12)
    alloc = load_policy("rubick").allocate(limited)
    assert cells_of(alloc.x, base.cells) == ["ax1", "ax2"]
    for name in ("crius", "easyscale"):
        x = load_policy(name).allocate(limited).x
        assert (x * np.array(cpus)).sum() <= 12 + 1e-9


def test_lp_policies_respect_cpus():
    base = one_type([[10.0], [10.0]], sizes=(1,), gpus=2)
    limited = with_cpus(base, [[8], [8]], 8)
    for name in ("las", "slurmplan", "makespan", "max_throughput"):
        x = load_policy(name).allocate(limited).x
        assert (x * 8).sum() <= 8 + 1e-6, name
    np.testing.assert_allclose(load_policy("las").allocate(limited).x[:, 0], [0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(load_policy("las").allocate(base).x[:, 0], [1.0, 1.0], atol=1e-6)
