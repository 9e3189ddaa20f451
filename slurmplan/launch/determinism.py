"""Determinism switches and per-logical-worker RNG contexts.

EasyScale's D0/D1 levels: fixed seeds, deterministic kernels, no autotuning, and every logical worker (EST)
owns its RNG states (Python, NumPy, torch CPU and CUDA), swapped in before its local step and out after it. A
dropout mask then depends only on the worker's virtual rank and step, never on which process ran it or which
worker ran before it on that process.
"""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)


def enable_determinism(threads: int | None = 1) -> None:
    """Deterministic algorithms on, cuDNN autotuning off, a fixed intra-op thread count.

    The thread count matters on the CPU: a GEMM split over a different number of threads may add in a
    different order, so every process of every run of the job must use the same count.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    if threads is not None:
        torch.set_num_threads(threads)
    log.debug("determinism on, %s intra-op threads", torch.get_num_threads())


def worker_seed(seed: int, vrank: int) -> int:
    """A distinct, reproducible seed per virtual rank (fits NumPy's 32-bit seed)."""
    return (seed * 1_000_003 + 7919 * (vrank + 1)) % (2**32)


@dataclass(frozen=True)
class RngContext:
    """A snapshot of every global RNG that user code may draw from.

    Stored in checkpoints by value (plain Python objects and tensors), so it survives a restart on a
    different process count.
    """

    python: tuple[Any, ...]
    numpy: tuple[Any, ...]
    torch_cpu: torch.Tensor
    torch_cuda: tuple[torch.Tensor, ...] = ()

    @classmethod
    def capture(cls) -> RngContext:
        """The global RNGs now; on a GPU only the current device's generator, the one this process's kernels draw
        from (``dist.init`` makes the process's GPU current).

        A logical worker may resume in a process on another device index, or in one that sees fewer GPUs (a
        4-GPU job resized to 2: srun shows every task all the node's GPUs). Every device's states, restored
        there, would give the worker another device's untouched stream (different dropout masks after the
        resize) or fail on an index the process does not have.
        """
        cuda = (torch.cuda.get_rng_state(),) if torch.cuda.is_available() else ()
        return cls(random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)

    @classmethod
    def seeded(cls, seed: int) -> RngContext:
        """The context a fresh worker starts from; leaves the process's current RNG states untouched."""
        saved = cls.capture()
        every_gpu = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)  # also seeds every CUDA device
        ctx = cls.capture()
        saved.restore()
        if every_gpu is not None:
            torch.cuda.set_rng_state_all(every_gpu)
        return ctx

    def restore(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch_cpu)
        if self.torch_cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state(_current_device_state(self.torch_cuda))

    def to_state(self) -> dict[str, Any]:
        # NumPy's key array as a tensor: checkpoints are loaded weights-only, which refuses NumPy objects
        name, keys, *rest = self.numpy
        return {
            "python": self.python,
            "numpy": (name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), *rest),
            "torch_cpu": self.torch_cpu,
            "torch_cuda": list(self.torch_cuda),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RngContext:
        # A checkpoint is loaded onto the job's GPU (``map_location``: weights land where they train), and these
        # tensors come along; generator states and NumPy's keys are read on the CPU only.
        name, keys, *rest = state["numpy"]
        if isinstance(keys, torch.Tensor):
            keys = keys.cpu().numpy().astype(np.uint32)
        return cls(
            tuple(state["python"]),
            (name, keys, *rest),
            state["torch_cpu"].cpu(),
            tuple(t.cpu() for t in state.get("torch_cuda", ())),
        )


def _current_device_state(states: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The state a context restores on the current GPU.

    One state: the worker's own (what ``capture`` keeps). Several: a checkpoint written before ``capture`` kept one
    holds every device of the process that wrote it, whose own was its local rank's. This process's current index
    picks that one when the job resumes as it ran (and no longer fails where this process sees fewer GPUs than the
    writer did); the last one where it sees more.
    """
    if len(states) == 1:
        return states[0]
    return states[min(torch.cuda.current_device(), len(states) - 1)]
