"""Run a function as N real processes on this machine, torchrun-style (rank variables + a free port).

Used by ``python -m slurmplan.launch --nproc N``, the tests and the benchmarks. Each process gets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``, exactly what ``dist.DistEnv`` reads.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmplan.domain import SlurmplanError


class WorkerFailed(SlurmplanError):
    """A local worker process exited with a non-zero status."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child(rank: int, world: int, port: int, env: Mapping[str, str], target: Callable[..., Any], args: tuple) -> None:
    os.environ.update(env)
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    target(*args)


@dataclass
class LocalGroup:
    """Started worker processes; ``wait()`` joins them and raises if any failed."""

    processes: list[mp.process.BaseProcess]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def wait(self, timeout_s: float | None = None) -> list[int]:
        for p in self.processes:
            p.join(timeout_s)
        codes = [p.exitcode if p.exitcode is not None else -999 for p in self.processes]
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join()
        if any(codes):
            raise WorkerFailed(f"local workers exited with {codes}")
        return codes


def start_local(
    target: Callable[..., Any],
    nprocs: int,
    args: Sequence[Any] = (),
    *,
    env: Mapping[str, str] | None = None,
    start_method: str = "spawn",
) -> LocalGroup:
    """Start ``target(*args)`` in ``nprocs`` processes. ``spawn`` is safe everywhere; ``fork`` starts faster
    when the parent has imported torch but not yet run parallel work."""
    ctx = mp.get_context(start_method)
    port = free_port()
    procs = [
        ctx.Process(target=_child, args=(r, nprocs, port, dict(env or {}), target, tuple(args)), daemon=False)
        for r in range(nprocs)
    ]
    for p in procs:
        p.start()
    return LocalGroup(procs)


def run_local(target: Callable[..., Any], nprocs: int, args: Sequence[Any] = (), **kwargs: Any) -> list[int]:
    """Start and wait; raises :class:`WorkerFailed` if any process failed."""
    return start_local(target, nprocs, args, **kwargs).wait()
