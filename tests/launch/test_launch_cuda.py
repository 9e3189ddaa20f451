"""The launcher on a real CUDA GPU: worker RNG contexts and a bit-identical resume.

These run only where PyTorch sees a GPU (the project's GPU checks; CI has none and skips them). On the CPU every
worker draws from the CPU generator, which ``test_launch_elastic`` covers; on a GPU dropout draws from the
device's generator, which the worker contexts must carry across a checkpoint, onto another device index and
onto a process that sees fewer GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from launch_helpers import assert_same_params, saved, train

from slurmplan.launch.determinism import RngContext

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

STEPS = 6


def _draws(device: torch.device | str = "cuda") -> torch.Tensor:
    return torch.rand(8, device=device).cpu()


def test_a_worker_context_continues_its_gpu_stream_through_a_checkpoint() -> None:
    ctx = RngContext.seeded(11)
    ctx.restore()
    _draws()
    kept = RngContext.from_state(RngContext.capture().to_state())
    expected = _draws()
    torch.manual_seed(999)  # another worker's turn moves the device's generator
    _draws()
    kept.restore()
    assert torch.equal(_draws(), expected)
    assert len(kept.torch_cuda) == 1, "a context keeps the current device's generator only"


def test_a_context_written_where_the_process_saw_more_gpus_restores_on_fewer() -> None:
    """A checkpoint from before contexts kept one device holds one state per GPU the writer saw. On a process
    that sees fewer GPUs, restoring every state failed (IndexError); now the current device's entry is taken."""
    torch.manual_seed(5)
    own = torch.cuda.get_rng_state()
    expected = _draws()
    torch.manual_seed(6)
    other = torch.cuda.get_rng_state()
    states = [own, other] + [other] * torch.cuda.device_count()  # more entries than this process has GPUs
    state = RngContext.capture().to_state() | {"torch_cuda": states}
    torch.manual_seed(7)
    RngContext.from_state(state).restore()
    assert torch.equal(_draws(), expected)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs in one process")
def test_a_worker_resumed_on_another_device_index_keeps_its_stream() -> None:
    torch.cuda.set_device(1)
    ctx = RngContext.seeded(3)
    ctx.restore()
    _draws("cuda:1")
    kept = RngContext.capture()
    expected = _draws("cuda:1")
    torch.cuda.set_device(0)
    kept.restore()
    assert torch.equal(_draws("cuda:0"), expected)


def test_training_on_the_gpu_resumes_bit_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One process, NCCL, four logical workers with dropout on the GPU: stopped at step 3 and resumed, the
    parameters equal the uninterrupted run's (the saved worker contexts carry the GPU streams)."""
    monkeypatch.setenv("LAUNCH_TEST_START_METHOD", "spawn")  # CUDA, once started here, does not survive a fork
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    train(1, STEPS, reference)
    train(1, 3, resumed)
    train(1, STEPS, resumed)
    want, got = saved(reference), saved(resumed)
    assert got["step"] == STEPS
    assert all(len(w["torch_cuda"]) == 1 for w in got["workers"].values())
    assert_same_params(got["model"], want["model"])
    different = tmp_path / "seed4"
    train(1, STEPS, different, seed=4)
    assert not torch.equal(saved(different)["model"]["0.weight"], want["model"]["0.weight"])
