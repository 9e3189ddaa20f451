"""Pipeline stages: PipeDream's dynamic-programming partitioner and Crius's stage determination.

PipeDream (narayanan.md B1) finds, over per-layer compute times, activation and weight sizes, the partition
into (possibly replicated) stages whose slowest stage is fastest, level by level of a hierarchical topology.
Crius (crius.md 1) cuts a model at scheduler level instead: GPUs are shared FLOPs-proportionally, cuts go at the
boundaries with the least traffic, and each stage gets about a power of two of GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slurmplan.domain import ValidationError


@dataclass(frozen=True)
class Stage:
    first: int
    last: int
    """Layers ``first..last`` inclusive."""
    replicas: int
    """Data-parallel replicas of this stage (each replica is one unit of the level below)."""


@dataclass(frozen=True)
class PipelinePartition:
    stages: tuple[Stage, ...]
    slowest_stage_time: float
    """PipeDream's objective A: time per input of the slowest stage, with its communication."""

    @property
    def workers(self) -> int:
        return sum(s.replicas for s in self.stages)


def _check_layers(times: Sequence[float], acts: Sequence[float], weights: Sequence[float]) -> None:
    n = len(times)
    if n == 0 or len(acts) != n or len(weights) != n:
        raise ValidationError("layers", n, "equal, non-zero numbers of layer times, activations and weights")
    for name, seq in (("layer_times", times), ("activation_bytes", acts), ("weight_bytes", weights)):
        if any((not math.isfinite(x)) or x < 0 for x in seq):
            raise ValidationError(name, list(seq), "finite non-negative numbers", "pipedream")


def pipedream_partition(
    layer_times: Sequence[float],
    activation_bytes: Sequence[float],
    weight_bytes: Sequence[float],
    levels: Sequence[tuple[int, float]],
) -> PipelinePartition:
    """PipeDream's optimizer over a hierarchy ``levels = [(m_1, B_1), (m_2, B_2), ...]``: level k joins m_k units
    of level k-1 with bandwidth B_k bytes/s (level 0 is one GPU). Returns the top-level stages.

      T^k(i..j, m) = max(A^{k-1}(i..j, m_{k-1}), 2 (m-1) sum w / B_k) / m                (one replicated stage)
      A^k(i..j, m) = min(T^k(i..j, m),
                         min_{s, m'} max(A^k(i..s, m-m'), 2 a_s / B_k, T^k(s+1..j, m')))  (split at s)

    The no-split term, which the thesis leaves implicit, is included. Cost is O(N^3 m^2) per level.
    """
    _check_layers(layer_times, activation_bytes, weight_bytes)
    if not levels or any(m < 1 or b <= 0 for m, b in levels):
        raise ValidationError("levels", list(levels), "non-empty (workers >= 1, bandwidth > 0) pairs", "pipedream")
    n = len(layer_times)
    prefix_t = np.concatenate([[0.0], np.cumsum(layer_times)])
    prefix_w = np.concatenate([[0.0], np.cumsum(weight_bytes)])
    below = prefix_t[None, 1:] - prefix_t[:-1, None]  # A^0(i..j, 1): one GPU runs layers i..j
    below = np.where(np.triu(np.ones((n, n), dtype=bool)), below, np.inf)
    choice: dict = {}
    for depth, (m_k, bw) in enumerate(levels):
        top = depth == len(levels) - 1
        starts = [0] if top else list(range(n))
        a = np.full((n, n, m_k + 1), np.inf)
        choice = {}
        for i in starts:
            for j in range(i, n):
                w = prefix_w[j + 1] - prefix_w[i]
                for m in range(1, m_k + 1):
                    best = max(below[i, j], 2.0 * (m - 1) * w / bw) / m
                    arg = None
                    for s in range(i, j):
                        w2 = prefix_w[j + 1] - prefix_w[s + 1]
                        for m2 in range(1, m):
                            t_last = max(below[s + 1, j], 2.0 * (m2 - 1) * w2 / bw) / m2
                            cand = max(a[i, s, m - m2], 2.0 * activation_bytes[s] / bw, t_last)
                            if cand < best:
                                best, arg = cand, (s, m2)
                    a[i, j, m] = best
                    choice[(i, j, m)] = arg
        below = a[:, :, m_k]
    m_top = levels[-1][0]
    stages: list[Stage] = []
    j, m = n - 1, m_top
    while True:
        arg = choice[(0, j, m)]
        if arg is None:
            stages.append(Stage(0, j, m))
            break
        s, m2 = arg
        stages.append(Stage(s + 1, j, m2))
        j, m = s, m - m2
    return PipelinePartition(tuple(reversed(stages)), float(below[0, n - 1]))


