"""Fitting Rubick's 7 constants to measured throughputs, per model type, and refitting online.

Rubick fits ``k_bwd, k_sync, k_opt, k_opt_off, k_off, k_swap, k_const`` by minimising RMSLE over >= 7 measured
(plan, resources, throughput) points, 3 of them with ZeRO-Offload (only those reveal ``k_opt_off``, ``k_off``,
``k_swap``), and refits when new measurements disagree by more than a threshold (the paper gives no value:
slurmplan uses 10 %, above Rubick's 7.4 % average error).

RMSLE here is ``sqrt(mean(log(pred / obs)^2))`` on samples/s: the usual ``log(1 + x)`` form depends on the unit
(samples/s of a 175B model are near 1, where ``log1p`` is almost linear), so the +1 is dropped.

The fit runs in a transformed space (scales as ``exp(u)``, overlap exponents as ``1 + exp(u)``) with scipy's
``least_squares``, and a weak pull (weight ``PRIOR_WEIGHT``) toward the starting constants so that constants the
points do not reveal (e.g. offload ones without offload points) stay at their catalog defaults instead of
drifting.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.rubick import DEFAULT_CONSTANTS, RubickConstants, predict
from slurmplan.perf.stacks import Stack

log = logging.getLogger(__name__)

MIN_POINTS = 7
MIN_OFFLOAD_POINTS = 3
PRIOR_WEIGHT = 0.02
REFIT_THRESHOLD = 0.10
_EXPONENTS = (1, 4, 5)  # k_sync, k_off, k_swap


@dataclass(frozen=True)
class FitPoint:
    """One measurement: ``plan`` ran on GPUs of ``gpu`` (its node shape = the placement) at ``samples_per_s``."""

    model: ModelSpec
    gpu: GpuSpec
    plan: Plan
    samples_per_s: float
    gpu_type: str = ""
    cpus_per_gpu: float | None = None
    stack: Stack | None = None
    """The framework that ran it (None: the fit's own stack): the point is predicted under it."""

    def __post_init__(self) -> None:
        if not (isinstance(self.samples_per_s, int | float) and math.isfinite(self.samples_per_s)) or (
            self.samples_per_s <= 0
        ):
            raise ValidationError("samples_per_s", self.samples_per_s, "a positive number", "measurement")


@dataclass(frozen=True)
class FitResult:
    constants: RubickConstants
    train_error: float
    """RMSLE on the points it was fitted to."""
    mean_error: float
    """Mean |pred - obs| / obs on those points."""
    points: int
    success: bool = True


@dataclass(frozen=True)
class HoldoutReport:
    fit: FitResult
    heldout_mean_error: float
    heldout_max_error: float
    heldout_points: int


def can_fit(points: Sequence[FitPoint]) -> bool:
    """Rubick's data rule: >= 7 points, and >= 3 of them with offload if any point uses offload."""
    offload = sum(1 for p in points if p.plan.offload)
    return len(points) >= MIN_POINTS and (offload == 0 or offload >= MIN_OFFLOAD_POINTS)


class _Batch:
    """Points grouped by (model, GPU spec, global batch, cpus) so each group is one vectorized predict."""

    def __init__(self, points: Sequence[FitPoint], stack: Stack | None = None) -> None:
        self.stack = stack
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(points):
            stack = p.stack if p.stack is not None else self.stack
            groups.setdefault((p.model, p.gpu, p.plan.global_batch, p.cpus_per_gpu, stack), []).append(i)
        self.groups = [
            (key, np.array(idx), PlanSpace.from_plans([points[i].plan for i in idx], key[1].gpus_per_node))
            for key, idx in groups.items()
        ]
        self.observed = np.array([p.samples_per_s for p in points], dtype=float)

    def predict(self, constants: RubickConstants) -> np.ndarray:
        out = np.empty(self.observed.size)
        for (model, gpu, _batch, cpus, stack), idx, space in self.groups:
            out[idx] = predict(model, space, gpu, constants, cpus, stack=stack).throughput
        return out


def _to_constants(u: np.ndarray) -> RubickConstants:
    values = np.exp(np.clip(u, -40.0, 40.0))
    for i in _EXPONENTS:
        values[i] = 1.0 + values[i]
    return RubickConstants(*map(float, values))


def _to_u(c: RubickConstants) -> np.ndarray:
    values = c.as_array().copy()
    for i in _EXPONENTS:
        values[i] = max(values[i] - 1.0, 1e-6)
    return np.log(np.maximum(values, 1e-12))


def errors(points: Sequence[FitPoint], constants: RubickConstants) -> np.ndarray:
    """Relative errors |pred - obs| / obs per point."""
    batch = _Batch(points)
    return np.abs(batch.predict(constants) - batch.observed) / batch.observed


def rmsle(predicted: np.ndarray, observed: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.log(predicted / observed) ** 2)))


