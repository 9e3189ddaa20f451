"""Priorities, the greedy round, and Rubick's reconfiguration rule."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmplan.domain import AllocationProblem, Cell, Reason
from slurmplan.mechanism.priorities import pick_order, priorities
from slurmplan.mechanism.reconfig import horizons, judge_move
from slurmplan.mechanism.round import RunningInfo, plan_round
from slurmplan.tick import TickConfig

CONFIG = TickConfig()
NO_WAIT = TickConfig(requeue_delay_s=0.0)
"""Without Slurm's requeue wait (121 s by default): a resize on the same type then costs only delta."""


def idle(n: int) -> RunningInfo:
    return RunningInfo(np.zeros(n, bool), np.full(n, -1), np.zeros(n, bool), np.full(n, 360.0))


def problem(cells: list[Cell], thr: list[list[float]], capacity: dict[str, int]) -> AllocationProblem:
    return AllocationProblem(tuple(range(1, len(thr) + 1)), tuple(cells), np.array(thr, dtype=float), capacity)


def test_priority_is_x_over_received_and_infinite_when_nothing_received() -> None:
    x = np.array([[0.5, 0.0], [0.5, 0.25]])
    got = np.array([[0.25, 0.1], [0.0, 0.5]])
    pri = priorities(x, got)
    assert pri[0, 0] == 2.0 and pri[0, 1] == 0.0 and np.isinf(pri[1, 0]) and pri[1, 1] == 0.5
    rows, cols = pick_order(x, pri, np.ones(2, bool))
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [(1, 0), (0, 0), (1, 1)]


def test_a_job_not_picked_while_gpus_are_left_is_not_told_it_was_outranked() -> None:
    """Issue 29 item 10: "needs 4 GPUs and 4 a100 GPUs were left" contradicted itself."""
    from slurmplan.mechanism.round import _outranked

    p = problem([Cell("a100", 4)], [[10.0]], {"a100": 8})
    text = _outranked(p, 0, np.array([[0.5]]), np.array([[2.0]]), {"a100": 4})
    assert text.startswith("not picked this round: its best configuration is a100x4; 4 a100 GPUs are free")
    assert "outranked" not in text and "next round" in text


def test_greedy_skips_what_does_not_fit_and_takes_a_job_once() -> None:
    cells = [Cell("a100", 8), Cell("a100", 1)]
    p = problem(cells, [[80, 10], [0, 10], [0, 10]], {"a100": 8})
    x = np.array([[0.5, 0.5], [0.0, 1.0], [0.0, 1.0]])
    pri = np.array([[9.0, 8.0], [0, 5.0], [0, 4.0]])
    choice = plan_round(p, x, pri, idle(3), CONFIG)
    assert choice.col.tolist() == [0, -1, -1]  # job 1 takes all 8 GPUs once; the others do not fit
    assert choice.reason == (Reason.SCHEDULED, Reason.WAITING, Reason.WAITING)
    assert choice.detail[1].startswith("outranked this round: its best configuration a100x1 needs 1 GPU, but ")
    assert "jobs of higher priority left only 0 a100 GPUs" in choice.detail[1]
    assert choice.priority.tolist() == [9.0, 5.0, 4.0]  # the chosen pair's, else the job's best


def test_job_with_zero_share_has_zero_priority() -> None:
    p = problem([Cell("a100", 1)], [[10.0], [10.0]], {"a100": 1})
    choice = plan_round(p, np.array([[1.0], [0.0]]), np.array([[np.inf], [0.0]]), idle(2), CONFIG)
    assert choice.col.tolist() == [0, -1] and choice.priority.tolist() == [np.inf, 0.0]
    assert choice.detail[1] == "the policy gave it no share of time this round"


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.floats(0, 1), min_size=4, max_size=4), min_size=n, max_size=n),
            st.lists(st.lists(st.floats(0, 50), min_size=4, max_size=4), min_size=n, max_size=n),
            st.integers(0, 16),
            st.integers(0, 16),
        )
    )
)
def test_capacity_never_exceeded_and_jobs_appear_once(data: tuple) -> None:
    xs, thr, cap_a, cap_v = data
    cells = [Cell("a100", 1), Cell("a100", 4), Cell("v100", 2), Cell("v100", 8)]
    p = problem(cells, thr, {"a100": cap_a, "v100": cap_v})
    x = np.array(xs)
    pri = priorities(x, np.random.default_rng(0).random(x.shape))
    choice = plan_round(p, x, pri, idle(len(xs)), CONFIG)
    used = {"a100": 0, "v100": 0}
    for j, c in enumerate(choice.col.tolist()):
        if c >= 0:
            assert x[j, c] > 0
            used[cells[c].gpu_type] += cells[c].gpus
    assert used["a100"] <= cap_a and used["v100"] <= cap_v


