"""The checkpoint signal: the handler only sets a flag (adaptdl's pattern).

Work inside a signal handler would interrupt a training step at any instruction. The training loop instead
reads the flag at a step boundary and all ranks agree (an all-reduce) to stop after the same step. The signal is
configurable: USR2 by default, like submitit, because NCCL uses USR1; ``SLURMPLAN_CHECKPOINT_SIGNAL`` or
``SUBMITIT_PREEMPT_SIGNAL`` override it. Slurm sends it before the time limit (``--signal=B:USR2@SECONDS``) and
the daemon when it moves a job (``scancel --signal=USR2 --batch``), both to the batch script's process.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from slurmplan.domain import ValidationError
from slurmplan.launch import early

log = logging.getLogger(__name__)

DEFAULT_SIGNAL = "USR2"


def resolve_signal(name: str | int | None = None, env: Mapping[str, str] | None = None) -> signal.Signals:
    """``"USR2"``, ``"SIGUSR2"`` or a number -> the signal; None reads the environment, then the default."""
    env = os.environ if env is None else env
    if name is None:
        name = env.get("SLURMPLAN_CHECKPOINT_SIGNAL") or env.get("SUBMITIT_PREEMPT_SIGNAL") or DEFAULT_SIGNAL
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        try:
            return signal.Signals(int(name))
        except ValueError:
            raise ValidationError("signal", name, "a signal number this system knows", "launcher") from None
    upper = name.upper()
    upper = upper if upper.startswith("SIG") else "SIG" + upper
    if not hasattr(signal.Signals, upper) or upper in ("SIGKILL", "SIGSTOP"):
        raise ValidationError("signal", name, "a catchable signal name such as USR2, TERM, INT", "launcher")
    return signal.Signals[upper]


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopFlag:
    """Set by the checkpoint signal; remembers the handler it replaced (submitit's, when run under submitit)."""

    def __init__(self, signum: signal.Signals) -> None:
        self.signum = signum
        self.triggered = False
        self.previous: Handler = None
        self._installed = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.triggered = True  # nothing else: the loop acts on it at the next step boundary

    def install(self) -> StopFlag:
        """Replace the handler; a signal the early handler (:mod:`early`) already caught counts as arrived."""
        self.previous = signal.signal(self.signum, self._handler)
        if early.is_early_handler(self.previous):
            self.previous = signal.SIG_DFL
            if early.caught(self.signum):
                self.triggered = True
                log.info("%s arrived while starting up: checkpointing after the first step", self.signum.name)
        self._installed = True
        log.info("checkpoint on %s (pid %d)", self.signum.name, os.getpid())
        return self

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(self.signum, self.previous if self.previous is not None else signal.SIG_DFL)
            self._installed = False

    @property
    def previous_is_submitit(self) -> bool:
        """True when submitit's checkpoint-and-requeue handler was installed before ours."""
        handler = self.previous
        if not callable(handler) or isinstance(handler, signal.Handlers):
            return False
        owner = getattr(handler, "__self__", None)
        module = type(owner).__module__ if owner is not None else getattr(handler, "__module__", "")
        return str(module).startswith("submitit")