@dataclass(frozen=True)
class StageSplit:
    """Crius's stages: operator ranges, fractional GPU shares and the power-of-two GPU counts given."""

    ranges: tuple[tuple[int, int], ...]
    shares: tuple[float, ...]
    gpus: tuple[int, ...]


def _pick_cuts(flops: np.ndarray, boundary: np.ndarray, stages: int) -> list[int]:
    """The S-1 boundaries with the least traffic; among equal traffic, those nearest equal-FLOPs cut points."""
    cum = np.cumsum(flops)[:-1] / flops.sum()  # FLOPs fraction before each boundary
    ideal = [k / stages for k in range(1, stages)]
    chosen: list[int] = []
    for volume in np.unique(boundary):
        group = [int(b) for b in np.flatnonzero(boundary == volume)]
        need = stages - 1 - len(chosen)
        if need <= 0:
            break
        if len(group) <= need:
            chosen += group
            continue
        targets = sorted(ideal, key=lambda x: min(abs(cum[b] - x) for b in group))[:need]
        for target in targets:
            nearest = min(group, key=lambda b: abs(cum[b] - target))
            chosen.append(nearest)
            group.remove(nearest)
    return sorted(chosen)


def _power_of_two_counts(shares: list[float], total: int) -> list[int]:
    """Round each share to a power of two, then adjust (halve the most over-served, double the most
    under-served) so the counts sum to at most ``total`` and as close to it as powers of two allow."""
    counts = [max(1, 2 ** round(math.log2(max(s, 1e-9)))) for s in shares]
    while sum(counts) > total:
        i = max((k for k in range(len(counts)) if counts[k] > 1), key=lambda k: counts[k] / shares[k], default=None)
        if i is None:
            break
        counts[i] //= 2
    while True:
        room = total - sum(counts)
        grow = [k for k in range(len(counts)) if counts[k] <= room]
        if not grow:
            break
        i = min(grow, key=lambda k: counts[k] / shares[k])
        counts[i] *= 2
    return counts


def crius_stages(op_flops: Sequence[float], boundary_bytes: Sequence[float], gpus: int, stages: int) -> StageSplit:
    """Crius's stage determination: ``g_j = N F_j / sum F``; cut at the S-1 least-traffic boundaries
    (``boundary_bytes[j]`` sits between ops j and j+1); each stage gets about a power of two of GPUs."""
    flops = np.asarray(op_flops, dtype=float)
    boundary = np.asarray(boundary_bytes, dtype=float)
    if flops.size == 0 or np.any(flops <= 0) or boundary.size != flops.size - 1:
        raise ValidationError("op_flops", list(op_flops), "positive FLOPs, one boundary fewer than ops", "crius")
    if not 1 <= stages <= min(flops.size, gpus):
        raise ValidationError("stages", stages, f"between 1 and min(ops, gpus) = {min(flops.size, gpus)}", "crius")
    share = gpus * flops / flops.sum()
    cuts = _pick_cuts(flops, boundary, stages)
    edges = [0, *[c + 1 for c in cuts], flops.size]
    ranges = tuple((edges[k], edges[k + 1] - 1) for k in range(stages))
    shares = [float(share[a : b + 1].sum()) for a, b in ranges]
    return StageSplit(ranges=ranges, shares=tuple(shares), gpus=tuple(_power_of_two_counts(shares, gpus)))
