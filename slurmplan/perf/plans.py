"""The plan space: every valid execution plan of one model on g GPUs at a fixed global batch, as arrays.

Plans are kept as parallel numpy arrays (one entry per plan) rather than ``Plan`` objects because the memory and
iteration-time models are evaluated over thousands of plans per call; ``PlanSpace.plan(i)`` builds the
``domain.Plan`` of one row when a caller needs it.

Validity rules (Megatron-LM / DeepSpeed practice, narayanan.md B3, rubick.md 1):
- ``dp * tp * pp == gpus``; the global batch never changes: ``global_batch == dp * micro_batch * grad_accum``.
- tensor parallelism stays inside a node (``tp`` divides the GPUs per node) and divides heads and hidden.
- ``pp`` divides the layers; with ``pp > 1`` the replica's micro-batches (``grad_accum``) are at least ``pp``.
- interleaving (``virtual_stages`` v > 1, v in ``VIRTUAL_STAGES``) needs ``pp > 1``, micro-batches a multiple of
  ``pp`` and layers divisible by ``pp * v``.
- ZeRO stages 2 and 3 do not combine with pipelining (DeepSpeed), a ZeRO stage needs ``dp > 1`` unless it
  carries offload, and offload (ZeRO-Offload) needs ZeRO stage 2 or 3 and no pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.models import ModelSpec

MAX_MICRO_BATCH = 512
VIRTUAL_STAGES = (1, 2, 3, 4)
"""Interleaving factors v searched. Megatron takes any v whose chunks hold whole layers (the thesis's Table 4.1
runs used v = 2 and 3); each step of v cuts the bubble by less ((p-1)/(m v)) while adding a round of
point-to-point transfers per micro-batch, so 4 bounds the search."""
FIELDS = ("dp", "tp", "pp", "micro_batch", "grad_accum", "checkpointing", "zero_stage", "offload", "virtual_stages")


def divisors(n: int) -> list[int]:
    """Positive divisors of n in increasing order."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def check_positive(name: str, value: object, where: str = "plan space") -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or int(value) < 1:
        raise ValidationError(name, value, "a positive integer", where)
    return int(value)


@dataclass(frozen=True, eq=False)
class PlanSpace:
    """Plans as columns: ``dp[i], tp[i], ...`` describe plan i. ``gpus_per_node`` is the node size assumed."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    micro_batch: np.ndarray
    grad_accum: np.ndarray
    checkpointing: np.ndarray
    zero_stage: np.ndarray
    offload: np.ndarray
    virtual_stages: np.ndarray
    global_batch: int
    gpus_per_node: int

    def __len__(self) -> int:
        return int(self.dp.shape[0])

    @property
    def gpus(self) -> np.ndarray:
        return self.dp * self.tp * self.pp

    def plan(self, i: int) -> Plan:
        return Plan(
            dp=int(self.dp[i]),
            tp=int(self.tp[i]),
            pp=int(self.pp[i]),
            micro_batch=int(self.micro_batch[i]),
            grad_accum=int(self.grad_accum[i]),
            checkpointing=bool(self.checkpointing[i]),
            zero_stage=int(self.zero_stage[i]),
            offload=bool(self.offload[i]),
            virtual_stages=int(self.virtual_stages[i]),
        )

    def subset(self, mask: np.ndarray) -> PlanSpace:
        cols = {name: getattr(self, name)[mask] for name in FIELDS}
        return PlanSpace(**cols, global_batch=self.global_batch, gpus_per_node=self.gpus_per_node)

    @staticmethod
    def from_plans(plans: list[Plan], gpus_per_node: int) -> PlanSpace:
        """Arrays for given plans (e.g. measured ones); their global batches must agree."""
        if not plans:
            raise ValidationError("plans", plans, "at least one plan")
        batches = {p.global_batch for p in plans}
        if len(batches) != 1:
            raise ValidationError("global_batch", sorted(batches), "one global batch for all plans")
        cols = {name: np.array([getattr(p, name) for p in plans]) for name in FIELDS}
        cols["checkpointing"] = cols["checkpointing"].astype(bool)
        cols["offload"] = cols["offload"].astype(bool)
        return PlanSpace(**cols, global_batch=batches.pop(), gpus_per_node=gpus_per_node)


def _options() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All combinations of (checkpointing, zero stage, offload, virtual stages), as four columns."""
    gc, z, off, v = np.meshgrid([False, True], [0, 1, 2, 3], [False, True], VIRTUAL_STAGES, indexing="ij")
    return gc.ravel(), z.ravel(), off.ravel(), v.ravel()


_GC, _Z, _OFF, _V = _options()


def enumerate_plans(
    model: ModelSpec,
    gpus: int,
    global_batch: int,
    gpus_per_node: int,
    *,
    stages: int | None = None,
    max_micro_batch: int = MAX_MICRO_BATCH,
) -> PlanSpace:
    """Every valid plan of ``model`` on exactly ``gpus`` GPUs (``stages`` fixes pp when given).

    Memory is not checked here (see ``perf.memory``): a plan can be valid and still not fit.
    """
    gpus = check_positive("gpus", gpus)
    global_batch = check_positive("global_batch", global_batch)
    gpus_per_node = check_positive("gpus_per_node", gpus_per_node)
    if stages is not None:
        check_positive("stages", stages)
    blocks: list[tuple[np.ndarray, ...]] = []
    for tp in divisors(gpus):
        if tp > gpus_per_node or gpus_per_node % tp or model.heads % tp or model.hidden % tp:
            continue
        for pp in divisors(gpus // tp):
            if model.layers % pp or (stages is not None and pp != stages):
                continue
            dp = gpus // (tp * pp)
            if global_batch % dp:
                continue
            per_replica = global_batch // dp
            mbs = np.array([b for b in divisors(per_replica) if b <= max_micro_batch], dtype=np.int64)
            ga = per_replica // mbs
            if pp > 1:
                keep = ga >= pp
                mbs, ga = mbs[keep], ga[keep]
            if mbs.size == 0:
                continue
            n_opt = _GC.size
            mb_col = np.repeat(mbs, n_opt)
            ga_col = np.repeat(ga, n_opt)
            gc, z, off, v = (np.tile(col, mbs.size) for col in (_GC, _Z, _OFF, _V))
            ok = np.ones(mb_col.size, dtype=bool)
            ok &= (z == 0) | (dp > 1) | off
            ok &= ~off | ((z >= 2) & (pp == 1))
            ok &= (pp == 1) | (z <= 1)
            ok &= (v == 1) | ((pp > 1) & (ga_col % pp == 0) & (model.layers % (pp * v) == 0))
            n = int(ok.sum())
            if n == 0:
                continue
            blocks.append(
                (
                    np.full(n, dp),
                    np.full(n, tp),
                    np.full(n, pp),
                    mb_col[ok],
                    ga_col[ok],
                    gc[ok],
                    z[ok],
                    off[ok],
                    v[ok],
                )
            )
    if not blocks:
        cols = [np.zeros(0, dtype=np.int64) for _ in FIELDS]
        cols[5] = cols[5].astype(bool)
        cols[7] = cols[7].astype(bool)
    else:
        cols = [np.concatenate(parts) for parts in zip(*blocks, strict=True)]
    return PlanSpace(*cols, global_batch=global_batch, gpus_per_node=gpus_per_node)
