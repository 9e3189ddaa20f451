"""The memory model: GPU and host bytes per GPU for every plan, and why a plan does not fit.

Rubick leans on DeepSpeed's and Megatron's estimators; slurmplan needs its own so that the scheduler can drop
plans that would OOM without starting them. The terms (per GPU, of the most loaded pipeline stage, the first):
- model states with mixed-precision Adam: 2 bytes fp16 weights + 2 bytes fp16 gradients (4 under Megatron, whose
  gradients accumulate in fp32: ``Stack.grad_bytes``) + 12 bytes fp32 master weights, momentum and variance per
  parameter (ZeRO paper), over the stage's ``P / tp`` parameters.
- ZeRO partitions over ``dp``: stage 1 the optimizer states, stage 2 also gradients, stage 3 also weights (plus a
  working set of two gathered layers).
- offload (ZeRO-Offload) keeps optimizer states and gradients in host memory; with ZeRO-3 the fp16 weights go
  there too (parameter offload), leaving only the working set on the GPU.
- activations per layer and micro-batch (Korthikanti et al., Megatron): ``s b h (10 + 24/t + 5 a s/(h t))``
  bytes with tensor parallelism t; with full recomputation only the 2 ``s b h`` byte layer inputs are kept, plus
  one layer's full activations while it is recomputed. 1F1B keeps ``min(pp, m)`` micro-batches in flight on the
  first stage (``l/pp`` layers each), i.e. about ``l`` layers' worth; interleaving adds ``(pp-1)/(pp v)``.
- logits: 4 bytes per ``s b V / t`` on the last stage (the first when ``pp == 1``).
- a fixed reserve for the CUDA context, NCCL buffers and allocator fragmentation.
- the optimizer step's own copies (``Stack.step_bytes_unpipelined``: the 2021 Megatron with PyTorch's DDP makes
  fp32 gradients at the step), which need room only once the activations are freed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmplan.domain import Plan
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.stacks import DEFAULT_STACK, Stack

GB = 1e9
CONTEXT_RESERVE_BYTES = 1.5e9
"""CUDA context (~0.75 GB, EasyScale), NCCL buffers and workspace."""
USABLE_FRACTION = 0.95
"""Share of the GPU's memory the allocator can hand out (fragmentation)."""
HOST_USABLE_FRACTION = 0.85
BASE_HOST_BYTES_PER_GPU = 8e9
"""Host memory each GPU's process needs without offload (data loader, pinned buffers, the framework)."""


@dataclass(frozen=True, eq=False)
class MemoryEstimate:
    """Bytes per GPU, one entry per plan; ``fits`` is the GPU and host memory check together."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    reserve: float
    host: np.ndarray
    gpu_capacity: float
    host_capacity_per_gpu: np.ndarray
    step: np.ndarray | float = 0.0
    """Bytes the optimizer step adds to the model states once the activations are freed
    (``Stack.step_bytes_unpipelined``): the peak is the larger of the two."""

    @property
    def total(self) -> np.ndarray:
        transient = np.maximum(self.activations, self.step)
        return self.weights + self.gradients + self.optimizer + transient + self.reserve

    @property
    def fits_gpu(self) -> np.ndarray:
        return self.total <= self.gpu_capacity

    @property
    def fits_host(self) -> np.ndarray:
        return self.host <= self.host_capacity_per_gpu

    @property
    def fits(self) -> np.ndarray:
        return self.fits_gpu & self.fits_host

    def reason(self, i: int) -> str:
        """Why plan i does not fit ('' when it does), with the figures."""
        parts = []
        if not self.fits_gpu[i]:
            parts.append(
                f"needs {self.total[i] / GB:.1f} GB per GPU > {self.gpu_capacity / GB:.1f} GB usable "
                f"(weights {self.weights[i] / GB:.1f}, gradients {self.gradients[i] / GB:.1f}, "
                f"optimizer {self.optimizer[i] / GB:.1f}, activations {self.activations[i] / GB:.1f}, "
                f"optimizer step {np.broadcast_to(self.step, self.total.shape)[i] / GB:.1f}, "
                f"reserve {self.reserve / GB:.1f})"
            )
        if not self.fits_host[i]:
            parts.append(
                f"needs {self.host[i] / GB:.1f} GB host memory per GPU > {self.host_capacity_per_gpu[i] / GB:.1f} GB"
            )
        return "; ".join(parts)


def stage_parameters(model: ModelSpec, tp: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """Parameters held by one GPU of the first stage: its layers plus the embeddings, split by tp."""
    embed = (model.vocab + model.seq_len) * model.hidden
    return (model.layers / pp * model.layer_parameters + embed) / tp


def activation_bytes_per_layer(model: ModelSpec, micro_batch: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """Megatron's activation bytes of one layer for one micro-batch, tensor-parallel without sequence parallel."""
    s, h, a = model.seq_len, model.hidden, model.heads
    return s * micro_batch * h * (10.0 + 24.0 / tp + 5.0 * a * s / (h * tp))


