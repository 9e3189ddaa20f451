"""Mixed GPU types in one data-parallel job: EasyScale's Eq. 1 and the best worker-to-GPU assignment.

An EasyScale job has maxP logical workers (ESTs) fixed for its life; a GPU of type i runs A_i of them one after
another per global step, at C_i mini-batches per second. The step waits for the slowest GPU
(``f = max_i A_i / C_i`` seconds), so (easyscale.md 4):

    (1a) nEST = sum_i N_i A_i >= maxP
    (1b) f_overload = max_{i: N_i > 0} A_i / C_i
    (1c) waste = sum_i N_i (C_i - A_i / f) + (nEST - maxP) / f      (weighted by N_i; the paper prints no N_i)
    (1d) throughput = sum_i N_i C_i - waste = maxP / f              mini-batches per second

The best assignment minimises f under (1a): for a candidate f, A_i = floor(f C_i); the smallest f among the
values a / C_i that covers maxP is optimal, since coverage only grows with f.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from slurmplan.domain import GpuType, ValidationError
from slurmplan.perf.hardware import default_catalog
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.search import search_plans


@dataclass(frozen=True)
class MixedAssignment:
    assignment: Mapping[GpuType, int]
    """ESTs per GPU of each type (A_i); 0 leaves that type idle."""
    step_time: float
    """f_overload: seconds per global step."""
    throughput: float
    """Mini-batches (EST local steps) per second, Eq. 1d."""
    waste: float


def _check(counts: Mapping[GpuType, int], rates: Mapping[GpuType, float], max_p: int) -> None:
    if not isinstance(max_p, int) or isinstance(max_p, bool) or max_p < 1:
        raise ValidationError("max_p", max_p, "a positive integer (logical workers)", "easyscale")
    for t, n in counts.items():
        if not isinstance(n, int) or n < 0:
            raise ValidationError("counts", {t: n}, "non-negative GPU counts", "easyscale")
        if n and (t not in rates or not rates[t] > 0 or not math.isfinite(rates[t])):
            raise ValidationError("rates", {t: rates.get(t)}, "a positive mini-batch rate per used type", "easyscale")
    if not any(counts.values()):
        raise ValidationError("counts", dict(counts), "at least one GPU", "easyscale")


def easyscale_throughput(
    counts: Mapping[GpuType, int], rates: Mapping[GpuType, float], assignment: Mapping[GpuType, int], max_p: int
) -> MixedAssignment:
    """Eq. 1 for a given assignment (``assignment[t]`` ESTs on each GPU of type t)."""
    _check(counts, rates, max_p)
    used = {t: n for t, n in counts.items() if n > 0}
    n_est = sum(n * assignment.get(t, 0) for t, n in used.items())
    if n_est < max_p:
        raise ValidationError("assignment", dict(assignment), f"room for max_p={max_p} ESTs (has {n_est})", "easyscale")
    f = max(assignment.get(t, 0) / rates[t] for t in used)
    waste = sum(n * (rates[t] - assignment.get(t, 0) / f) for t, n in used.items()) + (n_est - max_p) / f
    throughput = sum(n * rates[t] for t, n in used.items()) - waste
    return MixedAssignment(dict(assignment), f, throughput, waste)


def best_assignment(counts: Mapping[GpuType, int], rates: Mapping[GpuType, float], max_p: int) -> MixedAssignment:
    """The assignment with the shortest global step (highest Eq. 1 throughput); slow types may get 0 ESTs."""
    _check(counts, rates, max_p)
    used = {t: n for t, n in counts.items() if n > 0}
    steps = sorted({a / rates[t] for t in used for a in range(1, max_p + 1)})
    for f in steps:
        assignment = {t: int(math.floor(f * rates[t] * (1 + 1e-12))) for t in used}
        if sum(n * assignment[t] for t, n in used.items()) >= max_p:
            return easyscale_throughput(counts, rates, assignment, max_p)
    raise AssertionError("unreachable: f = max_p / min rate always covers max_p")


def single_gpu_rates(model: ModelSpec, gpu_types: list[GpuType], global_batch: int, max_p: int) -> dict[GpuType, float]:
    """C_i from the performance model: mini-batches/s one GPU of each type runs, a mini-batch being one EST's
    share ``global_batch / max_p`` of the global batch (its best single-GPU plan). Types where it does not
    fit get no entry."""
    if global_batch % max_p:
        raise ValidationError("global_batch", global_batch, f"a multiple of max_p={max_p}", "easyscale")
    share = global_batch // max_p
    rates: dict[GpuType, float] = {}
    catalog = default_catalog()
    for t in gpu_types:
        best = search_plans(model, catalog.get(t), 1, share).best()
        if best is not None:
            rates[t] = best.throughput / share
    return rates