def test_rubick_rule_keeps_small_gains_and_moves_large_ones() -> None:
    assert not judge_move(10.0, 10.0, 360.0, CONFIG).move  # no gain: lease renewal
    assert not judge_move(10.0, 12.0, 360.0, CONFIG).move  # +20% does not pay 78 s of a 360 s round
    big = judge_move(10.0, 30.0, 360.0, CONFIG)
    assert big.move and big.ratio > 1 / 0.97
    assert not judge_move(10.0, 30.0, 60.0, CONFIG).move  # a job that ends in 60 s never pays 78 s
    assert horizons(360.0, np.array([100.0, float("inf")])).tolist() == [100.0, 360.0]


def _running(current: int) -> RunningInfo:
    return RunningInfo(np.array([True]), np.array([current]), np.array([False]), np.array([360.0]))


def test_running_job_stays_when_the_move_gains_little() -> None:
    p = problem([Cell("a100", 1), Cell("v100", 1)], [[11.0, 10.0]], {"a100": 1, "v100": 1})
    x = np.array([[1.0, 0.0]])
    choice = plan_round(p, x, priorities(x, np.zeros((1, 2))), _running(1), CONFIG)
    assert choice.col.tolist() == [1] and choice.reason == (Reason.KEPT,)
    assert choice.detail[0].startswith("stays: moving would gain 1.1x for 360 s but costs 78 s of restart: 0.86x")
    assert "not above the 1.03x a move must reach" in choice.detail[0]


def test_running_job_moves_when_the_gain_is_large() -> None:
    p = problem([Cell("a100", 1), Cell("v100", 1)], [[40.0, 10.0]], {"a100": 1, "v100": 1})
    x = np.array([[1.0, 0.0]])
    choice = plan_round(p, x, priorities(x, np.zeros((1, 2))), _running(1), CONFIG)
    assert choice.col.tolist() == [0] and choice.reason == (Reason.MOVED,)
    assert choice.detail[0].startswith("from v100x1 to a100x1: moving gains 4.0x for 360 s and costs 78 s")
    assert "above the 1.03x a move must reach" in choice.detail[0] and "not above" not in choice.detail[0]


def test_running_job_passed_over_keeps_spare_gpus_but_yields_to_waiting_jobs() -> None:
    cells = [Cell("a100", 1)]
    info = RunningInfo(np.array([True, False]), np.array([0, -1]), np.zeros(2, bool), np.full(2, 360.0))
    x = np.array([[0.5], [0.5]])
    pri = priorities(x, np.array([[0.9], [0.0]]))
    one = plan_round(problem(cells, [[10.0], [10.0]], {"a100": 1}), x, pri, info, CONFIG)
    assert one.col.tolist() == [-1, 0] and one.reason[0] is Reason.PREEMPTED
    two = plan_round(problem(cells, [[10.0], [10.0]], {"a100": 2}), x, pri, info, CONFIG)
    assert two.col.tolist() == [0, 0] and two.reason == (Reason.KEPT, Reason.SCHEDULED)


def test_shrinking_job_cannot_stay_big_when_its_gpus_are_needed() -> None:
    # Job 1 runs on a100x4; X moves it to a100x2 (a small loss) to make room for job 2 (a100x2).
    p = problem([Cell("a100", 2), Cell("a100", 4)], [[19.0, 20.0], [19.0, 0.0]], {"a100": 4})
    x = np.array([[1.0, 0.0], [1.0, 0.0]])
    info = RunningInfo(np.array([True, False]), np.array([1, -1]), np.zeros(2, bool), np.full(2, 360.0))
    choice = plan_round(p, x, priorities(x, np.array([[0.0, 0.5], [0.0, 0.0]])), info, NO_WAIT)
    assert choice.col.tolist() == [0, 0]  # both fit only if job 1 shrinks: capacity is never exceeded
    assert choice.reason[0] is Reason.RESIZED and "moves although" in choice.detail[0]