def estimate_memory(model: ModelSpec, space: PlanSpace, gpu: GpuSpec, stack: Stack | None = None) -> MemoryEstimate:
    """GPU and host bytes per GPU for every plan of ``space`` on ``gpu``.

    Host memory is checked per node: a job on fewer GPUs than a node holds may take the node's memory for its
    GPUs (Rubick allocates host memory with the plan, e.g. a 1-GPU ZeRO-Offload job gets a large share).
    """
    dp, tp, pp = space.dp.astype(float), space.tp.astype(float), space.pp.astype(float)
    mb, m, v = space.micro_batch.astype(float), space.grad_accum.astype(float), space.virtual_stages.astype(float)
    z, off, gc = space.zero_stage, space.offload, space.checkpointing
    params = stage_parameters(model, tp, pp)
    working = 2.0 * 2.0 * model.layer_parameters / tp  # two gathered fp16 layers (ZeRO-3)

    weights = np.where(z >= 3, 2.0 * params / dp + working, 2.0 * params)
    weights = np.where(off & (z >= 3), working, weights)
    grad_bytes = (stack or DEFAULT_STACK).grad_bytes  # fp32 main grads under Megatron (perf.stacks)
    gradients = np.where(z >= 2, grad_bytes * params / dp, grad_bytes * params)
    gradients = np.where(off, working, gradients)  # streamed to the host bucket by bucket
    optimizer = np.where(z >= 1, 12.0 * params / dp, 12.0 * params)
    optimizer = np.where(off, 0.0, optimizer)

    full_layer = activation_bytes_per_layer(model, mb, tp) * (stack or DEFAULT_STACK).activation_factor
    in_flight = np.minimum(pp, m) * (1.0 + np.where(v > 1, (pp - 1) / (pp * v), 0.0))
    layers_per_stage = model.layers / pp
    kept_per_layer = np.where(gc, 2.0 * model.seq_len * mb * model.hidden, full_layer)
    activations = layers_per_stage * in_flight * kept_per_layer + np.where(gc, full_layer, 0.0)
    activations = activations + 4.0 * model.seq_len * mb * model.vocab / tp

    # Model states the step adds (a copy of the gradients at another width), after the activations are freed.
    step = np.where(pp == 1, (stack or DEFAULT_STACK).step_bytes_unpipelined * params, 0.0)

    host_states = np.where(off, (12.0 + 2.0 + np.where(z >= 3, 2.0, 0.0)) * params / dp, 0.0)
    host = BASE_HOST_BYTES_PER_GPU + host_states
    node_host = gpu.host_memory_gb * GB * HOST_USABLE_FRACTION
    return MemoryEstimate(
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        activations=activations,
        reserve=CONTEXT_RESERVE_BYTES,
        host=host,
        gpu_capacity=gpu.memory_gb * GB * USABLE_FRACTION,
        host_capacity_per_gpu=node_host / np.minimum(space.gpus, gpu.gpus_per_node),
        step=step,
    )


def plan_memory(model: ModelSpec, plan: Plan, gpu: GpuSpec, stack: Stack | None = None) -> MemoryEstimate:
    """The estimate for one plan (row 0), e.g. to print why it does not fit."""
    return estimate_memory(model, PlanSpace.from_plans([plan], gpu.gpus_per_node), gpu, stack)


def infeasibility_reason(model: ModelSpec, plan: Plan, gpu: GpuSpec) -> str:
    """'' if ``plan`` fits ``gpu``, otherwise the reason with the figures."""
    return plan_memory(model, plan, gpu).reason(0)
