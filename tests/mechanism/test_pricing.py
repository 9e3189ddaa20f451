"""Do no harm (issue 23): remaining-time estimates, move prices and the hysteresis, as pure numbers."""

from __future__ import annotations

import math

import numpy as np

from slurmplan.mechanism.pricing import hold_cost_s, price_change, remaining_prior
from slurmplan.mechanism.reconfig import judge_move
from slurmplan.tick_types import TickConfig


def test_remaining_time_from_steps_else_from_the_run_so_far_never_the_time_limit_alone():
    est, source = remaining_prior(
        steps_left=np.array([600.0, 0.0, 0.0, 0.0]),
        rate=np.array([2.0, 1.0, 1.0, 1.0]),
        known=np.array([True, False, False, False]),
        attained_s=np.array([0.0, 0.0, 5000.0, 5000.0]),
        limit_left_s=np.array([7 * 86400.0, 7 * 86400.0, 7 * 86400.0, 1000.0]),
        floor_s=360.0,
    )
    np.testing.assert_allclose(est, [300.0, 360.0, 5000.0, 1000.0])
    assert source == ["steps", "run so far", "run so far", "time limit"]  # the limit only caps


def test_a_move_pays_only_when_it_saves_more_than_its_full_cost():
    assert not price_change(300.0, 10.0, 20.0, cost_s=183.0).pays  # saves 150 s, costs 183 s
    big = price_change(3000.0, 10.0, 20.0, cost_s=183.0)
    assert big.pays and big.gain_s == 1500.0 and "pays" in big.detail
    shrink = price_change(3000.0, 20.0, 10.0, cost_s=10.0)  # a shrink loses time for the job itself
    assert shrink.gain_s < 0 and not shrink.pays
    # ... unless the jobs it makes room for gain more than both
    assert price_change(3000.0, 20.0, 10.0, cost_s=10.0, others_gain_s=4000.0).pays
    stop = price_change(3000.0, 20.0, 0.0, cost_s=10.0, others_gain_s=100.0, own_delay_s=600.0)
    assert not stop.pays and stop.gain_s == -500.0
    assert not price_change(math.inf, 10.0, 20.0, 1.0).pays


def test_hysteresis_charges_both_moves_within_the_hold():
    assert hold_cost_s(100.0, since_moved_s=60.0, hold_s=1080.0)[0] == 200.0
    assert hold_cost_s(100.0, since_moved_s=2000.0, hold_s=1080.0) == (100.0, "")
    config = TickConfig(reconfig_cost_s=100.0, round_s=360.0)  # hold: 3 rounds
    # 2x faster over 300 s left: 150 s saved pays one 100 s restart, not two
    assert judge_move(10.0, 20.0, 300.0, config).move
    assert not judge_move(10.0, 20.0, 300.0, config, since_moved_s=300.0).move
    assert judge_move(10.0, 20.0, 300.0, config, since_moved_s=2000.0).move


def test_the_full_cost_adds_slurms_start_latency():
    config = TickConfig(reconfig_cost_s=78.0, start_latency_s=105.0, reconfig_cost_by_gpus={2: 10.0})
    assert config.full_cost_for(1) == 183.0 and config.full_cost_for(2) == 115.0
    assert not judge_move(10.0, 20.0, 300.0, config, gpus=1).move  # 150 s saved < 183 s
