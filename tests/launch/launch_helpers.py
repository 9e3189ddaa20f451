"""A tiny training job and helpers to run it as several real processes (gloo on 127.0.0.1, a free port).

Processes are forked from the test process when it has a single thread (it imports torch but never runs
parallel torch work before forking), so the children start in a fraction of a second instead of re-importing
torch. When other threads exist (another fixture started some), forking could inherit a held lock, so they
are spawned instead; everything handed to them is therefore picklable.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch._inductor  # noqa: F401  # imported once here: use_deterministic_algorithms imports it (~2 s a process)
from torch import nn

from slurmplan.launch import TrainSpec, run
from slurmplan.launch.checkpoint import CheckpointStore
from slurmplan.launch.local import LocalGroup, run_local, start_local


class AugmentedData(torch.utils.data.Dataset):
    """Items draw from the Python, NumPy and torch global RNGs, so each worker's RNG context matters."""

    def __init__(self, n: int = 64) -> None:
        gen = torch.Generator().manual_seed(7)
        self.x = torch.randn(n, 8, generator=gen)
        self.y = torch.randint(0, 3, (n,), generator=gen)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        jitter = torch.randn(8) * 0.05 + float(np.random.rand()) * 0.01 + random.random() * 0.01
        return self.x[i] + jitter, self.y[i]


def tiny_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 32), nn.Tanh(), nn.Dropout(0.3), nn.Linear(32, 3)
    )


def tiny_spec(steps: int, checkpoint_dir: Path | str | None, **overrides: Any) -> TrainSpec:
    fields: dict[str, Any] = {
        "model_factory": tiny_model,
        "dataset": AugmentedData(),
        "loss_fn": nn.functional.cross_entropy,
        "optimizer_factory": lambda p: torch.optim.AdamW(p, lr=0.05),
        "scheduler_factory": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.7),
        "steps": steps,
        "max_p": 4,
        "worker_batch": 4,
        "micro_batch": 2,
        "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None,
        "seed": 3,
        "report_every_s": 0.0,
    }
    fields.update(overrides)
    return TrainSpec(**fields)


def start_method() -> str:
    forced = os.environ.get("LAUNCH_TEST_START_METHOD")  # to check the spawn path on purpose
    return forced or ("fork" if threading.active_count() == 1 else "spawn")


def _train(steps: int, checkpoint_dir: str, overrides: dict[str, Any]) -> None:
    run(tiny_spec(steps, checkpoint_dir, **overrides))


def train(nprocs: int, steps: int, checkpoint_dir: Path, **overrides: Any) -> None:
    """Train (or resume) the tiny job to ``steps`` on ``nprocs`` forked processes."""
    run_local(_train, nprocs, (steps, str(checkpoint_dir), overrides), start_method=start_method())


def start_training(
    nprocs: int, steps: int, checkpoint_dir: Path, env: dict[str, str] | None = None, **overrides: Any
) -> LocalGroup:
    return start_local(_train, nprocs, (steps, str(checkpoint_dir), overrides), env=env, start_method=start_method())


def saved(checkpoint_dir: Path) -> dict[str, Any]:
    state = CheckpointStore(checkpoint_dir).load()
    assert state is not None, f"no complete checkpoint in {checkpoint_dir}"
    return state


EXAMPLE = Path(__file__).resolve().parents[2] / "templates" / "example_train.py"
"""The template training script the Slurm and submitit tests run."""


def example_reference(tmp_path: Path, steps: int) -> dict[str, Any]:
    """The final checkpoint of an uninterrupted single-process run of ``EXAMPLE``: what a resumed run must equal."""
    reference = tmp_path / "reference"
    subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", str(steps), "--checkpoint-dir", str(reference)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return saved(reference)


def assert_same_params(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"parameter {k} differs (max abs diff {(a[k] - b[k]).abs().max().item()})"


def in_child(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn`` in one forked process (so torch's global switches never leak into the test process)."""
    run_local(fn, 1, args, start_method=start_method())
