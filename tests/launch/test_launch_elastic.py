"""Bitwise consistency of the elastic logical workers, with real processes and gloo.

maxP = 4 workers with dropout and data augmentation; the parameters after N steps must be identical (torch.equal)
whether the workers run on 1, 2, 3 or 4 processes, and across a resize sequence 4 -> 2 -> 1 through checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from launch_helpers import assert_same_params, in_child, saved, tiny_spec, train

from slurmplan.launch import run

STEPS = 6


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The uninterrupted run on one process."""
    folder = tmp_path_factory.mktemp("reference")
    train(1, STEPS, folder)
    return saved(folder)


def test_reference_run_learns_and_saves_everything(reference: dict) -> None:
    assert reference["step"] == STEPS
    assert sorted(reference["workers"]) == [0, 1, 2, 3]
    assert reference["scheduler"]["last_epoch"] == STEPS
    initial = tiny_spec(1, None).model_factory
    torch.manual_seed(3)
    start = initial().state_dict()
    assert not torch.equal(start["0.weight"], reference["model"]["0.weight"])


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_same_parameters_on_any_process_count(nprocs: int, reference: dict, tmp_path: Path) -> None:
    train(nprocs, STEPS, tmp_path)
    got = saved(tmp_path)
    assert got["world_size"] == nprocs
    assert_same_params(got["model"], reference["model"])
    assert_same_params(got["optimizer"]["state"][0], reference["optimizer"]["state"][0])


def test_resize_sequence_4_2_1_equals_uninterrupted(reference: dict, tmp_path: Path) -> None:
    train(4, 2, tmp_path)
    assert saved(tmp_path)["step"] == 2
    train(2, 4, tmp_path)
    assert saved(tmp_path)["world_size"] == 2
    train(1, STEPS, tmp_path)
    got = saved(tmp_path)
    assert got["step"] == STEPS
    assert_same_params(got["model"], reference["model"])


def test_different_seed_gives_different_parameters(reference: dict, tmp_path: Path) -> None:
    """Guards the test above against comparing things that cannot differ."""
    train(1, STEPS, tmp_path, seed=4)
    assert not torch.equal(saved(tmp_path)["model"]["0.weight"], reference["model"]["0.weight"])


def _ckpt_on_off(folder_on: str, folder_off: str) -> None:
    run(tiny_spec(3, folder_on, activation_checkpointing=True))
    run(tiny_spec(3, folder_off, activation_checkpointing=False))


def test_activation_checkpointing_keeps_parameters(tmp_path: Path) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    in_child(_ckpt_on_off, str(on), str(off))
    assert_same_params(saved(on)["model"], saved(off)["model"])


def _no_dropout() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _sgd(params) -> torch.optim.Optimizer:  # noqa: ANN001
    return torch.optim.SGD(params, lr=0.1)


def test_grad_accumulation_is_the_same_maths(tmp_path: Path) -> None:
    """Micro-batches of 2 and one batch of 4 agree to rounding (not bitwise: a different sum order)."""
    plain = {"model_factory": _no_dropout, "optimizer_factory": _sgd}
    train(1, 3, tmp_path / "mb2", micro_batch=2, **plain)
    train(1, 3, tmp_path / "mb4", micro_batch=4, **plain)
    a, b = saved(tmp_path / "mb2")["model"], saved(tmp_path / "mb4")["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)


def test_periodic_checkpoints_keep_the_latest_two(tmp_path: Path) -> None:
    train(2, 5, tmp_path / "ckpt", checkpoint_every=2, keep_checkpoints=2)
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert names == ["owner.json", "step-00000004", "step-00000005"]
