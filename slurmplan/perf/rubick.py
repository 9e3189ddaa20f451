"""Rubick's iteration-time model (rubick.md section 2), vectorized over a whole plan space.

``T_iter = T_cc + T_oo + k_const`` and ``throughput = global_batch / T_iter``. Rubick profiles the forward time;
slurmplan estimates it from the model's FLOPs and the GPU's effective FLOP/s so that any job gets a sensible
prediction before it has run, and lets fitting (``perf.fit``) correct it. The seven constants:

- ``k_bwd``      backward = k_bwd x forward (plus one forward with checkpointing)
- ``k_sync``     overlap exponent of the DP gradient sync with the backward pass
- ``k_opt``      optimizer step on the GPU, as a multiple of one pass over 32 bytes per local parameter at the
                 GPU's memory bandwidth (Rubick's ``k_opt * P / x`` with the hardware folded in, so one fit
                 carries across GPU types)
- ``k_opt_off``  CPU optimizer step (ZeRO-Offload), nanoseconds per parameter per CPU core
- ``k_off``      overlap exponent of DP communication with the PCIe offload transfer
- ``k_swap``     overlap exponent of the CPU update with the PCIe offload transfer
- ``k_const``    constant overhead per iteration, seconds

Choices where the paper is silent (rubick.md 6): offload moves fp16 gradients down and fp16 parameters up, 4
bytes per local parameter; under offload the DP sync is counted in ``T_oo`` only; gradient accumulation with
pp == 1 uses Rubick's GA formula, with pp > 1 the replica's micro-batches are the pipeline's (1F1B, interleaving
divides the fill by v and multiplies the pipeline traffic by v) and the DP sync overlaps only the last
micro-batch's backward in both; ZeRO-3 reduce-scatters gradients once and
all-gathers parameters in the forward and backward of every micro-batch ((1 + 2m) (d-1)/d P instead of
2 (d-1)/d P), and its offload variant fetches parameters over PCIe per micro-batch too; checkpointing repeats
the forward TP all-reduces (1.5x the TP volume). Communication is in fp16.

Where slurmplan departs from the paper, for pp > 1 only: Rubick's ``V_tp = 8 (t-1) b s h l / (d t)`` is not divided
by p and its ``V_pp = 2 p b s h / (d t)`` sums all p stage boundaries, which serialises the whole pipeline; that is
close for p <= 4 (Rubick's runs) but predicts a third of Megatron's measured 163 TFLOP/s for the 1T model at
p = 64 (thesis Table 4.1). In 1F1B each GPU's critical path holds its own stage's l/p layers and one boundary per
micro-batch slot, so slurmplan uses ``V_tp = 8 (t-1) b s h (l/p) / (d t) * F`` and ``V_pp = 2 b s h / (d t) * v F``
with the fill factor ``F = (m + (p-1)/v) / m``; both equal Rubick's at p = 1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import yaml

from slurmplan.domain import ValidationError
from slurmplan.perf.compute import ModelTerms, layer_forward_time, logits_forward_time
from slurmplan.perf.constants import FittedConstants
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.stacks import DEFAULT_STACK, Stack, get_stack

BYTES_PER_ELEMENT = 2.0
OPT_BYTES_PER_PARAM = 32.0
EFFICIENCY_HALF_WORK = 1.0e9
"""Crius Cells' quick estimate (``perf.cells``): the GEMM size at which a GPU reaches half its catalog efficiency.
The plan model itself costs GEMMs by their shapes (``perf.compute``)."""
PUBLISHED_CONSTANTS = Path(__file__).resolve().parent / "data" / "perf_constants.yaml"
ENV_CONSTANTS = "SLURMPLAN_PERF_CONSTANTS"
"""A constants file written by ``slurmplan fit --published`` that replaces the shipped one."""


@dataclass(frozen=True)
class RubickConstants(FittedConstants):
    """The 7 fitted constants; the defaults give a catalog-only estimate."""

    WHERE: ClassVar[str] = "rubick constants"
    EXPONENTS: ClassVar[tuple[str, ...]] = ("k_sync", "k_off", "k_swap")

    k_bwd: float = 2.0
    k_sync: float = 2.0
    k_opt: float = 1.0
    k_opt_off: float = 5.0
    k_off: float = 2.0
    k_swap: float = 1.5
    k_const: float = 0.02


def load_constants_file(path: str | Path) -> tuple[ModelTerms, RubickConstants]:
    """The (terms, Rubick constants) of a constants file; ValidationError naming the bad field otherwise."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError("constants file", str(path), f"a readable YAML file ({exc})") from None
    sections = (data.get("terms"), data.get("rubick")) if isinstance(data, dict) else (None, None)
    if not all(isinstance(x, dict) for x in sections):
        raise ValidationError("constants file", str(path), "a mapping with 'terms' and 'rubick' sections")
    parts = []
    for section, kind in (("terms", ModelTerms), ("rubick", RubickConstants)):
        raw = data[section]
        unknown = set(raw) - set(kind.names())
        if unknown:
            raise ValidationError("field", sorted(unknown)[0], f"one of {list(kind.names())}", f"{path}: {section}")
        parts.append(kind(**{k: float(v) if isinstance(v, int | float) else v for k, v in raw.items()}))
    return parts[0], parts[1]  # type: ignore[return-value]


