"""Objective name -> policy class: the only table of policies (YAML's ``objective`` picks from it)."""

from __future__ import annotations

from slurmplan.policy.base import Policy
from slurmplan.policy.fifo import Fifo
from slurmplan.policy.las import MaxMinFairness

_CLASSES: tuple[type[Policy], ...] = (MaxMinFairness, Fifo)

POLICY_CLASSES: dict[str, type[Policy]] = {cls.objective: cls for cls in _CLASSES}
