"""Round priorities with Gavel's epochs: memory of time received since the last reset, deficits as tie-breaks."""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.domain import Allocation, AllocationProblem, Cell
from slurmplan.mechanism.priorities import deficits, pick_order, priorities, received_share, start_epoch
from slurmplan.tick import JobState, SchedulerState, TickConfig

V100, K80 = Cell("v100", 1), Cell("k80", 1)


def _problem(n: int) -> AllocationProblem:
    return AllocationProblem(
        tuple(range(n)), (V100, K80), np.ones((n, 2)), {"v100": 1, "k80": 1}, np.ones(n), np.zeros(n), np.zeros(n)
    )


def _alloc(x: list[list[float]]) -> Allocation:
    return Allocation(tuple(range(len(x))), (V100, K80), np.array(x), "t", 0.0)


def test_share_counts_only_the_epoch_and_starts_every_pair_at_half_a_round() -> None:
    p = _problem(2)
    states = {
        0: JobState(first_seen=0.0, attained_by_cell={V100: 90_000.0}, epoch_by_cell={V100: 1_800.0}),
        1: JobState(first_seen=30_000.0),
    }
    got = received_share(p, states, now=33_600.0, epoch_start=30_000.0, head_s=180.0)
    # 3,600 s of epoch (+180 head): job 0 ran half of it on the V100; a lifetime of 90,000 s plays no part
    assert got[0, 0] == pytest.approx((1_800 + 180) / 3_780)
    assert got[1, 0] == got[1, 1] == got[0, 1] == pytest.approx(180 / 3_780)
    pri = priorities(np.array([[0.5, 0.0], [0.5, 0.5]]), got)
    assert pri[1, 0] > pri[0, 0] > 0  # the job that has not run yet comes first, the other is not starved
    assert pri[0, 1] == 0.0  # no share, no priority


def test_no_reset_before_the_interval_nor_while_x_is_unchanged() -> None:
    config = TickConfig(priority_reset_s=1_920.0)
    x = _alloc([[0.5, 0.5]])
    st = {0: JobState(first_seen=0.0, epoch_by_cell={V100: 600.0})}
    early = SchedulerState(epoch_start=0.0, allocation=x)
    assert start_epoch(dict(st), early, _alloc([[1.0, 0.0]]), 1_000.0, config) == 0.0
    assert start_epoch(dict(st), early, x, 5_000.0, config) == 0.0
    assert start_epoch(dict(st), SchedulerState(), x, 5_000.0, config) == 5_000.0  # the first epoch


def test_reset_moves_what_x_promised_but_was_not_received_into_the_deficit() -> None:
    config = TickConfig(priority_reset_s=1_920.0)
    old = _alloc([[0.5, 0.5], [0.5, 0.5]])
    states = {
        0: JobState(first_seen=0.0, epoch_by_cell={V100: 2_000.0}),
        1: JobState(first_seen=1_000.0, epoch_by_cell={K80: 500.0}, deficit_by_cell={V100: 7.0}),
    }
    start = start_epoch(
        states, SchedulerState(epoch_start=0.0, allocation=old), _alloc([[1, 0], [0, 1]]), 3_000.0, config
    )
    assert start == 3_000.0
    assert states[0].epoch_by_cell == {} and states[1].epoch_by_cell == {}
    # job 0 was owed 0.5 x 3,000 s on each type and got 2,000 s on the V100
    assert states[0].deficit_by_cell == pytest.approx({V100: -500.0, K80: 1_500.0})
    # job 1 arrived at 1,000 s: owed 0.5 x 2,000 s on each, plus its earlier deficit
    assert states[1].deficit_by_cell == pytest.approx({V100: 1_007.0, K80: 500.0})
    d = deficits(_problem(2), states)
    assert d[1, 0] == pytest.approx(1_007.0) and d[0, 0] == pytest.approx(-500.0)


def test_equal_priorities_go_to_the_larger_deficit() -> None:
    x = np.array([[0.5, 0.0], [0.5, 0.0]])
    pri = np.array([[2.0, 0.0], [2.0, 0.0]])
    rows, _ = pick_order(x, pri, np.ones(2, dtype=bool))
    assert rows.tolist()[0] == 0  # without deficits: the earlier job
    rows, _ = pick_order(x, pri, np.ones(2, dtype=bool), np.array([[10.0, 0.0], [50.0, 0.0]]))
    assert rows.tolist()[0] == 1


def test_deficits_of_some_rows_are_those_rows_of_all_deficits_and_zero_elsewhere() -> None:
    """A refill between rounds asks only for the rows it may start (issue 27: a few of a tick's ~100)."""
    p = _problem(4)
    states = {
        0: JobState(first_seen=0.0, deficit_by_cell={V100: 30.0, K80: -5.0}),
        1: JobState(first_seen=0.0, deficit_by_cell={K80: 12.5}),
        2: JobState(first_seen=0.0),
        3: JobState(first_seen=0.0, deficit_by_cell={V100: 7.0, Cell("h100", 8): 99.0}),  # no such column: skipped
    }
    every = deficits(p, states)
    assert every.tolist() == [[30.0, -5.0], [0.0, 12.5], [0.0, 0.0], [7.0, 0.0]]
    only = np.array([False, True, False, True])
    some = deficits(p, states, only)
    assert np.array_equal(some[only], every[only]) and not some[~only].any()
    assert not deficits(p, states, np.zeros(4, dtype=bool)).any()
    # the row pick_order reads decides the tie the same way either way
    x = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 1.0]])
    pri = np.ones((4, 2))
    assert [r.tolist() for r in pick_order(x, pri, only, some)] == [r.tolist() for r in pick_order(x, pri, only, every)]
