"""Objective name -> policy class: the only table of policies (YAML's ``objective`` picks from it)."""

from __future__ import annotations

from slurmplan.policy.base import Policy
from slurmplan.policy.cost import MinCost
from slurmplan.policy.crius import Crius
from slurmplan.policy.easyscale import EasyScale
from slurmplan.policy.fifo import Fifo, ShortestJobFirst
from slurmplan.policy.finish_time import FinishTimeFairness
from slurmplan.policy.flagship import Slurmplan
from slurmplan.policy.hierarchical import Hierarchical
from slurmplan.policy.las import MaxMinFairness
from slurmplan.policy.makespan import MinMakespan
from slurmplan.policy.rubick import Rubick
from slurmplan.policy.throughput import MaxTotalThroughput

_CLASSES: tuple[type[Policy], ...] = (
    MaxMinFairness,
    Fifo,
    ShortestJobFirst,
    FinishTimeFairness,
    MinMakespan,
    MaxTotalThroughput,
    MinCost,
    Hierarchical,
    Rubick,
    Crius,
    EasyScale,
    Slurmplan,
)

POLICY_CLASSES: dict[str, type[Policy]] = {cls.objective: cls for cls in _CLASSES}
