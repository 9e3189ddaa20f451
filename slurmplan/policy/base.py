"""The one interface every allocation policy implements, and the configuration it is built from.

A policy is a small class: ``allocate(problem) -> Allocation``. Everything it may need travels in the
``AllocationProblem`` (domain.py), so callers never branch on policy names (Gavel's ``get_policy`` with 23
branches is what this avoids). A policy's knobs come from its YAML file in ``policies/`` and are validated
against the class's ``PARAMS`` before the class is built, so a typo fails at start-up, not mid-simulation.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, ValidationError

log = logging.getLogger(__name__)

SOLVERS: tuple[str, ...] = ("highs", "CLARABEL", "HIGHS", "SCS", "SCIPY", "OSQP")
"""``highs`` = HiGHS called directly through scipy (fast path); the upper-case names go through cvxpy."""


@dataclass(frozen=True)
class PolicyConfig:
    """What a YAML file in ``policies/`` says about one policy.

    ``objective`` picks the policy class; ``params`` are that class's own options (checked against its
    ``PARAMS``). Round settings are not a policy's: the tick's config owns them (``registry.TICK_SETTINGS``).
    """

    name: str
    objective: str
    solver: str = "highs"
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    description: str = ""
    source: str = ""
    """The file it was loaded from ('' when built in code); error messages name it."""


@dataclass(frozen=True)
class Param:
    """One option a policy class accepts: its type, default, and the check an impossible value fails."""

    kind: type | tuple[type, ...]
    default: Any
    allowed: str
    check: Callable[[Any], bool] = lambda _v: True


def positive(v: Any) -> bool:
    return v > 0


def non_negative(v: Any) -> bool:
    return v >= 0


def one_of(*values: str) -> Callable[[Any], bool]:
    return lambda v: v in values


class Policy(ABC):
    """Base of every policy: holds the config, validates params, and offers the common result helpers."""

    objective: ClassVar[str]
    """The ``objective`` value in YAML that selects this class."""
    PARAMS: ClassVar[Mapping[str, Param]] = {}
    TYPE_BLIND: ClassVar[bool] = True
    """With ``aware: false``, spread each job's share over the GPU types it can use (``lp.type_blind``)."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.params = resolve_params(type(self), config.params, config.source or config.name)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def solver(self) -> str:
        return self.config.solver

    @property
    def decides_on_events(self) -> bool:
        """True for a model of plain Slurm, whose main scheduler runs at every submission and completion (and
        backfill every ``bf_interval``), not in rounds: the simulator then makes each of its ticks a round."""
        return False

    @abstractmethod
    def allocate(self, problem: AllocationProblem) -> Allocation:
        """Share of wall-clock time each job should spend in each column of ``problem``."""

    def result(
        self, problem: AllocationProblem, x: np.ndarray, objective: float, status: str = "optimal"
    ) -> Allocation:
        """Wrap a dense x (clipped to [0, 1] against solver round-off) as this policy's Allocation.

        An agnostic policy's x is made type-blind here, whichever optimal split of a job's share between GPU
        types its solver happened to return (see ``lp.type_blind``).
        """
        if self.TYPE_BLIND and self.params.get("aware") is False:
            from slurmplan.policy.lp import type_blind  # lp imports scipy: not at the registry's import

            x = type_blind(problem, x)
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        x[x < 1e-9] = 0.0
        return Allocation(problem.job_ids, problem.cells, x, self.name, float(objective), status)

    def empty(self, problem: AllocationProblem, status: str = "optimal") -> Allocation:
        return self.result(problem, np.zeros((problem.num_jobs, len(problem.cells))), 0.0, status)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, params={dict(self.params)!r})"


def resolve_params(cls: type[Policy], given: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """Defaults merged with ``given``; unknown names, wrong types and impossible values raise ValidationError."""
    out: dict[str, Any] = {k: p.default for k, p in cls.PARAMS.items()}
    for key, value in (given or {}).items():
        spec = cls.PARAMS.get(key)
        if spec is None:
            allowed = ", ".join(sorted(cls.PARAMS)) or "none"
            raise ValidationError(f"params.{key}", value, f"a parameter of {cls.objective!r}: {allowed}", where)
        kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValidationError(f"params.{key}", value, spec.allowed, where)
        if not spec.check(value):
            raise ValidationError(f"params.{key}", value, spec.allowed, where)
        out[key] = value
    return MappingProxyType(out)
