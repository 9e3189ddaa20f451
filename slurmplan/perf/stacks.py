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

The launcher's adapters know the stack a job runs: ``stack_for_adapter`` maps their names onto these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slurmplan.domain import ValidationError

PRECISIONS = ("mixed", "fp32")


@dataclass(frozen=True)
class Stack:
    """One training framework as the model sees it."""

    name: str
    fused_kernels: bool
    precision: str = "mixed"

    def with_precision(self, precision: str | None) -> Stack:
        if precision is None or precision == self.precision:
            return self
        if precision not in PRECISIONS:
            raise ValidationError("precision", precision, f"one of {list(PRECISIONS)}", f"stack {self.name}")
        return replace(self, precision=precision)

    def label(self) -> str:
        return self.name if self.precision == "mixed" else f"{self.name}+{self.precision}"


STACKS: dict[str, Stack] = {
    "megatron": Stack("megatron", fused_kernels=True),
    "deepspeed": Stack("deepspeed", fused_kernels=True),
    "ddp": Stack("ddp", fused_kernels=False),
    "fsdp": Stack("fsdp", fused_kernels=False),
    "megatron-unfused": Stack("megatron-unfused", fused_kernels=False),
}
"""``megatron-unfused`` is the baseline of the thesis' fusion measurement (section 4.5.8), nothing a job runs."""

DEFAULT_STACK = STACKS["megatron"]
"""What the scheduler plans with when a job does not say: the launcher's Megatron adapter (ZeRO plans run through
Megatron-DeepSpeed, whose kernels are Megatron's, so the prediction is the same)."""

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
