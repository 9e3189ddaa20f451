"""Elastic logical workers (EasyScale's ESTs): placement, data order and gradient combination.

maxP logical workers are fixed when the job is submitted. Whatever number of processes the job holds now,
each process runs its share of workers in turn. Three things make the result independent of that spread:

* the samples a worker sees are a pure function of (seed, step, virtual rank) — :class:`WorkerSampler`;
* each worker's RNG states travel with it (``determinism.RngContext``);
* gradients are combined in one fixed order of virtual ranks — :class:`GradientCombiner`. An all-reduce would
  add in an order that depends on the number of processes, so every process instead all-gathers the
  per-worker gradients and adds them itself, worker 0 first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from slurmplan.domain import ValidationError
from slurmplan.launch import dist


def assign_workers(max_p: int, world_size: int, weights: Sequence[float] | None = None) -> tuple[tuple[int, ...], ...]:
    """Virtual ranks per process: contiguous blocks, sizes balanced (or proportional to ``weights``).

    Weights let a job on mixed GPUs give a faster GPU more workers (EasyScale's A_i); every process gets at
    least one worker.
    """
    if max_p < 1:
        raise ValidationError("max_p", max_p, "a positive number of logical workers", "launcher")
    if not 1 <= world_size <= max_p:
        raise ValidationError("world_size", world_size, f"between 1 and max_p={max_p} processes", "launcher")
    if weights is None:
        counts = [(r + 1) * max_p // world_size - r * max_p // world_size for r in range(world_size)]
    else:
        if len(weights) != world_size or any(w <= 0 for w in weights):
            raise ValidationError("weights", tuple(weights), f"{world_size} positive numbers", "launcher")
        counts = _proportional(max_p, world_size, weights)
    out, start = [], 0
    for c in counts:
        out.append(tuple(range(start, start + c)))
        start += c
    return tuple(out)


def _proportional(max_p: int, world_size: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder split of ``max_p - world_size`` extra workers over one guaranteed worker each."""
    extra = max_p - world_size
    total = float(sum(weights))
    raw = [extra * w / total for w in weights]
    counts = [int(x) for x in raw]
    order = sorted(range(world_size), key=lambda r: (-(raw[r] - counts[r]), r))
    for r in order[: extra - sum(counts)]:
        counts[r] += 1
    return [c + 1 for c in counts]


@dataclass
class WorkerSampler:
    """Sample order as a function of (seed, step, virtual rank), like DDP over maxP workers.

    The data stream is the concatenation of one permutation per epoch; step ``s`` takes the next
    ``max_p * worker_batch`` positions, and worker ``v`` takes its contiguous slice of them. The data position to
    checkpoint is therefore just the step number.
    """

    dataset_len: int
    max_p: int
    worker_batch: int
    seed: int = 0
    shuffle: bool = True
    _perms: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.dataset_len < 1:
            raise ValidationError("dataset", self.dataset_len, "a dataset with at least one sample", "launcher")

    def _perm(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perms:
            if len(self._perms) > 2:
                self._perms.clear()
            if self.shuffle:
                gen = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
                self._perms[epoch] = torch.randperm(self.dataset_len, generator=gen)
            else:
                self._perms[epoch] = torch.arange(self.dataset_len)
        return self._perms[epoch]

    def indices(self, step: int, vrank: int, micro: int = 0, micro_batch: int | None = None) -> list[int]:
        """Dataset indices of micro-batch ``micro`` of worker ``vrank`` at global step ``step``."""
        mb = micro_batch or self.worker_batch
        start = step * self.max_p * self.worker_batch + vrank * self.worker_batch + micro * mb
        out = []
        for pos in range(start, start + mb):
            epoch, offset = divmod(pos, self.dataset_len)
            out.append(int(self._perm(epoch)[offset]))
        return out

    def epoch(self, step: int) -> int:
        return step * self.max_p * self.worker_batch // self.dataset_len


class GradientCombiner:
    """Per-worker gradients in, the mean over all maxP workers (in virtual-rank order) out."""

    def __init__(self, params: Sequence[torch.nn.Parameter], assignment: tuple[tuple[int, ...], ...], rank: int):
        self.params = [p for p in params if p.requires_grad]
        self.assignment = assignment
        self.rank = rank
        self.max_p = sum(len(a) for a in assignment)
        self.slots = max(len(a) for a in assignment)
        self.numel = sum(p.numel() for p in self.params)
        device = self.params[0].device if self.params else torch.device("cpu")
        dtype = self.params[0].dtype if self.params else torch.float32
        self._local = torch.zeros(self.slots, self.numel, device=device, dtype=dtype)
        self._filled = 0

    def take(self) -> None:
        """Move the current ``.grad`` of every parameter into the next local worker's slot and clear it."""
        row = self._local[self._filled]
        offset = 0
        for p in self.params:
            n = p.numel()
            if p.grad is None:
                row[offset : offset + n].zero_()
            else:
                row[offset : offset + n].copy_(p.grad.reshape(-1))
                p.grad = None
            offset += n
        self._filled += 1

    def combine(self) -> None:
        """Gather all workers' gradients, add them in virtual-rank order, divide by maxP, set ``.grad``."""
        mine = len(self.assignment[self.rank])
        if self._filled != mine:
            raise RuntimeError(f"{self._filled} worker gradients taken, {mine} workers on this process")
        if mine < self.slots:
            self._local[mine:].zero_()
        gathered = dist.all_gather_tensor(self._local)
        rows: dict[int, torch.Tensor] = {}
        for r, vranks in enumerate(self.assignment):
            for slot, v in enumerate(vranks):
                rows[v] = gathered[r][slot]
        total = rows[0].clone()
        for v in range(1, self.max_p):
            total.add_(rows[v])
        total.div_(self.max_p)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = total[offset : offset + n].view_as(p).clone()
            offset += n
        self._filled = 0
