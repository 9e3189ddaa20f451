"""Elastic logical workers (EasyScale's ESTs): placement, data order and gradient combination.

maxP logical workers are fixed when the job is submitted. Whatever number of processes the job holds now,
each process runs its share of workers in turn. Three things make the result independent of that spread:

* the samples a worker sees are a pure function of (seed, step, virtual rank) — :class:`WorkerSampler`;
* each worker's RNG states travel with it (``determinism.RngContext``);
* gradients are combined in one fixed order of virtual ranks — :class:`GradientCombiner`. An all-reduce would
  add in an order that depends on the number of processes; here each element is added worker 0 first, by
  whichever process owns that element's chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as tdist

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
    """Per-worker gradients in, the mean over all maxP workers (in virtual-rank order) out.

    Every element of the result is ``((g_0 + g_1) + ... + g_{maxP-1}) / maxP`` computed left to right, whatever
    process computes it. The flat gradient is cut into one chunk per process; an all-to-all sends each chunk of
    every worker's gradient to the process that owns the chunk, which adds its chunk in virtual-rank order, and
    an all-gather shares the sums. That moves about as much data as DDP's reduce-scatter + all-gather, instead
    of the maxP copies an all-gather of whole gradients would move.
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], assignment: tuple[tuple[int, ...], ...], rank: int):
        self.params = [p for p in params if p.requires_grad]
        self.assignment = assignment
        self.rank = rank
        self.world = len(assignment)
        self.max_p = sum(len(a) for a in assignment)
        self.slots = max(len(a) for a in assignment)
        self.numel = sum(p.numel() for p in self.params)
        self.chunk = -(-self.numel // self.world)
        device = self.params[0].device if self.params else torch.device("cpu")
        dtype = self.params[0].dtype if self.params else torch.float32
        self._local = torch.zeros(self.slots, self.chunk * self.world, device=device, dtype=dtype)
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

    def _exchange(self) -> dict[int, torch.Tensor]:
        """This process's chunk of every worker's gradient, by virtual rank."""
        if self.world == 1:
            return {v: self._local[slot] for slot, v in enumerate(self.assignment[0])}
        send = self._local.view(self.slots, self.world, self.chunk).transpose(0, 1).contiguous()
        recv = torch.empty_like(send)  # [source process, slot, chunk]
        tdist.all_to_all_single(recv, send)
        return {v: recv[src][slot] for src, vranks in enumerate(self.assignment) for slot, v in enumerate(vranks)}

    def combine(self) -> None:
        """Add all workers' gradients in virtual-rank order, divide by maxP, and set every ``.grad``."""
        mine = len(self.assignment[self.rank])
        if self._filled != mine:
            raise RuntimeError(f"{self._filled} worker gradients taken, {mine} workers on this process")
        rows = self._exchange()
        part = rows[0].clone()
        for v in range(1, self.max_p):
            part.add_(rows[v])
        part.div_(self.max_p)
        total = torch.cat(dist.all_gather_tensor(part)) if self.world > 1 else part
        offset = 0
        for p in self.params:  # views into ``total``: it is fresh every step, so no copy is needed
            n = p.numel()
            p.grad = total[offset : offset + n].view_as(p)
            offset += n
        self._filled = 0
