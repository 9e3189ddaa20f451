"""Plan search: enumerate, memory-check and time every plan of a job on one GPU type and count, then rank.

This is the resource-sensitivity building block of Rubick (best plan per resource amount) and what a Crius
Cell is estimated with in ``perf.candidates``. It is pure and array-based, so one call covers thousands of
plans in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.compute import ModelTerms
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.memory import GB, MemoryEstimate, estimate_memory
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.plans import PlanSpace, enumerate_plans
from slurmplan.perf.rubick import DEFAULT_CONSTANTS, IterationTime, RubickConstants, predict
from slurmplan.perf.stacks import DEFAULT_STACK, Stack, get_stack

OFFLOAD_MARGIN = 0.02
"""An offload plan ranks first only if more than 2 % faster than the best plan that keeps states on the GPU."""
ZERO_MARGIN = 0.002
"""Per ZeRO stage: a tie-breaker toward less sharding (fewer collectives to go wrong)."""


@dataclass(frozen=True)
class RankedPlan:
    """One feasible plan with its prediction and needs (per GPU unless named otherwise)."""

    plan: Plan
    throughput: float
    t_iter: float
    gpu_memory_gb: float
    host_memory_gb: float
    components: dict[str, float]


@dataclass(frozen=True, eq=False)
class PlanSearch:
    """All plans of one (model, GPU type, GPU count) with memory and timing; ``order`` ranks the feasible ones."""

    model: ModelSpec
    gpu: GpuSpec
    space: PlanSpace
    memory: MemoryEstimate
    timing: IterationTime
    order: np.ndarray
    stack: Stack = DEFAULT_STACK

    @property
    def feasible_count(self) -> int:
        return int(self.order.size)

    def ranked(self, i: int) -> RankedPlan:
        """The i-th best feasible plan."""
        j = int(self.order[i])
        return RankedPlan(
            plan=self.space.plan(j),
            throughput=float(self.timing.throughput[j]),
            t_iter=float(self.timing.t_iter[j]),
            gpu_memory_gb=float(self.memory.total[j] / GB),
            host_memory_gb=float(self.memory.host[j] / GB),
            components=self.timing.components(j),
        )

    def top(self, k: int) -> list[RankedPlan]:
        return [self.ranked(i) for i in range(min(k, self.feasible_count))]

    def best(self) -> RankedPlan | None:
        return self.ranked(0) if self.feasible_count else None

    def best_with_stages(self, stages: int) -> RankedPlan | None:
        """The best feasible plan with exactly ``stages`` pipeline stages (a Crius Cell's stage count)."""
        hits = np.flatnonzero(self.space.pp[self.order] == stages)
        return self.ranked(int(hits[0])) if hits.size else None

    def why_infeasible(self) -> str:
        """Why no plan fits: the reason of the plan that came closest (least GPU memory), or why none exist."""
        if len(self.space) == 0:
            return "no valid plan: the global batch, layers or heads do not divide over these GPUs"
        if self.feasible_count:
            return ""
        closest = int(np.argmin(self.memory.total))
        return f"no plan fits; the smallest ({self.space.plan(closest).short()}) {self.memory.reason(closest)}"


def search_plans(
    model: ModelSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    constants: RubickConstants = DEFAULT_CONSTANTS,
    *,
    stages: int | None = None,
    cpus_per_gpu: float | None = None,
    stack: Stack | str | None = None,
) -> PlanSearch:
    """Every plan on ``gpus`` GPUs of ``gpu`` (node size from the spec), ranked by predicted throughput under
    ``stack`` (default Megatron-LM, ``perf.stacks``)."""
    space = enumerate_plans(model, gpus, global_batch, gpu.gpus_per_node, stages=stages)
    stack = DEFAULT_STACK if stack is None else get_stack(stack)
    memory = estimate_memory(model, space, gpu, stack)
    timing = predict(model, space, gpu, constants, cpus_per_gpu, stack=stack)
    feasible = np.flatnonzero(memory.fits & stack.runs(space))  # only plans the job's framework can run
    # Highest throughput first, but a plan that takes host memory and CPUs (offload) or more sharding must be
    # clearly faster to rank above a simpler one; exact ties go to the plan with less GPU memory.
    simplicity = 1.0 + OFFLOAD_MARGIN * space.offload + ZERO_MARGIN * space.zero_stage
    score = timing.throughput / simplicity
    order = feasible[np.lexsort((memory.total[feasible], -score[feasible]))]
    return PlanSearch(model=model, gpu=gpu, space=space, memory=memory, timing=timing, order=order, stack=stack)


def predict_plan(
    model: ModelSpec,
    gpu: GpuSpec,
    plan: Plan,
    global_batch: int | None = None,
    constants: RubickConstants = DEFAULT_CONSTANTS,
    cpus_per_gpu: float | None = None,
    *,
    stack: Stack | str | None = None,
    terms: ModelTerms | None = None,
) -> float:
    """Predicted samples/s of one given plan (no memory check) under ``stack``, e.g. to compare with a
    measurement."""
    if global_batch is not None and global_batch != plan.global_batch:
        raise ValidationError("global_batch", global_batch, f"dp*micro_batch*grad_accum = {plan.global_batch}")
    space = PlanSpace.from_plans([plan], gpu.gpus_per_node)
    return float(predict(model, space, gpu, constants, cpus_per_gpu, stack=stack, terms=terms).throughput[0])
