"""Forward time of one pipeline stage per micro-batch, from the matrix sizes a plan gives each GPU.

Megatron's weak scaling (thesis Table 4.1) gains 19 % per GPU from 1.7B to 1T because larger models run larger
GEMMs, while the memory-bound work around them grows only with the hidden size. A single "efficiency" number per
GPU cannot show that, so a transformer layer's forward pass is costed term by term (b = micro-batch, s = sequence,
h = hidden, a = heads, t = tensor-parallel size, d = h / a):

- GEMMs, Megatron's partition: QKV (bs x h x 3h/t), attention scores (b a/t batches of s x d x s), attention over
  values (s x s x d), output projection (bs x h/t x h), MLP (bs x h x 4h/t and bs x 4h/t x h). Each costs
  ``FLOPs / (peak x gemm_efficiency x waves) + gemm_traffic x operand bytes / memory bandwidth``: a smooth
  roofline in which small or thin products (small b, large t, narrow heads) lose to their operand traffic. ``waves``
  (``wave_efficiency``) is the share of the GPU's multiprocessors a GEMM's 128 x 128 output tiles keep busy, from
  the catalog's SM count: a GPU with many SMs needs many tiles to fill. This is why Gavel measured a V100 only
  2.0x a K80 die at batch 16 but 5.5x at batch 128 (80 SMs against 13), with one set of constants for every GPU.
- Element-wise work (layer norms, dropout, residual adds, bias+GeLU, softmax) is memory-bound: its bytes per token
  are counted from the operators (``_ELEMENTWISE``), with the replicated part (norms, dropout, residual: not split
  by t in Megatron) apart from the partitioned part (GeLU over 4h/t, softmax over a s / t). Megatron's fused
  kernels move about half the bytes of eager PyTorch (``perf.stacks``).
- Kernel launches: a fixed latency per kernel, which dominates small models on fast GPUs.
- The logit layer: a bs x h x V/t GEMM plus the softmax cross-entropy over V/t, on the last stage.

The five constants in ``ModelTerms`` are global (one value for every model, GPU and stack): ``slurmplan fit
--published`` fits them to the published dataset, and the shipped ``data/perf_constants.yaml`` holds that fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from slurmplan.perf.constants import FittedConstants
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.stacks import Stack

_ELEMENTWISE = {
    # elements read + written per token per layer in the forward pass: (replicated x h, partitioned x h/t,
    # attention x a s / t). Fused (Megatron): LN 2x2h, bias+dropout+add 2x3h; bias+GeLU 2x4h/t; scale+mask+softmax
    # 2 a s/t, attention dropout 3 a s/t. Unfused: LN 2x2h, bias 2h, dropout 3h and add 3h twice; bias 8h/t and GeLU
    # 8h/t; scale, mask and softmax 2 a s/t each, dropout 3 a s/t.
    True: (10.0, 8.0, 5.0),
    False: (20.0, 16.0, 9.0),
}
TILE = 128.0
"""Output tile edge of the GEMM kernels (cuBLAS/CUTLASS's large-GEMM tiles are 128 x 128 or 256 x 128)."""
_KERNELS_PER_LAYER = {True: 14.0, False: 26.0}
"""Forward kernels per layer: 6 GEMMs + 2 batched attention GEMMs + the element-wise kernels above."""


@dataclass(frozen=True)
class ModelTerms(FittedConstants):
    """The global constants of the compute and communication terms (see the module docstring)."""

    WHERE: ClassVar[str] = "model terms"
    FRACTIONS: ClassVar[tuple[str, ...]] = ("gemm_efficiency", "network_efficiency")

    gemm_efficiency: float = 0.75
    """Fraction of the GPU's peak FLOP/s a large GEMM reaches."""
    gemm_traffic: float = 1.0
    """Weight of a GEMM's operand bytes at memory bandwidth (0: GEMMs never memory-bound)."""
    elementwise_traffic: float = 1.0
    """Multiplier on the counted element-wise bytes (caching, extra copies)."""
    launch_us: float = 6.0
    """Microseconds per kernel launch."""
    network_efficiency: float = 0.8
    """Fraction of a link's nominal bandwidth that collectives and point-to-point transfers reach."""


def _gemm(m: np.ndarray, k: np.ndarray, n: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, operand elements) of ``batch`` products of an m x k by k x n matrix."""
    return 2.0 * m * k * n * batch, (m * k + k * n + m * n) * batch


def wave_efficiency(m: np.ndarray, n: np.ndarray, batch: np.ndarray, sms: int) -> np.ndarray:
    """Share of the GPU's multiprocessors busy over a GEMM: its ``TILE x TILE`` output tiles run ``sms`` at a time,
    so the last wave runs part-empty. A V100 (80 SMs) needs six times the tiles a K80 die (13) needs to fill up,
    which is why small-batch models gain far less than the ratio of peaks on newer GPUs (Gavel's Transformer:
    V100/K80 2.0x at batch 16, 5.5x at 128). 1 when the GPU's SM count is unknown."""
    if sms <= 0:
        return np.ones_like(np.asarray(m, dtype=float))
    tiles = np.ceil(m / TILE) * np.ceil(n / TILE) * batch
    return tiles / (np.ceil(tiles / sms) * sms)


def layer_forward_time(
    model: ModelSpec, micro_batch: np.ndarray, tp: np.ndarray, gpu: GpuSpec, stack: Stack, terms: ModelTerms
) -> np.ndarray:
    """Seconds for one transformer layer's forward pass on one GPU, per plan."""
    b, t = micro_batch.astype(float), tp.astype(float)
    s, h, a = float(model.seq_len), float(model.hidden), float(model.heads)
    tokens = b * s
    one = np.ones_like(b)
    shapes = (
        (tokens, h * one, 3.0 * h / t, one),  # QKV
        (s * one, h / a * one, s * one, b * a / t),  # scores
        (s * one, s * one, h / a * one, b * a / t),  # attention over values
        (tokens, h / t, h * one, one),  # output projection
        (tokens, h * one, 4.0 * h / t, one),  # MLP up
        (tokens, 4.0 * h / t, h * one, one),  # MLP down
    )
    flops = np.zeros_like(b)
    operands = np.zeros_like(b)
    for m, k, n, batch in shapes:
        f, e = _gemm(m, k, n, batch)
        flops += f / wave_efficiency(m, n, batch, gpu.sms)
        operands += e
    rep, part, attn = _ELEMENTWISE[stack.fused_kernels]
    elementwise = tokens * (rep * h + part * h / t + attn * a * s / t)
    return _cost(flops, operands, elementwise, _KERNELS_PER_LAYER[stack.fused_kernels], gpu, stack, terms)


def logits_forward_time(
    model: ModelSpec, micro_batch: np.ndarray, tp: np.ndarray, gpu: GpuSpec, stack: Stack, terms: ModelTerms
) -> np.ndarray:
    """Seconds for the logit layer and the loss (vocabulary split over t, Megatron's parallel cross-entropy)."""
    b, t = micro_batch.astype(float), tp.astype(float)
    tokens, h, v = b * model.seq_len, float(model.hidden), float(model.vocab)
    flops, operands = _gemm(tokens, h * np.ones_like(b), v / t, np.ones_like(b))
    flops = flops / wave_efficiency(tokens, v / t, np.ones_like(b), gpu.sms)
    elementwise = 4.0 * tokens * v / t  # softmax read/write, loss and its max/sum passes
    return _cost(flops, operands, elementwise, 4.0, gpu, stack, terms)


def _cost(
    flops: np.ndarray,
    operands: np.ndarray,
    elementwise: np.ndarray,
    kernels: float,
    gpu: GpuSpec,
    stack: Stack,
    terms: ModelTerms,
) -> np.ndarray:
    fp32 = stack.precision == "fp32"
    peak = (gpu.fp32_tflops if fp32 else gpu.fp16_tflops) * 1e12 * terms.gemm_efficiency
    width = 4.0 if fp32 else 2.0
    bandwidth = gpu.mem_bandwidth_gbps * 1e9
    memory = width * (terms.gemm_traffic * operands + terms.elementwise_traffic * elementwise) / bandwidth
    return flops / peak + memory + kernels * terms.launch_us * 1e-6
