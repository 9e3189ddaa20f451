"""``slow_start`` (issue 23, fourteenth session): a start onto a type on which the job runs far slower is priced
against waiting for its fast type, as the guard prices a voluntary move. Held out by shape, a waiting job past its
stretch guard took the fastest *free* GPUs, T4s: 0.08 h on A100s became 10.6 h on t4x8 (sim/RESULTS.md section 7)."""

from __future__ import annotations

import numpy as np

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy import load_policy
from slurmplan.policy.flagship_moves import keep_off_slow
from slurmplan.policy.flagship_params import PARAMS
from slurmplan.policy.greedy import Packing

A100, T4 = 0, 1  # columns: one A100, one T4; the T4 runs every job at 0.1x


def one_a100_one_t4(running_left_s: float, cost_s: float = 183.0) -> AllocationProblem:
    """Job 0 runs on the only A100 (expected ``running_left_s`` left: it ran that long, length unknown); job 1
    (length unknown, so expected a round, 6 min, on the A100) waits; restart costs as measured."""
    return AllocationProblem(
        job_ids=(0, 1),
        cells=(Cell("a100", 1), Cell("t4", 1)),
        throughput=np.array([[10.0, 1.0], [10.0, 1.0]]),
        capacity={"a100": 1, "t4": 1},
        steps_remaining=np.ones(2),
        steps_known=np.zeros(2, bool),
        attained_time=np.array([running_left_s, 0.0]),
        current=np.array([A100, -1]),
        restart_cost_s=np.full(2, cost_s),
        submit_time=np.zeros(2),
        time_since_start=np.array([running_left_s, 600.0]),
    )


def decide(
    running_left_s: float, exempt: bool = False, cost_s: float = 183.0, below: float = 1.0
) -> tuple[list[int], dict[int, str]]:
    p = one_a100_one_t4(running_left_s, cost_s)
    pack = Packing.empty(p)
    pack.assign(0, A100)
    pack.assign(1, T4)  # what the steps before chose: the fastest free GPU
    est = np.array([running_left_s, 360.0])  # expected seconds left on each job's fastest column
    notes = keep_off_slow(p, pack, est, np.array([False, exempt]), below)
    return pack.col.tolist(), notes


def test_a_job_waits_for_its_fast_type_when_it_frees_soon() -> None:
    # the A100 frees in 10 min: 10 + 6 = 16 min there, against 60 min on the T4
    cols, notes = decide(600.0)
    assert cols == [A100, -1]
    assert "waits for a100x1" in notes[1] and "0.10x its best speed" in notes[1]
    assert decide(600.0, below=0.5)[0] == [A100, -1]  # 0.1x is far slower than half its speed: priced
    assert decide(600.0, below=0.05) == ([A100, T4], {})  # only a type under 0.05x its speed would be priced


def test_a_job_starts_on_the_slow_type_when_the_wait_is_long() -> None:
    # the A100 frees in 10 h: 10.1 h there, against 1 h on the T4
    cols, notes = decide(36000.0)
    assert cols == [A100, T4] and notes == {}


def test_exempt_and_running_jobs_keep_their_columns_and_the_preset_leaves_it_off() -> None:
    assert decide(600.0, exempt=True) == ([A100, T4], {})  # guaranteed or overdue: its start is a promise
    assert decide(600.0, cost_s=0.0) == ([A100, T4], {})  # Gavel's rules (--zero-cost): nothing is priced
    p = one_a100_one_t4(600.0)
    pack = Packing.empty(p)
    pack.assign(0, A100)
    assert keep_off_slow(p, pack, np.array([600.0, 360.0]), np.zeros(2, bool)) == {}  # staying is no start
    assert PARAMS["slow_start"].default == 0.0 and not PARAMS["slow_start"].check(1.5)
    assert load_policy("slurmplan").params["slow_start"] == 0.0  # measured, not taken (sim/RESULTS.md section 7)