@lru_cache(maxsize=4)
def _constants_for(path: str) -> tuple[ModelTerms, RubickConstants]:
    return load_constants_file(path)


def published_constants() -> tuple[ModelTerms, RubickConstants]:
    """The constants in force: ``$SLURMPLAN_PERF_CONSTANTS`` if set, else the shipped fit to published figures
    (``data/perf_constants.yaml``, written by ``slurmplan fit --published``); catalog defaults if neither exists."""
    path = os.environ.get(ENV_CONSTANTS) or str(PUBLISHED_CONSTANTS)
    if not Path(path).exists() and path == str(PUBLISHED_CONSTANTS):
        return ModelTerms(), RubickConstants()
    return _constants_for(path)


DEFAULT_CONSTANTS = published_constants()[1]
"""Rubick's 7 constants as fitted to the published dataset: the start of every per-model online refit."""


def overlap(x: np.ndarray, y: np.ndarray, k: float) -> np.ndarray:
    """Pollux's overlap function (x^k + y^k)^(1/k): x + y at k = 1, max(x, y) as k grows."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    big = np.maximum(np.maximum(x, y), 1e-30)
    return big * ((x / big) ** k + (y / big) ** k) ** (1.0 / k)


@dataclass(frozen=True, eq=False)
class IterationTime:
    """Per-plan components in seconds; ``throughput`` in samples per second."""

    forward: np.ndarray
    backward: np.ndarray
    comm_dp: np.ndarray
    comm_tp: np.ndarray
    comm_pp: np.ndarray
    optimizer: np.ndarray
    offload: np.ndarray
    bubble: np.ndarray
    t_cc: np.ndarray
    t_oo: np.ndarray
    t_iter: np.ndarray
    throughput: np.ndarray

    def components(self, i: int) -> dict[str, float]:
        names = ("forward", "backward", "comm_dp", "comm_tp", "comm_pp", "optimizer", "offload", "bubble", "t_iter")
        return {n: float(getattr(self, n)[i]) for n in names}


def dp_members_per_node(space: PlanSpace) -> np.ndarray:
    """GPUs of one data-parallel group in each node (ranks TP innermost, then PP, then DP): a node of g GPUs
    holds g / (tp pp) replicas' ranks of the same stage when ``tp pp`` divides g, else 1."""
    gpn = space.gpus_per_node
    model_parallel = space.tp * space.pp
    per_node = np.where(gpn % np.minimum(model_parallel, gpn) == 0, gpn // np.minimum(model_parallel, gpn), 1)
    return np.maximum(1, np.minimum(per_node, space.dp))


def bandwidths(space: PlanSpace, gpu: GpuSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bottleneck bytes/s for DP, TP and PP groups, ranks laid out TP innermost, then PP, then DP.

    A data-parallel all-reduce across nodes is not limited to one GPU's network link when its group has k > 1
    GPUs in each node: NCCL's rings (and trees) cross each node boundary once per channel, so a node sends one
    GPU's share of the ring traffic, and its channels spread over the NICs of the group's k GPUs (``inter_node_gbps``
    is per GPU: DGX A100 has one 200 Gb/s HCA per GPU). The DP bandwidth is then k x the per-GPU link, capped at
    the link inside the node. This is what makes the thesis's Figures 4.14 and 4.15 (5.9B GPT on 64 A100s,
    micro-batch 1) fall monotonically as p or t grows at every batch: with k = 1, a 32-way DP all-reduce of
    (t, d) = (2, 32) at batch 32 costs more than the pipeline bubble or tensor traffic of (8, 8).

    The same holds for a tensor-parallel group wider than a node (never searched, ``perf.plans``, but the thesis
    measured it): it has all of a node's GPUs in each node, so its all-reduces cross nodes at g x the per-GPU link.
    With one link, Figure 4.13's (t, p) = (32, 2) came out 4x slower than (8, 8), against the thesis's "up to 2x
    lower throughput" for sub-optimal (t, p) combinations (section 4.1); with the spread, 1.7x.

    ZeRO-3 keeps one link: its traffic is per-layer parameter gathers inside every forward and backward, not one
    bucketed all-reduce, and Table 4.2 measures it at that rate (with the spread, the fit over-predicts ZeRO-3 on
    1,536 GPUs by 60 % and can only compensate by cutting every link's efficiency to a quarter).
    """
    gpn = space.gpus_per_node
    intra, inter = gpu.intra_node_gbps * 1e9, gpu.inter_node_gbps * 1e9
    b_tp = np.where(space.tp <= gpn, intra, np.minimum(intra, inter * gpn))  # a group wider than a node: gpn each
    b_pp = np.where(space.tp * space.pp <= gpn, intra, inter)
    spread = np.where(space.zero_stage >= 3, 1, dp_members_per_node(space))
    b_dp = np.where(space.gpus <= gpn, intra, np.minimum(intra, inter * spread))
    return b_dp, b_tp, b_pp


def predict(
    model: ModelSpec,
    space: PlanSpace,
    gpu: GpuSpec,
    constants: RubickConstants = DEFAULT_CONSTANTS,
    cpus_per_gpu: float | None = None,
    *,
    stack: Stack | str | None = None,
    terms: ModelTerms | None = None,
) -> IterationTime:
    """Iteration time and throughput of every plan in ``space`` on GPUs of type ``gpu`` under ``stack`` (default
    Megatron-LM, ``perf.stacks``), with the compute/communication ``terms`` (default: the published fit)."""
    k = constants
    stack = DEFAULT_STACK if stack is None else get_stack(stack)
    terms = terms if terms is not None else published_constants()[0]
    cpus = float(cpus_per_gpu if cpus_per_gpu else gpu.cpus_per_node / gpu.gpus_per_node)
    d, t, p = space.dp.astype(float), space.tp.astype(float), space.pp.astype(float)
    m, v = space.grad_accum.astype(float), space.virtual_stages.astype(float)
    gc, off, z = space.checkpointing, space.offload, space.zero_stage
    b, s, h, n_layers = float(space.global_batch), model.seq_len, model.hidden, model.layers

    # The slowest stage holds l/p layers and the logit layer (perf.compute costs them by their matrix sizes).
    layer = layer_forward_time(model, space.micro_batch, space.tp, gpu, stack, terms)
    tf = n_layers / p * layer + logits_forward_time(model, space.micro_batch, space.tp, gpu, stack, terms)
    tb = (k.k_bwd + np.where(gc, 1.0, 0.0)) * tf

    b_dp, b_tp, b_pp = (bw * terms.network_efficiency for bw in bandwidths(space, gpu))
    params = model.parameters
    # ZeRO-3 reduce-scatters gradients once and all-gathers parameters twice (forward, backward) per micro-batch.
    v_dp = params * (d - 1.0) / (d * t * p) * np.where(z >= 3, 1.0 + 2.0 * m, 2.0)
    # Per GPU, on its critical path: its own stage's layers and boundary, over the pipeline's m + (p-1)/v slots.
    fill = (m + (p - 1.0) / v) / m
    v_tp = 8.0 * (t - 1.0) * b * s * h * n_layers / (d * t * p) * fill * np.where(gc, 1.5, 1.0)
    v_pp = np.where(p > 1, 2.0 * b * s * h / (d * t) * fill * v, 0.0)
    comm_dp = BYTES_PER_ELEMENT * v_dp / b_dp
    comm_tp = BYTES_PER_ELEMENT * v_tp / b_tp
    comm_pp = BYTES_PER_ELEMENT * v_pp / b_pp

    local_params = params / (t * p)
    opt_gpu = k.k_opt * local_params / np.where(z >= 1, d, 1.0) * OPT_BYTES_PER_PARAM / (gpu.mem_bandwidth_gbps * 1e9)
    opt_cpu = k.k_opt_off * 1e-9 * local_params / (d * cpus)
    # Gradients down and parameters up once per step; ZeRO-3 offload also fetches parameters per micro-batch.
    off_volume = BYTES_PER_ELEMENT * (2.0 + np.where(z >= 3, 2.0 * m, 0.0)) * local_params / d
    t_off = np.where(off, off_volume / (gpu.pcie_gbps * 1e9), 0.0)
    optimizer = np.where(off, opt_cpu, opt_gpu)

    sync_dp = np.where(off, 0.0, comm_dp)
    # pp == 1: Rubick's GA formula (a-1 local passes, the last overlapped with the sync).
    ga_cc = m * tf + (m - 1.0) * tb + overlap(tb, sync_dp, k.k_sync) + comm_tp
    # pp > 1: 1F1B over m micro-batches, fill (p-1)/v. A stage's gradients are final only after its last
    # micro-batch's backward, the first stage's being the iteration's last compute, so the DP sync overlaps one
    # backward (as in the GA formula), not the whole pipeline's.
    slots = m + (p - 1.0) / v
    last = overlap(tb, sync_dp, k.k_sync) if stack.pipeline_sync_overlap else tb + sync_dp
    pp_cc = slots * tf + (slots - 1.0) * tb + last + comm_tp + comm_pp
    t_cc = np.where(p > 1, pp_cc, ga_cc)
    bubble = np.where(p > 1, (p - 1.0) / v * (tf + tb), 0.0)

    t_oo = np.where(off, overlap(comm_dp, t_off, k.k_off) + overlap(opt_cpu, t_off, k.k_swap), opt_gpu)
    t_iter = t_cc + t_oo + k.k_const
    return IterationTime(
        forward=np.where(p > 1, slots, m) * tf,
        backward=np.where(p > 1, slots, m) * tb,
        comm_dp=comm_dp,
        comm_tp=comm_tp,
        comm_pp=comm_pp,
        optimizer=optimizer,
        offload=t_off,
        bubble=bubble,
        t_cc=t_cc,
        t_oo=t_oo,
        t_iter=t_iter,
        throughput=b / t_iter,
    )
