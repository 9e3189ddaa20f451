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

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as tdist

from slurmplan.domain import ValidationError


def assign_workers(max_p: int, world_size: int, weights: Sequence[float] | None = None) -> tuple[tuple[int, ...], ...]:
    """Virtual ranks per process: contiguous blocks, sizes balanced (or proportional to ``weights``).

    Weights let a job on mixed GPUs give a faster GPU more workers (EasyScale's A_i); every process gets at
    least one worker.
    """
    if max_p < 1:
        raise ValidationError("max_p", max_p, "a positive number of logical workers", "launcher")
    if not 1 <= world_size <= max_p:
        allowed = f"between 1 and max_p={max_p} processes" + (
            f" (this job runs {world_size}, one per GPU: give the training script max_p={world_size}, e.g."
            f" --max-p {world_size} with --plan-workers={world_size}, or ask for at most {max_p} GPUs with"
            f" --plan-gpus=MIN:{max_p})"
            if world_size > max_p
            else ""
        )
        raise ValidationError("world_size", world_size, allowed, "launcher")
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


DEFAULT_BUCKET_MB = 4.0
"""Bucket size: each bucket costs one collective call (~0.3-1 ms of fixed cost on gloo), and smaller buckets
start communicating earlier in the backward pass; ``SLURMPLAN_BUCKET_MB`` overrides it."""


@dataclass
class _Bucket:
    """Consecutive parameters (in backward order) reduced by one collective pair. ``send`` is laid out
    ``[process, slot, chunk]``: row ``r`` holds every local worker's piece of the bucket owned by process ``r``."""

    params: list[int]
    offsets: list[int]
    numel: int
    chunk: int
    send: torch.Tensor
    recv: torch.Tensor
    part: torch.Tensor
    out: torch.Tensor
    pending: int = 0
    written: bool = False
    work: object | None = None
    gather: object | None = None