def test_a_move_that_cannot_pay_its_restart_says_so_in_seconds() -> None:
    """The issue's example: 4.1x for the 20 s left, against 78 s of restart."""
    verdict = judge_move(10.0, 41.0, 20.0, CONFIG)
    assert not verdict.move
    assert verdict.detail == (
        "moving would run 4.1x as fast, but its restart takes 78 s, longer than the 20 s over which a move is weighed"
    )


def test_a_preempted_job_says_who_took_its_gpus() -> None:
    cells = [Cell("a100", 1)]
    p = problem(cells, [[10.0], [10.0]], {"a100": 1})
    x = np.array([[0.5], [0.5]])
    pri = np.array([[1.0], [3.0]])
    info = RunningInfo(np.array([True, False]), np.array([0, -1]), np.array([False, False]), np.full(2, 360.0))
    choice = plan_round(p, x, pri, info, CONFIG)
    assert choice.col.tolist() == [-1, 0] and choice.reason[0] is Reason.PREEMPTED
    assert choice.detail[0].startswith("its a100 GPUs went to job 2 (priority 3); outranked this round")


def test_a_resize_on_the_same_type_pays_slurms_requeue_delay_a_move_to_another_type_does_not() -> None:
    # A resize may restart on the nodes the job leaves, where Slurm makes it wait cred_expire + 1 s; a move to
    # another type never does (the daemon resets the begin time). Both gain 2x over one 360 s round.
    config = TickConfig(requeue_delay_s=121.0)
    assert judge_move(10.0, 20.0, 360.0, NO_WAIT).move
    slow = judge_move(10.0, 20.0, 360.0, NO_WAIT, wait_s=121.0)
    assert not slow.move and "199 s of restart" in slow.detail
    cells = [Cell("a100", 1), Cell("a100", 2), Cell("v100", 2)]
    x = np.array([[0.0, 1.0, 0.0]])
    resize = problem(cells, [[10.0, 20.0, 0.0]], {"a100": 4, "v100": 2})
    assert plan_round(resize, x, priorities(x, np.zeros((1, 3))), _running(0), NO_WAIT).col.tolist() == [1]
    assert plan_round(resize, x, priorities(x, np.zeros((1, 3))), _running(0), config).col.tolist() == [0]
    x = np.array([[0.0, 0.0, 1.0]])
    move = problem(cells, [[10.0, 0.0, 20.0]], {"a100": 4, "v100": 2})
    assert plan_round(move, x, priorities(x, np.zeros((1, 3))), _running(0), config).col.tolist() == [2]


def test_a_preempted_job_names_who_took_its_type_by_priority_and_rows_outside_eligible_are_not_explained() -> None:
    """The takers of each GPU type are listed once per round (issue 27: it was once per preempted job, quadratic
    in the jobs present); a refill round explains only the rows it may pick, its callers keep the others'."""
    p = problem([Cell("a100", 1)], [[10.0]] * 5, {"a100": 4})
    x = np.array([[0.0], [1.0], [1.0], [1.0], [1.0]])
    pri = np.array([[0.0], [5.0], [7.0], [6.0], [8.0]])
    running = RunningInfo(
        np.array([True] + [False] * 4), np.array([0] + [-1] * 4), np.zeros(5, bool), np.full(5, 360.0)
    )
    choice = plan_round(p, x, pri, running, CONFIG)
    assert choice.col.tolist() == [-1, 0, 0, 0, 0] and choice.reason[0] is Reason.PREEMPTED
    assert choice.detail[0] == (
        "its a100 GPUs went to job 5 (priority 8), job 3 (priority 7), job 4 (priority 6) and 1 more; "
        "the policy gave it no share of time this round"
    )
    refill = plan_round(p, x, pri, running, CONFIG, eligible=np.array([False, False, True, True, True]))
    assert refill.col.tolist() == [-1, -1, 0, 0, 0]
    assert refill.reason[:2] == (Reason.WAITING, Reason.WAITING) and refill.detail[:2] == ("", "")
    assert all(d.startswith("starts as a100x1") for d in refill.detail[2:])
