"""What a user hands the launcher, and what it hands back.

The user writes a model factory, a dataset, a loss and an optimizer factory; everything about processes,
logical workers, checkpoints, requeueing and reports is the launcher's. The hyper-parameters that define what
the model learns (``max_p``, ``worker_batch``, ``seed``) are fixed for the job's life; the plan only changes how
the work is spread and cut into micro-batches.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from slurmplan.domain import ValidationError
from slurmplan.launch.requeue import RequeueMode

ModelFactory = Callable[[], nn.Module]
OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
SchedulerFactory = Callable[[torch.optim.Optimizer], Any]
LossFn = Callable[[Any, Any], torch.Tensor]
StepLossFn = Callable[[nn.Module, Any], torch.Tensor]


@dataclass(frozen=True)
class TrainSpec:
    """A training job as the launcher runs it.

    ``dataset`` is map-style (``len`` and ``[i]``), returning ``(inputs, targets)`` pairs unless ``batch_loss``
    is given, which then computes the loss from the model and a collated batch. Global batch per step =
    ``max_p * worker_batch``, exactly as data-parallel training with ``max_p`` workers.

    What is exact: parameters, optimizer and scheduler state, every worker's RNG states and every module buffer
    (BatchNorm running statistics are kept per logical worker; the model's buffers are worker 0's) are bitwise
    the same on any number of processes and across resizes, given the same ``micro_batch``, ``cpu_threads``,
    PyTorch build and device type. What is not: a different ``micro_batch`` (``follow_plan_micro_batch``)
    changes results (see there); GPU kernels without a deterministic implementation (``enable_determinism``
    makes PyTorch raise for those); and other hardware, another PyTorch build or CPU vs GPU give other bits.
    With activation checkpointing a BatchNorm forward is recomputed, so running statistics advance twice per
    micro-batch; that is the same on every spread, but differs from a run without checkpointing.
    """

    model_factory: ModelFactory
    dataset: Any
    loss_fn: LossFn | None
    optimizer_factory: OptimizerFactory
    steps: int
    max_p: int = 1
    worker_batch: int = 1
    checkpoint_dir: str | Path | None = None
    scheduler_factory: SchedulerFactory | None = None
    batch_loss: StepLossFn | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    seed: int = 0
    shuffle: bool = True
    checkpoint_every: int = 0
    """Also checkpoint every this many steps (0: only when signalled and at the end)."""
    keep_checkpoints: int = 2
    micro_batch: int | None = None
    """Samples per micro-batch inside a worker (gradient accumulation = worker_batch / micro_batch); None: one
    micro-batch per worker, or the plan's with ``follow_plan_micro_batch``."""
    follow_plan_micro_batch: bool = False
    """Let the scheduler's plan choose the micro-batch (saves memory). Off by default, because a different split
    changes results, not only their rounding: dropout masks and data augmentation are drawn per micro-batch in a
    different order, and BatchNorm normalizes over each micro-batch (a measured difference of 3.8e-2 in the loss
    of a dropout model). Without dropout, augmentation or BatchNorm only the rounding changes."""
    activation_checkpointing: bool | None = None
    """None follows the plan's ``checkpointing`` flag."""
    checkpoint_modules: tuple[str, ...] | None = None
    model_name: str = "model"
    cpu_threads: int | None = 1
    """Intra-op threads, held equal across runs so CPU sums stay bitwise identical (None: torch's default)."""
    checkpoint_signal: str | None = None
    """Signal that asks for checkpoint-and-requeue; None: $SLURMPLAN_CHECKPOINT_SIGNAL or USR2."""
    requeue: RequeueMode = RequeueMode.AUTO
    max_requeues: int = 20
    report_every_s: float = 60.0
    backend: str | None = None
    on_step: Callable[[int, float], None] | None = None
    """Called on every rank after each global step with (step, loss): logging, evaluation. The loss is the mean over
    all ``max_p`` logical workers (each worker's mean over its micro-batches), the same on every rank and on any
    process count."""
    log_every: int = 10

    def __post_init__(self) -> None:
        for name in ("steps", "max_p", "worker_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValidationError(name, value, "a positive integer", "train spec")
        if self.loss_fn is None and self.batch_loss is None:
            raise ValidationError("loss_fn", None, "a loss(outputs, targets) or a batch_loss(model, batch)", "spec")
        if self.micro_batch is not None and (self.micro_batch < 1 or self.worker_batch % self.micro_batch):
            raise ValidationError("micro_batch", self.micro_batch, f"a divisor of {self.worker_batch}", "spec")
        if self.checkpoint_every < 0:
            raise ValidationError("checkpoint_every", self.checkpoint_every, "0 or a positive step count", "spec")

    @property
    def global_batch(self) -> int:
        return self.max_p * self.worker_batch


EXIT_CHECKPOINTED = 75
"""Exit status of a run that checkpointed and stopped but was *not* requeued (EX_TEMPFAIL: run it again to
resume). Non-zero so that Slurm records the job FAILED rather than COMPLETED, and ``a && b`` does not go on."""
EXIT_ERROR = 1
"""Exit status of a run stopped by an error (already reported in one line on stderr)."""


class Outcome(enum.Enum):
    """How a run ended, and the process exit status each outcome gives (``python -m slurmplan.launch``,
    ``templates/example_train.py``, and every worker and the parent of ``--nproc N``):

    ========== ==== ================================================================================
    FINISHED   0    all steps done (also when the signal arrived during the last step: nothing requeued)
    REQUEUED   0    checkpointed and put back in the Slurm queue; Slurm ends this run and restarts the job
    CHECKPOINTED 75 checkpointed, not requeued (outside Slurm, ``requeue=NONE``, the countdown ran out, or
                    ``scontrol requeue`` failed): the job is not complete, so the status is not 0
    ========== ==== ================================================================================
    """

    FINISHED = "finished"
    """All steps done."""
    REQUEUED = "requeued"
    """Checkpointed on the signal and put back in the Slurm queue."""
    CHECKPOINTED = "checkpointed"
    """Checkpointed on the signal and stopped without requeueing (outside Slurm, or the countdown ran out)."""

    @property
    def exit_code(self) -> int:
        return EXIT_CHECKPOINTED if self is Outcome.CHECKPOINTED else 0


@dataclass(frozen=True)
class TrainResult:
    outcome: Outcome
    step: int
    world_size: int
    checkpoint: Path | None = None
    samples_per_s: float | None = None
    resumed_from: int | None = None
