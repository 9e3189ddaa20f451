"""Catch the checkpoint signal from the first lines of a process, before anything slow is imported.

USR2's default action kills the process. Importing torch takes about a second, and a signal that lands in that
window (or while a ``--nproc`` parent is still starting its workers) would kill the job with nothing saved. So
the entry points call :func:`catch_early` first: it installs a handler that only *remembers* the signal, and
:class:`slurmplan.launch.signals.StopFlag` takes the remembered signal over when the training loop starts.
This module imports nothing but the standard library, so it costs nothing to import first.

The first ~30 ms of the interpreter, before any Python line runs, cannot be covered from inside. Whoever starts
the process closes that window: with the signal *blocked* (``env --block-signal=USR2``, as the elastic template
does, or the ``--nproc`` parent's mask) it waits, pending, and :func:`catch_early` lets it in once the handler is
there; with the signal *ignored* (``trap '' USR2`` before ``exec``) it is dropped in that window, and
:func:`catch_early` takes the signal over from the ignore.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from types import FrameType

_caught: dict[int, int] = {}


def default_signal(env: Mapping[str, str] | None = None) -> signal.Signals:
    """The configured checkpoint signal, leniently (an unknown name falls back to USR2; ``signals.resolve_signal``
    reports it properly once the launcher runs)."""
    env = os.environ if env is None else env
    name = (env.get("SLURMPLAN_CHECKPOINT_SIGNAL") or env.get("SUBMITIT_PREEMPT_SIGNAL") or "USR2").upper()
    try:
        if name.isdigit():
            return signal.Signals(int(name))
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except (KeyError, ValueError):
        return signal.SIGUSR2


def _remember(signum: int, frame: FrameType | None) -> None:
    _caught[signum] = _caught.get(signum, 0) + 1


def catch_early(signum: int | None = None) -> signal.Signals:
    """Remember ``signum`` (default: the configured checkpoint signal) instead of dying of it; returns it.

    Takes over from the default action and from an ignore (a shell's ``trap '' USR2`` that bridged ``exec``: the
    launcher replaces it anyway once it trains), then unblocks the signal, so one held back by an inherited mask
    arrives now and is remembered. Leaves a handler someone else installed (submitit's) alone: that one already
    survives the signal.
    """
    sig = signal.Signals(signum) if signum is not None else default_signal()
    current = signal.getsignal(sig)
    if current in (signal.SIG_DFL, signal.SIG_IGN, None) or current is _remember:
        signal.signal(sig, _remember)
        unblock(sig)
    return sig


def is_early_handler(handler: object) -> bool:
    return handler is _remember


def caught(signum: int) -> int:
    """How many times ``signum`` arrived while only the early handler was installed."""
    return _caught.get(int(signum), 0)


def unblock(signum: int) -> None:
    """Deliver a ``signum`` held back by a blocked signal mask (inherited from a ``--nproc`` parent)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
