"""One shape for the model's fitted constants: ``ModelTerms`` (``perf.compute``) and ``RubickConstants``
(``perf.rubick``) are both frozen dataclasses of floats that ``fit``/``fit --published`` turn into arrays and
back, and both refuse values no fit could mean (negative, infinite, a fraction outside (0, 1], an overlap
exponent below 1). The checks and conversions live here once."""

from __future__ import annotations

from dataclasses import astuple, fields
from typing import ClassVar

import numpy as np

from slurmplan.domain import ValidationError


class FittedConstants:
    """Mixin for a frozen dataclass of fitted constants; subclasses name their fractions and exponents."""

    WHERE: ClassVar[str] = "constants"
    FRACTIONS: ClassVar[tuple[str, ...]] = ()
    """Fields that must lie in (0, 1]."""
    EXPONENTS: ClassVar[tuple[str, ...]] = ()
    """Fields that must be >= 1 (overlap exponents)."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not np.isfinite(value) or value < 0:
                raise ValidationError(f.name, value, "a finite non-negative number", self.WHERE)
        for name in self.FRACTIONS:
            if not 0 < getattr(self, name) <= 1:
                raise ValidationError(name, getattr(self, name), "a fraction in (0, 1]", self.WHERE)
        for name in self.EXPONENTS:
            if getattr(self, name) < 1:
                raise ValidationError(name, getattr(self, name), ">= 1 (an overlap exponent)", self.WHERE)

    def as_array(self) -> np.ndarray:
        return np.array(astuple(self), dtype=float)  # type: ignore[call-overload]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
