"""Crius's agile Cell estimate: the best of 2^S assembled DP-only / TP-only stage plans (crius.md 2).

Crius profiles each stage of a Cell in two plans only (DP-only: N_s replicas; TP-only: one N_s-way shard),
assembles the 2^S combinations with the matching inter-stage communication, and estimates each with the
Alpa-style formula over B = 4 S micro-batches:

    T_i    = T_comp_i + T_comm_i                       (T_comm_i: traffic into stage i)
    T_iter = sum_i T_i + (B - 1) max_i (T_i - T_comm_i) + DP gradient sync

slurmplan computes the stage profiles from FLOPs and the hardware catalog (no GPU to profile on); the stages
come from ``pipeline.crius_stages`` over per-layer FLOPs (the logit layer is an op of its own). A stage option
that does not fit without activation recomputation is costed with it (4/3 of the compute); options that still
do not fit are dropped; a Cell with no feasible assembly is infeasible. Beyond 12 stages the 2^S
enumeration is replaced by the per-stage best option (exact when adapters cost nothing).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from slurmplan.domain import Cell, ValidationError
from slurmplan.perf.hardware import GpuSpec
from slurmplan.perf.memory import CONTEXT_RESERVE_BYTES, GB, USABLE_FRACTION
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.pipeline import crius_stages
from slurmplan.perf.rubick import EFFICIENCY_HALF_WORK

MAX_ENUMERATED_STAGES = 12
DP, TP = "dp", "tp"


@dataclass(frozen=True)
class CellEstimate:
    cell: Cell
    throughput: float
    """Samples/s of the best assembled plan; 0 when infeasible."""
    t_iter: float
    stage_plans: tuple[str, ...]
    """"dp" or "tp" per stage."""
    stage_gpus: tuple[int, ...]
    micro_batches: int
    reason: str = ""


@dataclass(frozen=True)
class _StageProfile:
    comp: dict[str, float]
    sync: dict[str, float]
    feasible: dict[str, bool]


def _stage_profile(
    model: ModelSpec, gpu: GpuSpec, layers: float, logits: bool, gpus: int, mb: float, in_flight: int
) -> _StageProfile:
    s, h = model.seq_len, model.hidden
    fwd = layers * (24.0 * s * h * h + 4.0 * s * s * h) + (2.0 * s * h * model.vocab if logits else 0.0)
    params = layers * model.layer_parameters + (model.vocab * h if logits else 0.0)
    act = layers * s * h * (34.0 + 5.0 * model.heads * s / h)  # bytes per sample, no recomputation
    intra = gpu.intra_node_gbps * 1e9 if gpus <= gpu.gpus_per_node else gpu.inter_node_gbps * 1e9
    comp, sync, feasible = {}, {}, {}
    capacity = gpu.memory_gb * GB * USABLE_FRACTION - CONTEXT_RESERVE_BYTES
    for kind in (DP, TP):
        per_gpu_batch = mb / gpus if kind == DP else mb
        width = h if kind == DP else h / gpus
        work = per_gpu_batch * s * h * width
        eff = gpu.effective_flops * work / (work + EFFICIENCY_HALF_WORK)
        flops = 3.0 * fwd * mb / gpus
        tp_comm = 0.0 if kind == DP or gpus == 1 else 8.0 * (gpus - 1) / gpus * mb * s * h * layers * 2.0 / intra
        comp[kind] = flops / eff + tp_comm
        sync[kind] = 2.0 * (gpus - 1) / gpus * 2.0 * params / intra if kind == DP else 0.0
        states = 16.0 * params / (1 if kind == DP else gpus)
        shard = per_gpu_batch / (1 if kind == DP else gpus)
        if states + in_flight * act * shard <= capacity:
            feasible[kind] = True
        else:  # Recompute activations (keep layer inputs only): one more forward of compute.
            kept = in_flight * layers * 2.0 * s * h * shard + act / max(layers, 1.0) * shard
            feasible[kind] = states + kept <= capacity
            comp[kind] *= 4.0 / 3.0
    return _StageProfile(comp, sync, feasible)


def _link(gpu: GpuSpec, offset: int) -> float:
    """Bandwidth into a stage that starts at GPU ``offset``: inter-node when it starts a new node."""
    return (gpu.inter_node_gbps if offset % gpu.gpus_per_node == 0 else gpu.intra_node_gbps) * 1e9


def crius_cell_estimate(model: ModelSpec, gpu: GpuSpec, cell: Cell, global_batch: int) -> CellEstimate:
    """Crius's estimate of ``cell`` for ``model`` at ``global_batch`` (samples per iteration)."""
    if cell.stages < 1 or cell.gpus < cell.stages:
        raise ValidationError("stages", cell.stages, f"between 1 and the Cell's {cell.gpus} GPUs", "crius cell")
    if global_batch < 1:
        raise ValidationError("global_batch", global_batch, "a positive integer", "crius cell")
    ops = [1.0] * model.layers + [2.0 * model.vocab / (24.0 * model.hidden + 4.0 * model.seq_len)]
    split = crius_stages(ops, [1.0] * (len(ops) - 1), cell.gpus, cell.stages)
    n_micro = 4 * cell.stages
    mb = global_batch / n_micro
    profiles, offsets, offset = [], [], 0
    for k, ((first, last), n) in enumerate(zip(split.ranges, split.gpus, strict=True)):
        layers = min(last, model.layers - 1) - first + 1 if first < model.layers else 0
        logits = last >= model.layers
        profiles.append(_stage_profile(model, gpu, float(layers), logits, n, mb, cell.stages - k))
        offsets.append(offset)
        offset += n
    act_bytes = mb * model.seq_len * model.hidden * 2.0

    def iteration(kinds: tuple[str, ...]) -> float:
        t_comp = np.array([p.comp[k] for p, k in zip(profiles, kinds, strict=True)])
        t_comm = np.array(
            [
                0.0 if i == 0 else act_bytes / _link(gpu, offsets[i]) * (1.0 if kinds[i] == kinds[i - 1] else 1.5)
                for i in range(len(kinds))
            ]
        )
        sync = max(p.sync[k] for p, k in zip(profiles, kinds, strict=True))
        return float((t_comp + t_comm).sum() + (n_micro - 1) * t_comp.max() + sync)

    options = [[k for k in (DP, TP) if p.feasible[k]] for p in profiles]
    if any(not o for o in options):
        return CellEstimate(cell, 0.0, math.inf, (), split.gpus, n_micro, "a stage fits in neither DP nor TP")
    if cell.stages <= MAX_ENUMERATED_STAGES:
        candidates = itertools.product(*options)
    else:
        candidates = iter([tuple(min(o, key=lambda k, p=p: p.comp[k]) for o, p in zip(options, profiles, strict=True))])
    best_t, best_kinds = math.inf, ()
    for kinds in candidates:
        t = iteration(kinds)
        if t < best_t:
            best_t, best_kinds = t, kinds
    return CellEstimate(cell, global_batch / best_t, best_t, best_kinds, split.gpus, n_micro)
