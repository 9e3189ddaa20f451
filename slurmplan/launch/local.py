"""Run a function as N real processes on this machine, torchrun-style (rank variables + a free port).

Used by ``python -m slurmplan.launch --nproc N``, the tests and the benchmarks. Each process gets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``, exactly what ``dist.DistEnv`` reads.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmplan.domain import SlurmplanError
from slurmplan.launch import early

log = logging.getLogger(__name__)


class WorkerFailed(SlurmplanError):
    """A local worker process exited with a non-zero status."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child(
    rank: int, world: int, port: int, env: Mapping[str, str], target: Callable[..., Any], args: tuple, held: int | None
) -> None:
    if held is not None:  # started with ``held`` blocked: remember it instead of dying, then let it in
        early.catch_early(held)
        early.unblock(held)
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

    def forward(self, signum: int) -> None:
        """Send ``signum`` to every worker (no ``exitcode`` poll: this runs inside a signal handler while the
        main thread may be waiting on the same processes)."""
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def exit_codes(self, ok: Sequence[int] = (0,), grace_s: float = 30.0) -> list[int]:
        """Join every worker (Python's handlers still run while waiting); a signal death reads -signum.

        Once a worker exits with a status not in ``ok``, the others get ``grace_s`` to notice (they usually fail
        at their next collective) and are then terminated, rather than waiting out the process-group timeout.
        """
        pending = {p.sentinel: p for p in self.processes}
        failed_at: float | None = None
        while pending:
            timeout = None if failed_at is None else max(0.0, failed_at + grace_s - time.monotonic())
            ready = mp_connection.wait(list(pending), timeout)
            for sentinel in ready:
                proc = pending.pop(sentinel)  # type: ignore[arg-type]
                proc.join()
                if proc.exitcode not in ok and failed_at is None:
                    failed_at = time.monotonic()
            if not ready and failed_at is not None:
                for proc in pending.values():
                    log.warning("terminating worker pid %s: another worker failed", proc.pid)
                    proc.terminate()
                    proc.join(10)
                    if proc.is_alive():
                        proc.kill()
                        proc.join()
                break
        return [int(p.exitcode) if p.exitcode is not None else -999 for p in self.processes]

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
    hold_signal: int | None | bool = True,
) -> LocalGroup:
    """Start ``target(*args)`` in ``nprocs`` processes. ``spawn`` is safe everywhere; ``fork`` starts faster
    when the parent has imported torch but not yet run parallel work.

    ``hold_signal`` (default: the checkpoint signal) is blocked while the workers start, so a worker still
    importing torch does not die of it: each worker remembers it once its early handler is in (``early``), and
    the trainer acts on it after its first step. ``None`` or ``False`` starts workers with the parent's mask.
    """
    held = int(early.default_signal()) if hold_signal is True else (int(hold_signal) if hold_signal else None)
    ctx = mp.get_context(start_method)
    port = free_port()
    procs = [
        ctx.Process(target=_child, args=(r, nprocs, port, dict(env or {}), target, tuple(args), held), daemon=False)
        for r in range(nprocs)
    ]
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {held}) if held is not None else None
    try:
        for p in procs:
            p.start()
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    return LocalGroup(procs)


def supervise(
    target: Callable[..., Any],
    nprocs: int,
    args: Sequence[Any] = (),
    *,
    signum: int,
    ok: Sequence[int] = (0,),
    **kwargs: Any,
) -> list[int]:
    """The ``--nproc N`` parent: start the workers, forward ``signum`` to them, return their exit codes.

    The forwarding handler is in place before the first worker starts (the signal is blocked meanwhile), and a
    signal the parent's early handler caught before that is forwarded once the workers exist. The parent
    itself never dies of the signal: it waits for the workers' checkpoint and exits as they do.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    group: LocalGroup | None = None

    def forward(sig: int, frame: object) -> None:
        if group is not None:
            log.info("forwarding %s to workers %s", signal.Signals(sig).name, group.pids)
            group.forward(sig)

    previous = signal.signal(signum, forward)
    try:
        group = start_local(target, nprocs, args, hold_signal=signum, **kwargs)
        if early.caught(signum):
            forward(signum, None)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a signal held back meanwhile is forwarded now
        return group.exit_codes(ok)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)


def run_local(target: Callable[..., Any], nprocs: int, args: Sequence[Any] = (), **kwargs: Any) -> list[int]:
    """Start and wait; raises :class:`WorkerFailed` if any process failed."""
    return start_local(target, nprocs, args, **kwargs).wait()
