"""Rubick's resource-sensitivity curves: the best plan's throughput as one resource varies (rubick.md 3).

For each amount of a resource (GPUs of one type, or CPUs per GPU with the GPU count fixed) the feasible plans
are enumerated and the best kept. The GPU curve stays flat over counts where no plan is valid or where fewer
GPUs do better ("the best throughput reachable within the range"), so it never decreases. The slope between two
amounts is what Rubick's policy compares between jobs; ``min_gpus_for`` is its minRes on the GPU axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.rubick import DEFAULT_CONSTANTS, RubickConstants
from slurmplan.perf.search import search_plans


@dataclass(frozen=True)
class CurvePoint:
    amount: float
    """GPUs, or CPUs per GPU for the CPU curve."""
    throughput: float
    """Samples/s of the best plan at most this amount allows (0: nothing fits)."""
    plan: Plan | None
    gpus_used: int = 0


def gpu_curve(
    model: ModelSpec,
    gpu: GpuSpec,
    global_batch: int,
    max_gpus: int,
    constants: RubickConstants = DEFAULT_CONSTANTS,
) -> tuple[CurvePoint, ...]:
    """Best throughput with 1..max_gpus GPUs of ``gpu`` (non-decreasing: a larger count may use fewer GPUs)."""
    if not isinstance(max_gpus, int) or max_gpus < 1:
        raise ValidationError("max_gpus", max_gpus, "a positive integer", "sensitivity")
    points: list[CurvePoint] = []
    best = CurvePoint(0, 0.0, None)
    for g in range(1, max_gpus + 1):
        ranked = search_plans(model, gpu, g, global_batch, constants).best()
        if ranked is not None and ranked.throughput > best.throughput:
            best = CurvePoint(g, ranked.throughput, ranked.plan, g)
        points.append(CurvePoint(g, best.throughput, best.plan, best.gpus_used))
    return tuple(points)


def cpu_curve(
    model: ModelSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    cpus_per_gpu: tuple[float, ...],
    constants: RubickConstants = DEFAULT_CONSTANTS,
) -> tuple[CurvePoint, ...]:
    """Best throughput on ``gpus`` GPUs as the CPUs per GPU vary (matters for ZeRO-Offload plans)."""
    out = []
    for c in cpus_per_gpu:
        if not c > 0:
            raise ValidationError("cpus_per_gpu", c, "positive numbers", "sensitivity")
        ranked = search_plans(model, gpu, gpus, global_batch, constants, cpus_per_gpu=c).best()
        out.append(CurvePoint(c, ranked.throughput if ranked else 0.0, ranked.plan if ranked else None, gpus))
    return tuple(out)


def slope(curve: tuple[CurvePoint, ...], at: int) -> float:
    """Throughput gained per unit of resource going from point ``at`` to the next one (0 at the end)."""
    if not 0 <= at < len(curve):
        raise ValidationError("at", at, f"an index into the curve (0..{len(curve) - 1})", "sensitivity")
    if at == len(curve) - 1:
        return 0.0
    a, b = curve[at], curve[at + 1]
    return (b.throughput - a.throughput) / (b.amount - a.amount)


def min_gpus_for(curve: tuple[CurvePoint, ...], throughput: float) -> CurvePoint | None:
    """Rubick's minRes on the GPU axis: the fewest GPUs whose best plan reaches ``throughput``."""
    for point in curve:
        if point.throughput >= throughput * (1 - 1e-9):
            return point
    return None
