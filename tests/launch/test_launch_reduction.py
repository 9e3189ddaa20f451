"""The bucketed, overlapped gradient reduction stays bitwise exact: many small buckets started from backward
hooks (all-to-all on 2, 3 and 4 processes), the two-worker all-reduce, and grad accumulation."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_helpers import assert_same_params, saved, train
from test_launch_batchnorm import bn_model


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_tiny_buckets_give_the_same_bits(nprocs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMPLAN_BUCKET_MB", "0.001")  # ~256 floats: one bucket per tensor or less
    train(1, 4, tmp_path / "one")
    train(nprocs, 4, tmp_path / "many")
    assert_same_params(saved(tmp_path / "many")["model"], saved(tmp_path / "one")["model"])


@pytest.mark.parametrize("micro_batch", [4, 2])
def test_two_workers_all_reduce_is_exact(micro_batch: int, tmp_path: Path) -> None:
    """maxP = 2 on 2 processes uses a plain all-reduce (g0 + g1 has one rounding whatever the order)."""
    train(1, 5, tmp_path / "one", max_p=2, micro_batch=micro_batch)
    train(2, 5, tmp_path / "two", max_p=2, micro_batch=micro_batch)
    one, two = saved(tmp_path / "one"), saved(tmp_path / "two")
    assert_same_params(two["model"], one["model"])
    assert_same_params(two["optimizer"]["state"][0], one["optimizer"]["state"][0])


def test_activation_checkpointing_with_hooks_gives_the_same_bits(tmp_path: Path) -> None:
    """Recomputed forwards inside backward still fire the gradient hooks that start the collectives."""
    train(1, 4, tmp_path / "one", activation_checkpointing=True, model_factory=bn_model)
    train(2, 4, tmp_path / "two", activation_checkpointing=True, model_factory=bn_model)
    train(3, 4, tmp_path / "three", activation_checkpointing=True, model_factory=bn_model)
    one = saved(tmp_path / "one")
    for other in ("two", "three"):
        got = saved(tmp_path / other)
        assert_same_params(got["model"], one["model"])
        for v in one["workers"]:
            assert_same_params(got["workers"][v]["buffers"], one["workers"][v]["buffers"])
