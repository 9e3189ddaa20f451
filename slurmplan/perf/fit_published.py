"""``slurmplan fit --published``: the model's global constants fitted to the published dataset.

The five ``ModelTerms`` (GEMM efficiency and traffic, element-wise traffic, launch latency, network efficiency)
and Rubick's seven constants are fitted together by least RMSLE over every fitted row (``perf.published``), as
Rubick fits its constants: ``sqrt(mean(log(predicted / published)^2))``, with a weak pull toward the starting
values so constants no row reveals stay put. One set of constants serves every model, GPU and stack: nothing is
fitted per table or per model. The result is written as a constants file (``data/perf_constants.yaml`` ships the
fit of the shipped dataset); the online refit from the launcher's reports (``perf.fit.FitStore``) starts from its
Rubick constants and fits a model type's own on top, with the terms held.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

from slurmplan.domain import ValidationError
from slurmplan.perf.compute import ModelTerms
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.published import PublishedRow, Run, predicted_value
from slurmplan.perf.rubick import RubickConstants, predict

log = logging.getLogger(__name__)

PRIOR_WEIGHT = 0.02
START_TERMS = ModelTerms()
START_RUBICK = RubickConstants()
_FRACTIONS = (0, 4)  # gemm_efficiency, network_efficiency: logistic transform
_EXPONENTS = (5 + 1, 5 + 4, 5 + 5)  # k_sync, k_off, k_swap: 1 + exp(u)
_N_TERMS = len(ModelTerms.names())


@dataclass(frozen=True)
class PublishedFit:
    terms: ModelTerms
    rubick: RubickConstants
    rmsle: float
    mean_error: float
    rows: int
    success: bool = True


def _to_params(u: np.ndarray) -> tuple[ModelTerms, RubickConstants]:
    values = np.exp(np.clip(u, -30.0, 30.0))
    for i in _FRACTIONS:
        values[i] = 1.0 / (1.0 + math.exp(-float(np.clip(u[i], -30.0, 30.0))))
    for i in _EXPONENTS:
        values[i] = 1.0 + values[i]
    return ModelTerms(*map(float, values[:_N_TERMS])), RubickConstants(*map(float, values[_N_TERMS:]))


def _to_u(terms: ModelTerms, rubick: RubickConstants) -> np.ndarray:
    values = np.concatenate([terms.as_array(), rubick.as_array()])
    u = np.log(np.maximum(values, 1e-9))
    for i in _FRACTIONS:
        x = min(max(values[i], 1e-6), 1 - 1e-6)
        u[i] = math.log(x / (1 - x))
    for i in _EXPONENTS:
        u[i] = math.log(max(values[i] - 1.0, 1e-6))
    return u


class _Rows:
    """The fitted rows with their plan spaces built once (each fit evaluates them thousands of times)."""

    def __init__(self, rows: Sequence[PublishedRow]) -> None:
        if not rows:
            raise ValidationError("rows", 0, "at least one fitted row", "fit --published")
        self.rows = tuple(rows)
        self.observed = np.array([r.value for r in rows])
        self.spaces = [(self._space(r.run), self._space(r.baseline) if r.baseline is not None else None) for r in rows]

    @staticmethod
    def _space(run: Run) -> PlanSpace:
        return PlanSpace.from_plans([run.plan], run.gpu.gpus_per_node)

    def _sps(self, row: PublishedRow, run: Run, space: PlanSpace, terms: ModelTerms, k: RubickConstants) -> float:
        timing = predict(row.model, space, run.gpu, k, run.cpus_per_gpu, stack=run.stack, terms=terms)
        return float(timing.throughput[0])

    def predict(self, terms: ModelTerms, rubick: RubickConstants) -> np.ndarray:
        out = np.empty(len(self.rows))
        for i, (row, (space, base_space)) in enumerate(zip(self.rows, self.spaces, strict=True)):
            main = self._sps(row, row.run, space, terms, rubick)
            base = None
            if row.baseline is not None and base_space is not None:
                base = self._sps(row, row.baseline, base_space, terms, rubick)
            out[i] = predicted_value(row, main, base)
        return out


def predict_rows(
    rows: Sequence[PublishedRow], terms: ModelTerms | None = None, rubick: RubickConstants | None = None
) -> np.ndarray:
    """The model's figure for each row, in the row's unit (defaults: the constants in force)."""
    from slurmplan.perf.rubick import published_constants

    default_terms, default_rubick = published_constants()
    return _Rows(rows).predict(terms or default_terms, rubick or default_rubick)


def fit_published(
    rows: Sequence[PublishedRow], start: tuple[ModelTerms, RubickConstants] = (START_TERMS, START_RUBICK)
) -> PublishedFit:
    """Least-RMSLE global constants for the fitted ``rows`` (rows with ``fit: false`` must be left out)."""
    if any(not r.fit for r in rows):
        raise ValidationError("rows", [r.id for r in rows if not r.fit][:3], "only rows with fit: true", "fit")
    batch = _Rows(rows)
    u0 = _to_u(*start)
    scale = math.sqrt(len(rows))

    def residuals(u: np.ndarray) -> np.ndarray:
        pred = batch.predict(*_to_params(u))
        fit_part = np.log(np.maximum(pred, 1e-300) / batch.observed)
        return np.concatenate([fit_part, PRIOR_WEIGHT * scale * (u - u0) / 10.0])

    best = None
    for offset in (0.0, 0.3, -0.3):
        res = least_squares(residuals, u0 + offset, method="trf", x_scale=1.0, max_nfev=300)
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    terms, rubick = _to_params(best.x)
    pred = batch.predict(terms, rubick)
    ratio = pred / batch.observed
    result = PublishedFit(
        terms=terms,
        rubick=rubick,
        rmsle=float(np.sqrt(np.mean(np.log(ratio) ** 2))),
        mean_error=float(np.mean(np.abs(ratio - 1.0))),
        rows=len(rows),
        success=bool(best.success),
    )
    log.info("published fit, %d rows: rmsle %.4f mean error %.2f%%", len(rows), result.rmsle, 100 * result.mean_error)
    return result


def write_constants(path: str | Path, fit: PublishedFit, dataset: str) -> None:
    """A constants file ``rubick.load_constants_file`` reads back (and ``SLURMPLAN_PERF_CONSTANTS`` may name)."""
    body = {
        "fitted": {
            "by": "slurmplan fit --published",
            "dataset": dataset,
            "rows": fit.rows,
            "rmsle": round(fit.rmsle, 5),
            "mean_error": round(fit.mean_error, 5),
            "date": _dt.date.today().isoformat(),
        },
        "terms": {k: round(float(v), 6) for k, v in zip(ModelTerms.names(), fit.terms.as_array(), strict=True)},
        "rubick": {k: round(float(v), 6) for k, v in zip(RubickConstants.names(), fit.rubick.as_array(), strict=True)},
    }
    header = "# Performance-model constants fitted to published measurements (slurmplan fit --published).\n"
    Path(path).write_text(header + yaml.safe_dump(body, sort_keys=False))