def fit_constants(
    points: Sequence[FitPoint], initial: RubickConstants = DEFAULT_CONSTANTS, *, stack: Stack | None = None
) -> FitResult:
    """Least-RMSLE constants for ``points`` (all of one model type, run under ``stack``). Needs
    ``can_fit(points)``."""
    if not can_fit(points):
        offload = sum(1 for p in points if p.plan.offload)
        raise ValidationError(
            "measurements",
            f"{len(points)} points ({offload} with offload)",
            f">= {MIN_POINTS} points, >= {MIN_OFFLOAD_POINTS} with offload when offload is used",
            "fit",
        )
    batch = _Batch(points, stack)
    u0 = _to_u(initial)
    scale = math.sqrt(len(points))

    def residuals(u: np.ndarray) -> np.ndarray:
        pred = batch.predict(_to_constants(u))
        fit_part = np.log(np.maximum(pred, 1e-300) / batch.observed)
        return np.concatenate([fit_part, PRIOR_WEIGHT * scale * (u - u0) / 10.0])

    from scipy.optimize import least_squares  # here, not at import: `slurmplan --help` stays light

    best = None
    for start in (u0, u0 + np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]), u0 - 0.5):
        res = least_squares(residuals, start, method="trf", x_scale=1.0, max_nfev=400)
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    constants = _to_constants(best.x)
    pred = batch.predict(constants)
    result = FitResult(
        constants=constants,
        train_error=rmsle(pred, batch.observed),
        mean_error=float(np.mean(np.abs(pred - batch.observed) / batch.observed)),
        points=len(points),
        success=bool(best.success),
    )
    log.info("fit %d points: rmsle %.4f mean error %.2f%%", len(points), result.train_error, 100 * result.mean_error)
    return result


def fit_with_holdout(points: Sequence[FitPoint], holdout: float = 0.3, seed: int = 0) -> HoldoutReport:
    """Fit on a random part of the points and report the error on the rest (Rubick's Table 2 protocol).

    The training part keeps Rubick's data rule (offload points are split proportionally).
    """
    if not 0 < holdout < 1:
        raise ValidationError("holdout", holdout, "a fraction in (0, 1)", "fit")
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(points))
    off = [i for i in idx if points[i].plan.offload]
    on = [i for i in idx if not points[i].plan.offload]
    n_off_test = int(round(len(off) * holdout)) if len(off) > MIN_OFFLOAD_POINTS else 0
    n_on_test = int(round(len(on) * holdout))
    test = off[:n_off_test] + on[:n_on_test]
    train = off[n_off_test:] + on[n_on_test:]
    if not test:
        raise ValidationError("measurements", len(points), "enough points to hold some out", "fit")
    result = fit_constants([points[i] for i in train])
    err = errors([points[i] for i in test], result.constants)
    return HoldoutReport(result, float(err.mean()), float(err.max()), len(test))


@dataclass
class FitStore:
    """Fitted constants per model type, refitted when new measurements disagree (Rubick's online refit).

    Mutable on purpose: it accumulates a job type's measurements over its life (one per daemon/simulator).
    """

    threshold: float = REFIT_THRESHOLD
    points: dict[str, list[FitPoint]] = field(default_factory=dict)
    fits: dict[str, FitResult] = field(default_factory=dict)
    refits: dict[str, int] = field(default_factory=dict)

    def constants(self, model_type: str) -> RubickConstants | None:
        fit = self.fits.get(model_type)
        return fit.constants if fit else None

    def observe(self, model_type: str, new: Sequence[FitPoint]) -> FitResult | None:
        """Add points; fit the first time the data rule is met, refit when the new points' mean error is above
        the threshold. Returns the fit now in force (None if none yet)."""
        known = self.points.setdefault(model_type, [])
        known.extend(new)
        current = self.fits.get(model_type)
        if current is not None and new:
            err = float(errors(new, current.constants).mean())
            if err <= self.threshold:
                return current
            log.info("%s: error %.1f%% on new points > %.1f%%: refit", model_type, 100 * err, 100 * self.threshold)
        if not can_fit(known):
            return current
        start = current.constants if current else RubickConstants()
        self.fits[model_type] = fit_constants(known, start)
        self.refits[model_type] = self.refits.get(model_type, 0) + 1
        return self.fits[model_type]
