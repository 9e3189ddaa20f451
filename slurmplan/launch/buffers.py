"""Module buffers kept per logical worker (EasyScale's way), so BatchNorm statistics do not depend on the spread.

A BatchNorm layer updates ``running_mean``, ``running_var`` and ``num_batches_tracked`` in every training
forward. If a process ran its workers one after another on one copy of those buffers, the statistics would
depend on how many workers share a process (48 updates on one process, 12 on each of four). Instead every
logical worker owns its buffers, as it owns its RNG states: they are swapped in before the worker's forward
passes and saved back after, travel in the checkpoint, and follow the worker to whichever process runs it next.

The model's own buffers (what ``model.state_dict()`` and the checkpoint's ``model`` hold, and what evaluation
uses) are those of the process's first worker; on rank 0 that is worker 0, as DDP's ``broadcast_buffers``
makes rank 0's buffers the model's. A model without buffers costs nothing here, and a process with a single
worker aliases the model's buffers instead of copying them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def persistent_buffers(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Buffers that ``state_dict`` saves (running statistics), not constants registered ``persistent=False``."""
    saved = set(model.state_dict().keys())
    return [(name, buf) for name, buf in model.named_buffers() if name in saved]


class WorkerBuffers:
    """The buffers of each local logical worker; :meth:`enter` before its forward passes, :meth:`leave` after."""

    def __init__(self, model: nn.Module, vranks: Sequence[int]) -> None:
        named = persistent_buffers(model)
        self.names = [n for n, _ in named]
        self.live = [b for _, b in named]
        self.vranks = tuple(vranks)
        self.alias = len(self.vranks) == 1  # one worker: the model's buffers are that worker's
        self.saved = {v: (self.live if self.alias else [b.detach().clone() for b in self.live]) for v in self.vranks}
        self.active: int | None = self.vranks[0] if self.vranks else None

    def __bool__(self) -> bool:
        return bool(self.live)

    def enter(self, vrank: int) -> None:
        if self.alias or self.active == vrank or not self.live:
            self.active = vrank
            return
        with torch.no_grad():
            for live, saved in zip(self.live, self.saved[vrank], strict=True):
                live.copy_(saved)
        self.active = vrank

    def leave(self, vrank: int) -> None:
        if self.alias or not self.live:
            return
        with torch.no_grad():
            for live, saved in zip(self.live, self.saved[vrank], strict=True):
                saved.copy_(live)

    def state(self, vrank: int) -> dict[str, torch.Tensor]:
        return {n: t.detach().clone() for n, t in zip(self.names, self.saved[vrank], strict=True)}

    def load(self, vrank: int, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, saved in zip(self.names, self.saved[vrank], strict=True):
                saved.copy_(state[name])
        if self.active == vrank and not self.alias:
            self.active = None  # the live copy is stale now
