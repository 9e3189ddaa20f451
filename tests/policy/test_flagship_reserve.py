"""The flagship's EASY reservation for its first waiting gang job (``reserve_gang``, issue 23, ``u-replay-single``
30/102 in miniature: a 4-GPU job waits while smaller, longer jobs take the GPUs it needs, at rounds by backfill and
between rounds on arrival)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.flagship_reserve import shadow
from slurmplan.policy.registry import build_policy

CELLS = (Cell("a100", 1), Cell("a100", 2), Cell("a100", 4))


def flagship(**params):
    return build_policy(PolicyConfig("slurmplan", "slurmplan", params={"hold_s": 3600.0, **params}))


def gang_waits() -> AllocationProblem:
    """Four A100s. Job 0 runs on two for 600 s more; job 1 (4 GPUs, 400 s, due first) waits for them; job 2 (one
    GPU, 3,000 s) and job 3 (one GPU, 500 s) could start on the two free ones."""
    return AllocationProblem(
        job_ids=(0, 1, 2, 3), cells=CELLS,
        throughput=np.array([[0.0, 10.0, 0.0], [0.0, 0.0, 40.0], [10.0, 0.0, 0.0], [10.0, 0.0, 0.0]]),
        capacity={"a100": 4}, steps_remaining=np.array([6_000.0, 16_000.0, 30_000.0, 5_000.0]),
        time_since_start=np.array([600.0, 0.0, 0.0, 0.0]), attained_time=np.array([600.0, 0.0, 0.0, 0.0]),
        submit_time=np.array([0.0, 0.0, 0.0, 0.0]), current=np.array([1, -1, -1, -1]), requested=np.array([1, 2, 0, 0]),
    )  # fmt: skip


def test_shadow_is_when_enough_gpus_are_free_and_what_is_spare_then():
    assert shadow(2.0, [(600.0, 2.0), (100.0, 1.0)], 4.0) == (600.0, 1.0)
    assert shadow(4.0, [], 4.0) == (0.0, 0.0)
    assert shadow(1.0, [(50.0, 1.0)], 4.0) is None


def test_at_a_round_a_longer_job_does_not_take_the_gpus_a_waiting_gang_job_needs():
    p = gang_waits()
    old = flagship().allocate(p)
    assert old.x[2, 0] == 1.0 and old.x[1].sum() == 0.0  # backfill: the 3,000 s job delays the 4-GPU job
    new = flagship(reserve_gang=True).allocate(p)
    assert new.x[2].sum() == 0.0  # would end after the reserved start (600 s)
    assert new.x[3, 0] == 1.0  # ends before it: backfilled, as EASY does
    assert new.x[0, 1] == 1.0  # the running job keeps its GPUs


def test_between_rounds_an_arrival_that_would_delay_the_gang_job_waits_and_a_short_one_starts():
    policy = flagship(reserve_gang=True)
    p = gang_waits()
    policy.allocate(p)
    # a tick later: job 3 runs; jobs 4 (3,000 s) and 5 (100 s) arrive, one GPU each; one A100 is free
    later = replace(
        p, job_ids=(0, 1, 2, 3, 4, 5), throughput=np.vstack([p.throughput, [[10.0, 0.0, 0.0], [10.0, 0.0, 0.0]]]),
        steps_remaining=np.array([5_700.0, 16_000.0, 30_000.0, 4_700.0, 30_000.0, 1_000.0]),
        time_since_start=np.array([630.0, 30.0, 30.0, 30.0, 0.0, 0.0]), attained_time=np.array([630.0, 0, 0, 30, 0, 0]),
        submit_time=np.array([0.0, 0.0, 0.0, 0.0, 30.0, 30.0]), current=np.array([1, -1, -1, 0, -1, -1]),
        requested=np.array([1, 2, 0, 0, 0, 0]),
    )  # fmt: skip
    x_round = np.zeros((6, 3))
    x_round[0, 1] = x_round[3, 0] = 1.0
    x = x_round.copy()
    x[4, 0] = x[5, 0] = 1.0  # as mechanism.engine.with_arrivals seats arrivals on free GPUs
    held = policy.between_rounds(later, x_round, x)
    assert held[4].sum() == 0.0  # 3,000 s: past the reserved start (570 s)
    assert held[5, 0] == 1.0  # 100 s: ends before it
    assert held[1, 2] == 1.0  # the gang job itself starts as soon as its four GPUs are free
    assert (flagship().between_rounds(later, x_round, x) == x).all()  # off by default: every policy as before
