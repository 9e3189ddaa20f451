"""Example training script for the slurmplan launcher; runs on a CPU in a few seconds.

The user part is the four things below the imports: a model factory, a dataset, a loss and an optimizer
factory. Everything else (processes, logical workers, checkpoints, requeueing, throughput reports, the plan the
scheduler assigned) is the launcher's. Ways to run it:

    python templates/example_train.py --steps 50 --checkpoint-dir /tmp/ckpt          # one process
    python -m slurmplan.launch --nproc 2 templates/example_train.py:make_spec -- --steps 50
    srun python templates/example_train.py --checkpoint-dir $SCRATCH/ckpt             # in an sbatch script

In an sbatch script add ``#SBATCH --signal=B:USR2@120`` and ``#SBATCH --requeue``: two minutes before the time
limit the job checkpoints after its current step, requeues and later resumes on however many GPUs it gets,
learning exactly what it would have learned without the break. The signal (Slurm's, and the daemon's
``scancel --batch``) reaches the batch script's process: ``exec`` the training there, or, under srun, trap and
forward it as ``templates/elastic_dp.sbatch`` does.
"""

from __future__ import annotations

from slurmplan.launch.early import catch_early

catch_early()  # first: a checkpoint signal while torch is imported is remembered, not fatal

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

from slurmplan.domain import SlurmplanError  # noqa: E402
from slurmplan.launch import TrainSpec, run  # noqa: E402
from slurmplan.launch.trainer import ReportedByAnotherRank  # noqa: E402


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4)
    )


class NoisyBlobs(torch.utils.data.Dataset):
    """Four Gaussian blobs in 16 dimensions; items get random noise (augmentation) from the global RNG."""

    def __init__(self, n: int = 512, seed: int = 1234) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.centres = torch.randn(4, 16, generator=gen) * 3
        self.labels = torch.randint(0, 4, (n,), generator=gen)
        self.points = self.centres[self.labels] + torch.randn(n, 16, generator=gen)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.points[i] + 0.1 * torch.randn(16), self.labels[i]


def make_optimizer(params) -> torch.optim.Optimizer:  # noqa: ANN001
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=1e-4)


def make_scheduler(optimizer: torch.optim.Optimizer):  # noqa: ANN201
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument(
        "--max-p", type=int, default=4, help="logical workers (fixed for the job's life; = the job's --plan-workers)"
    )
    p.add_argument("--worker-batch", type=int, default=8, help="samples per logical worker per step")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to wait per step (demos and tests)")
    return p.parse_args(argv)


def make_spec(argv: list[str] | None = None) -> TrainSpec:
    args = parse_args(argv)

    def slow_down(step: int, loss: float) -> None:
        if args.step_sleep:
            time.sleep(args.step_sleep)

    return TrainSpec(
        model_factory=make_model,
        dataset=NoisyBlobs(),
        loss_fn=nn.functional.cross_entropy,
        optimizer_factory=make_optimizer,
        scheduler_factory=make_scheduler,
        steps=args.steps,
        max_p=args.max_p,
        worker_batch=args.worker_batch,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        model_name="example-mlp",
        on_step=slow_down,
        log_every=5,
    )


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 finished or requeued, 75 checkpointed but not requeued, 1 error (see ``Outcome``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = run(make_spec(argv))
    except ReportedByAnotherRank:
        return 1  # rank 0 printed the error
    except SlurmplanError as exc:
        print(f"example_train: error: {exc}", file=sys.stderr)
        return 1
    logging.getLogger("example").info(
        "%s at step %d on %d processes", result.outcome.value, result.step, result.world_size
    )
    return result.outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
