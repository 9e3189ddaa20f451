"""Slurm's QOS in the round (issue 26): a running job is stopped or shrunk only for jobs Slurm would let preempt
it: its own QOS, or a QOS of at least its priority whose Preempt list names it (``mechanism/qos.py``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from slurmplan.domain import AllocationProblem, Cell, Reason
from slurmplan.mechanism.priorities import priorities
from slurmplan.mechanism.qos import displaces
from slurmplan.mechanism.round import RunningInfo, plan_round
from slurmplan.tick import TickConfig

RULES = {"high": (1000, ("normal",)), "normal": (0, ()), "gpu2": (0, ())}
CELLS = (Cell("a100", 4), Cell("a100", 2))


def _round(qos: tuple[str, str], x: list[list[float]], rules=RULES):
    """Row 0 runs on all 4 a100s; row 1 waits. The policy's X (and so the priorities) favour row 1."""
    p = AllocationProblem((1, 2), CELLS, np.array([[40.0, 20.0], [40.0, 20.0]]), {"a100": 4})
    xa = np.array(x)
    pri = priorities(xa, np.array([[1.0, 0.0], [0.0, 0.0]]))
    info = RunningInfo(np.array([True, False]), np.array([0, -1]), np.zeros(2, bool), np.full(2, 3600.0), qos=qos)
    # without Slurm's requeue wait (121 s by default), which turns a same-type shrink into a stop (test_placement)
    return plan_round(p, xa, pri, info, replace(TickConfig(requeue_delay_s=0.0), qos_preemption=rules))


def test_a_running_job_is_not_stopped_for_a_job_of_a_lower_or_unrelated_qos():
    stop = [[0.0, 0.0], [1.0, 0.0]]  # X: the waiting job takes all 4 GPUs
    assert _round(("normal", "normal"), stop).col.tolist() == [-1, 0], "same QOS: the daemon's own business"
    assert _round(("normal", "normal"), stop, rules={}).reason[0] is Reason.PREEMPTED
    assert _round(("normal", "high"), stop).col.tolist() == [-1, 0], "high may preempt normal (its Preempt list)"
    kept = _round(("high", "normal"), stop)
    assert kept.col.tolist() == [0, -1] and kept.reason[0] is Reason.KEPT, "never high for normal"
    assert kept.reason[1] is Reason.WAITING
    assert (
        kept.detail[1]
        == "waits: the GPUs it could use are held by running jobs of QOS high, which its QOS normal may not preempt"
    )
    assert _round(("gpu2", "normal"), stop).col.tolist() == [0, -1], "no Preempt list names gpu2: protected"
    assert _round(("high", "normal"), stop, rules={}).col.tolist() == [-1, 0], "no rules: as before"


def test_a_running_job_is_not_shrunk_for_a_job_of_a_lower_qos():
    shrink = [[0.0, 1.0], [0.0, 1.0]]  # X: both on 2 GPUs, the running one shrunk from 4
    same = _round(("normal", "normal"), shrink)
    assert same.col.tolist() == [1, 1] and same.reason[0] is Reason.RESIZED
    kept = _round(("high", "normal"), shrink)
    assert kept.col.tolist() == [0, -1] and kept.reason[0] is Reason.KEPT
    assert "its QOS high is not preempted for jobs of the other QOS here" in kept.detail[0]


def test_who_may_displace_whom():
    names = ("gpu2", "high", "normal")
    d = displaces(names, RULES)
    assert d.tolist() == [[True, False, False], [False, True, True], [False, False, True]]
    # a QOS of lower priority never displaces a higher one, even when its Preempt list names it
    assert not displaces(("high", "odd"), {"high": (1000, ()), "odd": (1, ("high",))})[1, 0]
