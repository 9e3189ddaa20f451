"""Turning a model's measurements into what the candidate search uses: constants, ratios, measured Cells.

Three levels, from most to least data (DESIGN: every figure has a source):
- a measured Cell (same GPU type, count and stage count) reports its best measured plan: MEASURED;
- with enough points for Rubick's fit (>= 7, >= 3 with offload when any uses offload) the 7 constants are fitted
  per model type: FITTED;
- with fewer points, the catalog estimate is scaled by the measured/predicted ratio (geometric mean) of the same
  GPU type, or of all types when that type has none: FITTED.
Without measurements the catalog estimate stands: ESTIMATED.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import median

from slurmplan.domain import Cell, GpuType, Plan, ThroughputSource, ValidationError
from slurmplan.perf.fit import FitPoint, can_fit, fit_constants
from slurmplan.perf.hardware import default_catalog, with_node_shape
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.rubick import RubickConstants
from slurmplan.perf.search import predict_plan
from slurmplan.perf.stacks import Stack, get_stack

log = logging.getLogger(__name__)

MeasuredRow = tuple[GpuType, int, Plan, float, int, str | None]
"""(gpu_type, gpus, plan, samples_per_s, nodes, stack), the hashable part of a Measurement; ``stack`` is the
framework that ran it (``perf.stacks`` name; None: not said)."""


def _row_stack(row: MeasuredRow) -> Stack | None:
    return get_stack(row[5]) if row[5] else None


@dataclass(frozen=True)
class Calibration:
    constants: RubickConstants = RubickConstants()
    ratios: Mapping[GpuType, float] = field(default_factory=dict)
    overall_ratio: float = 1.0
    source: ThroughputSource = ThroughputSource.ESTIMATED
    cells: Mapping[tuple[GpuType, int, int], tuple[Plan, float]] = field(default_factory=dict)
    fit_error: float | None = None

    def ratio(self, gpu_type: GpuType) -> float:
        return self.ratios.get(gpu_type, self.overall_ratio)

    def measured(self, cell: Cell) -> tuple[Plan, float] | None:
        """The best measured (plan, samples/s) of exactly this Cell, if any."""
        return self.cells.get((cell.gpu_type, cell.gpus, cell.stages))


def fit_points(model: ModelSpec, rows: tuple[MeasuredRow, ...]) -> list[FitPoint]:
    """Rows as fit points, resolving GPU types through the catalog (unknown types are skipped)."""
    catalog = default_catalog()
    points = []
    for row in rows:
        gpu_type, gpus, plan, sps, nodes, _stack = row
        name = catalog.resolve(gpu_type)
        if name is None:
            log.warning("measurement on unknown gpu type %r ignored", gpu_type)
            continue
        typical = catalog.get(name)
        gpn = max(1, math.ceil(gpus / max(nodes, 1)))  # the placement measured: GPUs per node used
        spec = with_node_shape(typical, gpn)
        cpus = typical.cpus_per_node / typical.gpus_per_node  # the job's CPU share, not the whole node's
        point = FitPoint(model, spec, plan, sps, gpu_type=gpu_type, cpus_per_gpu=cpus, stack=_row_stack(row))
        points.append(point)
    return points


def _measured_cells(rows: tuple[MeasuredRow, ...]) -> dict[tuple[GpuType, int, int], tuple[Plan, float]]:
    by_plan: dict[tuple[GpuType, int, Plan], list[float]] = {}
    for gpu_type, gpus, plan, sps, _nodes, _stack in rows:
        by_plan.setdefault((gpu_type, gpus, plan), []).append(sps)
    cells: dict[tuple[GpuType, int, int], tuple[Plan, float]] = {}
    for (gpu_type, gpus, plan), values in by_plan.items():
        key = (gpu_type, gpus, plan.pp)
        value = median(values)
        if key not in cells or cells[key][1] < value:
            cells[key] = (plan, value)
    return cells


@lru_cache(maxsize=1024)
def calibrate(model: ModelSpec, rows: tuple[MeasuredRow, ...], stack: Stack | None = None) -> Calibration:
    """The calibration for one model from its measurement rows (see the module docstring), for a job under
    ``stack`` (default: ``perf.stacks.DEFAULT_STACK``). Each row is predicted under the framework that ran it
    (the job's own where the row does not say), so neither the fitted constants nor the ratios absorb a framework:
    a job's reports from the launcher's trainer (``ddp``) correct its Megatron prediction only by what the model
    got wrong. A measured Cell stands only for rows of the job's stack or of none said."""
    if not rows:
        return Calibration()
    cells = _measured_cells(tuple(r for r in rows if stack is None or _row_stack(r) in (None, stack)))
    points = fit_points(model, rows)
    if can_fit(points):
        try:
            result = fit_constants(points, stack=stack)
            return Calibration(
                constants=result.constants, source=ThroughputSource.FITTED, cells=cells, fit_error=result.train_error
            )
        except ValidationError as exc:
            log.warning("fit for %s failed (%s); using ratios", model.name, exc)
    logs: dict[GpuType, list[float]] = {}
    for point in points:
        ran = point.stack if point.stack is not None else stack
        predicted = predict_plan(point.model, point.gpu, point.plan, cpus_per_gpu=point.cpus_per_gpu, stack=ran)
        if predicted > 0:
            logs.setdefault(point.gpu_type, []).append(math.log(point.samples_per_s / predicted))
    if not logs:
        return Calibration(cells=cells)
    ratios = {t: math.exp(sum(v) / len(v)) for t, v in logs.items()}
    every = [x for v in logs.values() for x in v]
    return Calibration(
        ratios=ratios, overall_ratio=math.exp(sum(every) / len(every)), source=ThroughputSource.FITTED, cells=cells
    )