class GradientCombiner:
    """Per-worker gradients in, the mean over all maxP workers (in virtual-rank order) out.

    Every element of the result is ``((g_0 + g_1) + ... + g_{maxP-1}) / maxP`` computed left to right, whatever
    process computes it. The gradient is cut into buckets (about ``bucket_mb`` each, in backward order), and each
    bucket into one chunk per process; an all-to-all sends each chunk of every worker's gradient to the process
    that owns it, which adds it in virtual-rank order, and an all-gather shares the sums. That moves as much data
    as a ring all-reduce. With two workers in all, on two processes, one all-reduce is exact too
    (``a + b == b + a`` in floating point), so that case costs what DDP's does. For the last worker of each
    step the collectives start from backward hooks, bucket by bucket in a fixed order (the same on every
    process), so communication overlaps the rest of the backward pass, as DDP's does; the all-gather of a bucket
    starts as soon as its sum is done. With one process nothing is sent, and with one worker the gradients are
    left where backward put them.
    """

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        assignment: tuple[tuple[int, ...], ...],
        rank: int,
        bucket_mb: float | None = None,
    ):
        self.params = [p for p in params if p.requires_grad]
        self.assignment = assignment
        self.rank = rank
        self.world = len(assignment)
        self.max_p = sum(len(a) for a in assignment)
        self.mine = len(assignment[rank])
        self.slots = max(len(a) for a in assignment)
        self.numel = sum(p.numel() for p in self.params)
        device = self.params[0].device if self.params else torch.device("cpu")
        dtype = self.params[0].dtype if self.params else torch.float32
        self._filled = 0
        self._armed = False
        self._next = 0
        self._sources = [(src, slot) for src, vranks in enumerate(assignment) for slot, _ in enumerate(vranks)]
        self._sources.sort(key=lambda sv: assignment[sv[0]][sv[1]])  # virtual-rank order
        if self.world == 1:
            self.chunk = self.numel
            self._local = torch.zeros(self.slots, self.numel, device=device, dtype=dtype)
            self.buckets: list[_Bucket] = []
            return
        self.pairwise = self.world == 2 and self.max_p == 2  # g0 + g1 == g1 + g0: an all-reduce is exact
        bucket_mb = (
            bucket_mb if bucket_mb is not None else float(os.environ.get("SLURMPLAN_BUCKET_MB", DEFAULT_BUCKET_MB))
        )
        cap = max(1, int(bucket_mb * 2**20) // max(1, torch.empty((), dtype=dtype).element_size()))
        groups: list[list[int]] = [[]]
        size = 0
        for i in reversed(range(len(self.params))):  # backward produces the last layers' gradients first
            if groups[-1] and size + self.params[i].numel() > cap:
                groups.append([])
                size = 0
            groups[-1].append(i)
            size += self.params[i].numel()
        self.buckets = []
        self._bucket_of: dict[int, int] = {}
        for b, idx in enumerate(g for g in groups if g):
            offsets, n = [], 0
            for i in idx:
                offsets.append(n)
                n += self.params[i].numel()
                self._bucket_of[i] = b
            if self.pairwise:  # all-reduced in place: [1 slot, n]
                send = torch.zeros(1, n, device=device, dtype=dtype)
                self.buckets.append(_Bucket(idx, offsets, n, n, send, send, send[0], send))
                continue
            chunk = -(-n // self.world)
            send = torch.zeros(self.world, self.slots, chunk, device=device, dtype=dtype)
            self.buckets.append(
                _Bucket(idx, offsets, n, chunk, send, torch.empty_like(send),
                        torch.empty(chunk, device=device, dtype=dtype),
                        torch.empty(self.world, chunk, device=device, dtype=dtype))
            )  # fmt: skip
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda param, i=i: self._grad_ready(i))

    # ---------------------------------------------------------------- filling the send buffers

    def _write(self, bucket: _Bucket, slot: int) -> None:
        """Copy the bucket's ``.grad`` into ``slot`` of its send buffer (zeros for unused parameters)."""
        for i, offset in zip(bucket.params, bucket.offsets, strict=True):
            p = self.params[i]
            flat = p.grad.reshape(-1) if p.grad is not None else None
            if self.pairwise:
                target = bucket.send[slot, offset : offset + p.numel()]
                target.zero_() if flat is None else target.copy_(flat)
                p.grad = None
                continue
            pos, done, n = offset, 0, p.numel()
            while done < n:
                row, col = divmod(pos, bucket.chunk)
                take = min(n - done, bucket.chunk - col)
                target = bucket.send[row, slot, col : col + take]
                if flat is None:
                    target.zero_()
                else:
                    target.copy_(flat[done : done + take])
                pos, done = pos + take, done + take
            p.grad = None
        bucket.written = True

    def _launch_ready(self) -> None:
        """Start the all-to-all of every written bucket, in bucket order (the same order on every process)."""
        while self._next < len(self.buckets) and self.buckets[self._next].written:
            b = self.buckets[self._next]
            if self.pairwise:
                b.work = tdist.all_reduce(b.send, async_op=True)
            else:
                b.work = tdist.all_to_all_single(b.recv, b.send, async_op=True)
            self._next += 1

    def _grad_ready(self, i: int) -> None:
        if not self._armed:
            return
        b = self.buckets[self._bucket_of[i]]
        b.pending -= 1
        if b.pending == 0:
            self._write(b, self._filled)
            self._launch_ready()

    def arm(self) -> None:
        """Call before the backward pass of this process's last worker's last micro-batch: its gradients then
        leave for their owners bucket by bucket while backward goes on."""
        if self.world == 1 or self._filled != self.mine - 1:
            return
        for b in self.buckets:
            b.pending, b.written = len(b.params), False
        self._next = 0
        self._armed = True

    def take(self) -> None:
        """Move the current ``.grad`` of every parameter into the next local worker's slot and clear it."""
        if self.world == 1:
            if self.max_p == 1:  # the mean of one worker is its gradient: leave it in place
                self._filled += 1
                return
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
        elif self._armed:  # the last worker: hooks wrote most buckets; write and start the rest now
            for b in self.buckets:
                if not b.written:
                    self._write(b, self._filled)
            self._launch_ready()
        else:
            for b in self.buckets:
                self._write(b, self._filled)
            if self._filled == self.mine - 1:
                self._next = 0
                self._launch_ready()
        self._filled += 1

    # ---------------------------------------------------------------- the ordered sum

    def combine(self) -> None:
        """Add all workers' gradients in virtual-rank order, divide by maxP, and set every ``.grad``."""
        if self._filled != self.mine:
            raise RuntimeError(f"{self._filled} worker gradients taken, {self.mine} workers on this process")
        self._filled, self._armed = 0, False
        if self.world == 1:
            self._combine_local()
            return
        if self.pairwise:
            self._combine_pair()
            return
        for b in self.buckets:
            b.work.wait()  # type: ignore[union-attr]
            src, slot = self._sources[0]
            torch.add(b.recv[src, slot], b.recv[self._sources[1][0], self._sources[1][1]], out=b.part)
            for src, slot in self._sources[2:]:
                b.part.add_(b.recv[src, slot])
            b.part.div_(self.max_p)
            b.gather = tdist.all_gather(list(b.out.unbind(0)), b.part, async_op=True)
        for b in self.buckets:
            b.gather.wait()  # type: ignore[union-attr]
            b.written = False
            flat = b.out.view(-1)
            for i, offset in zip(b.params, b.offsets, strict=True):
                p = self.params[i]
                p.grad = flat[offset : offset + p.numel()].view_as(p)  # a view: no copy

    def _combine_pair(self) -> None:
        """Two workers on two processes: the all-reduce added g0 + g1 in place (two operands: one rounding,
        whatever the order), so only the division by 2 is left."""
        for b in self.buckets:
            b.work.wait()  # type: ignore[union-attr]
            b.written = False
            b.part.div_(2)
            for i, offset in zip(b.params, b.offsets, strict=True):
                p = self.params[i]
                p.grad = b.part[offset : offset + p.numel()].view_as(p)

    def _combine_local(self) -> None:
        if self.max_p == 1:
            return
        rows = self._local
        part = rows[0].clone()  # fresh every step: the gradients below are views into it
        for v in range(1, self.max_p):
            part.add_(rows[v])
        part.div_(self.max_p)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = part[offset : offset + n].view_as(p)
            offset += n
