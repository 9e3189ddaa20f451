"""Software stacks: the framework a plan runs under is an explicit input of the performance model.

Published figures for the same shape and plan on the same GPUs differ by stack (Megatron's fused kernels give
+19 % on GPT-3 175B, thesis section 4.5.8), so the model never averages stacks: every prediction is for one
named stack, and ``slurmplan plan --stack`` / ``predict(..., stack=...)`` say which. The traits below are what the
model's terms read; each is a documented property of the framework, not a fitted factor:

- ``fused_kernels``: Megatron-LM fuses bias+GeLU, bias+dropout+add and scale+mask+softmax, so a layer moves
  about half the element-wise bytes of eager PyTorch (``perf.compute`` counts both). DeepSpeed runs here as the
  launcher runs it, Megatron-DeepSpeed (``launch.adapters.megatron_deepspeed_args``), with Megatron's kernels.
  Plain DDP/FSDP scripts (Hugging Face style models) run eager PyTorch: unfused.
- ``precision``: ``mixed`` (fp16/bf16 tensor cores, fp32 master weights) or ``fp32`` (the GPU's fp32 peak).
- what plans the framework can run (``runs``): Megatron-LM has tensor and pipeline parallelism and, since 2022,
  a distributed optimizer (ZeRO stages 1-2 here, with CPU offload; ``launch.adapters.megatron_args``); the 2021
  code the thesis measured had none of it (``megatron-2021``); DeepSpeed has ZeRO 1-3 and offload; plain DDP has
  data parallelism only, FSDP data parallelism with sharding (ZeRO-2/3 alike) and CPU offload. A plan search
  under a stack ranks only what it can run. Interleaving (v > 1) needs at least three pipeline stages, as
  Megatron-LM checks: the 39B row of Table 4.1 (p = 2) could not interleave (its run did not).
- ``grad_bytes``: Megatron accumulates gradients into fp32 ``main_grad`` buffers (4 bytes per parameter: 18 bytes
  of model state per parameter, Megatron's distributed-optimizer notes); ZeRO and PyTorch keep fp16/bf16
  gradients (2 bytes, the ZeRO paper's 16 bytes per parameter). ``perf.memory`` counts them.
- ``pipeline_sync_overlap``: with pipeline parallelism the 2021 code ran its own DDP (``DDP=local`` in the
  reproduction scripts for every p > 1 run), which all-reduces the gradients after the pipeline flush, with nothing
  to overlap; PyTorch's DDP (its p = 1 runs) and today's Megatron and DeepSpeed start the sync during the last
  micro-batch's backward.
- ``activation_factor``: the 2021 Megatron code kept more activation memory than Korthikanti et al.'s 2022 count
  (written for the later code, which frees each pipeline stage's output early). The thesis measured it (section
  4.5.6, figure 4.17): the 145B model at (t, p) = (8, 16) on 80 GB A100s ran without recomputation only at small
  batches, and recomputation at large batches was up to 2x faster, which 1F1B's bubble puts at about 8 micro-batches
  in flight fitting and 16 not. With 18 bytes of state per parameter that bounds the factor to 1.17-2.34; 1.25 is
  used, near the lower bound.

- ``step_bytes_unpipelined``: the 2021 code ran PyTorch's DDP for its p = 1 runs (``DDP=torch`` in
  run_table_1.sh). Its fp16 optimizer then makes fp32 gradients at the step (Megatron-LM's
  ``_copy_model_grads_to_main_grads``: ``main_param.grad = model_param.grad.float()``) while DDP's bucket copy of
  the fp16 gradients stays allocated: 2 (fp16 weights) + 2 (DDP buckets) + 4 (fp32 gradients) + 12 = 20 bytes per
  parameter at the step, 2 more than the 18 counted, after the activations are freed. 20 is the lower bound: code
  that kept the fp16 gradients through the copy held 22. Megatron's own DDP (p > 1, ``DDP=local``) accumulates
  into the fp32 ``main_grad`` and copies nothing.

The launcher's adapters know the stack a job runs: ``stack_for_adapter`` maps their names onto these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from slurmplan.domain import ValidationError

if TYPE_CHECKING:
    from slurmplan.perf.plans import PlanSpace

PRECISIONS = ("mixed", "fp32")
MIN_INTERLEAVED_STAGES = 3
"""The fewest pipeline stages Megatron-LM runs its interleaved schedule on (``Stack.runs``)."""


@dataclass(frozen=True)
class Stack:
    """One training framework as the model sees it."""

    name: str
    fused_kernels: bool
    precision: str = "mixed"
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    model_parallel: bool = True
    """Tensor and pipeline parallelism (Megatron's layers); False: data parallelism only."""
    offload: bool = True
    grad_bytes: float = 2.0
    pipeline_sync_overlap: bool = True
    """Whether a pipeline's DP gradient sync overlaps its last micro-batch's backward (False: after the flush)."""
    activation_factor: float = 1.0
    """Stored activations over Korthikanti et al.'s count (``perf.memory``), where a framework is measured to keep
    more; 1 = the count."""
    step_bytes_unpipelined: float = 0.0
    """Bytes per parameter the optimizer step holds beyond the counted model states, once activations are freed,
    in plans without pipelining (``perf.memory``): see the module docstring."""

    def with_precision(self, precision: str | None) -> Stack:
        if precision is None or precision == self.precision:
            return self
        if precision not in PRECISIONS:
            raise ValidationError("precision", precision, f"one of {list(PRECISIONS)}", f"stack {self.name}")
        return replace(self, precision=precision)

    def runs(self, space: PlanSpace) -> np.ndarray:
        """Which plans of ``space`` this framework can run (see the module docstring)."""
        ok = np.isin(space.zero_stage, self.zero_stages)
        if not self.model_parallel:
            ok &= (space.tp == 1) & (space.pp == 1)
        if not self.offload:
            ok &= ~space.offload.astype(bool)
        # Megatron-LM's interleaved schedule needs more than two stages (its argument check and
        # parallel_state.initialize_model_parallel raise "pipeline-model-parallel size should be greater than 2
        # with interleaved schedule", from the 2021 code on); no other stack here interleaves.
        ok &= (space.virtual_stages == 1) | (space.pp > MIN_INTERLEAVED_STAGES - 1)
        return ok

    def label(self) -> str:
        return self.name if self.precision == "mixed" else f"{self.name}+{self.precision}"


STACKS: dict[str, Stack] = {
    "auto": Stack("auto", fused_kernels=True),
    "megatron": Stack("megatron", fused_kernels=True, zero_stages=(0, 1, 2), grad_bytes=4.0),
    "megatron-2021": Stack(
        "megatron-2021",
        fused_kernels=True,
        zero_stages=(0,),
        offload=False,
        grad_bytes=4.0,
        pipeline_sync_overlap=False,
        activation_factor=1.25,
        step_bytes_unpipelined=2.0,
    ),
    "deepspeed": Stack("deepspeed", fused_kernels=True),
    "ddp": Stack("ddp", fused_kernels=False, zero_stages=(0,), model_parallel=False, offload=False),
    "fsdp": Stack("fsdp", fused_kernels=False, zero_stages=(0, 2, 3), model_parallel=False),
    "megatron-unfused": Stack("megatron-unfused", fused_kernels=False, zero_stages=(0,), offload=False, grad_bytes=4.0),
}
"""``megatron-2021`` is the code the thesis measured (Tables 4.1, 4.2 and the stated figures; the reproduction
scripts' ``DDP=local``/``torch``, no distributed optimizer); ``megatron-unfused`` is the baseline of its fusion
measurement (section 4.5.8), nothing a job runs."""

DEFAULT_STACK = STACKS["auto"]
"""What the scheduler plans with when a job does not say (``auto``): the launcher's Megatron adapters, Megatron-LM
for the plans it runs and Megatron-DeepSpeed for ZeRO-3 and its offload. Both run Megatron's fused kernels, so the
prediction is Megatron's; any plan of the space can run, and gradients are counted at DeepSpeed's 2 bytes."""

_ADAPTERS = {
    "megatron": "megatron",
    "megatron_args": "megatron",
    "megatron-deepspeed": "deepspeed",
    "megatron_deepspeed_args": "deepspeed",
    "deepspeed": "deepspeed",
    "deepspeed_config": "deepspeed",
    "torchrun": "ddp",
    "torchrun_prefix": "ddp",
    "ddp": "ddp",
    "fsdp": "fsdp",
}


def get_stack(name: str | Stack, precision: str | None = None) -> Stack:
    """The stack called ``name`` (optionally ``name+fp32``); ValidationError naming the known stacks otherwise."""
    if isinstance(name, Stack):
        return name.with_precision(precision)
    base, _, suffix = str(name).strip().lower().partition("+")
    if base not in STACKS:
        raise ValidationError("stack", name, f"one of {sorted(STACKS)} (optionally +fp32)")
    return STACKS[base].with_precision(suffix or precision)


def stack_for_adapter(adapter: str) -> Stack:
    """The stack a launcher adapter (``slurmplan.launch.adapters``) runs a plan under."""
    key = str(adapter).strip().lower()
    if key not in _ADAPTERS:
        raise ValidationError("adapter", adapter, f"one of {sorted(_ADAPTERS)}")
    return STACKS[_ADAPTERS[key]]
