"""Candidates for a job whose model slurmplan does not know: no ``model`` hint, or a name not in the catalog.

A researcher's own network is never in the model catalog, and holding such a job forever (as before) leaves
GPUs idle. Gavel schedules a job it has not profiled from a default and replaces that by measured throughput once
the job runs; slurmplan does the same, and ``explain`` names the source:

* ``measured``: the job's model name has reports (the launcher writes the job's ``model`` hint as the report's
  model) on exactly this GPU type and count;
* ``fitted``: reports on other Cells, scaled by the GPU types' peak half-precision FLOP/s and linearly in the
  GPU count (the measured per-GPU rate of the fastest report is the anchor);
* ``default``: no report yet: ``GPUs x peak fp16 TFLOP/s`` of the type, a relative figure (units of TFLOP/s,
  not samples/s) that ranks the Cells of this job the way a compute-bound data-parallel job would (faster types
  first, more GPUs better in proportion). Policies compare a job's throughputs with each other (normalised
  per job), so the unit does not bias one job against another.

The plan is pure data parallelism over the Cell's GPUs (``dp = GPUs``), the only layout a launcher can apply to
an unknown model; GPU memory is not modelled (the job's own request said it fits). The GPU counts follow the
same rule as known models (``candidates.count_range``): a job that did not say it is elastic keeps its count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmplan.domain import Candidate, Cell, GpuType, Hints, Measurement, Plan, ThroughputSource

if TYPE_CHECKING:
    from slurmplan.perf.candidates import TypeShape
    from slurmplan.perf.hardware import GpuSpec


def _rates(model: str | None, measurements: Sequence[Measurement]) -> dict[tuple[GpuType, int], float]:
    """The newest measured samples/s per (GPU type, GPU count) of ``model`` (single-node-or-not alike)."""
    out: dict[tuple[GpuType, int], float] = {}
    if model is None:
        return out
    for m in measurements:
        if m.model == model and m.samples_per_s > 0:
            out[(m.gpu_type.lower(), m.gpus)] = float(m.samples_per_s)
    return out


def _anchor(rates: dict[tuple[GpuType, int], float], specs: dict[GpuType, GpuSpec]) -> float | None:
    """Measured samples/s per GPU per peak TFLOP/s, from the report with the highest per-GPU rate."""
    best = None
    for (gpu_type, gpus), rate in rates.items():
        spec = specs.get(gpu_type)
        if spec is not None and spec.fp16_tflops > 0:
            value = rate / gpus / spec.fp16_tflops
            best = value if best is None else max(best, value)
    return best


def unknown_model_candidates(
    hints: Hints,
    shapes: Sequence[TypeShape],
    specs: dict[GpuType, GpuSpec],
    counts: tuple[int, int, int],
    measurements: Sequence[Measurement] = (),
) -> tuple[Candidate, ...]:
    """Cells of every allowed GPU type at the job's GPU counts, priced as the module says.

    ``specs`` maps the cluster's GPU types to their catalog entries (types without one are skipped, as for known
    models); ``counts`` is (requested, min, max) from ``candidates.count_range``.
    """
    from slurmplan.perf.candidates import gpu_counts, plan_needs

    requested, low, high = counts
    rates = _rates(hints.model, measurements)
    anchor = _anchor(rates, specs)
    out = []
    for shape in shapes:
        spec = specs.get(shape.gpu_type)
        if spec is None or (hints.gpu_types and shape.gpu_type not in hints.gpu_types):
            continue
        for n in gpu_counts(requested, low, high, shape.total_gpus):
            if (shape.gpu_type, n) in rates:
                source, value = ThroughputSource.MEASURED, rates[(shape.gpu_type, n)]
            elif anchor is not None:
                source, value = ThroughputSource.FITTED, anchor * n * spec.fp16_tflops
            else:
                source, value = ThroughputSource.DEFAULT, float(n * spec.fp16_tflops)
            plan = Plan(dp=n)
            cpus, _ = plan_needs(plan, spec, n, 0.0)
            nodes = math.ceil(n / max(1, shape.gpus_per_node))
            out.append(Candidate(Cell(shape.gpu_type, n), value, plan=plan, source=source, nodes=nodes, cpus=cpus))
    return tuple(out)
