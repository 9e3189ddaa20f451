"""BatchNorm with logical workers: every buffer (running mean/var, num_batches_tracked) is bitwise equal on 1, 2
and 4 processes and across a resize 2 -> 1 -> 4, because each logical worker keeps its own buffers."""

from __future__ import annotations

from pathlib import Path

import torch
from launch_helpers import saved, train
from torch import nn


def bn_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 16), nn.BatchNorm1d(16),
        nn.Tanh(), nn.Linear(16, 3)
    )  # fmt: skip


def _assert_bitwise(a: dict, b: dict, what: str) -> None:
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), f"{what}: {k} differs"
    for v in a["workers"]:
        for k, t in a["workers"][v]["buffers"].items():
            assert torch.equal(t, b["workers"][v]["buffers"][k]), f"{what}: worker {v} buffer {k} differs"


def test_batchnorm_buffers_bitwise_equal_across_spreads_and_resize(tmp_path: Path) -> None:
    runs = {}
    for n in (1, 2, 4):
        train(n, 6, tmp_path / f"p{n}", model_factory=bn_model)
        runs[n] = saved(tmp_path / f"p{n}")
    ref = runs[1]
    assert int(ref["model"]["1.num_batches_tracked"]) == 6 * 2  # worker 0's: 6 steps x 2 micro-batches
    assert sorted(ref["workers"]) == [0, 1, 2, 3]
    assert not torch.equal(
        ref["workers"][0]["buffers"]["1.running_mean"], ref["workers"][3]["buffers"]["1.running_mean"]
    )
    _assert_bitwise(ref, runs[2], "2 processes")
    _assert_bitwise(ref, runs[4], "4 processes")

    resized = tmp_path / "resized"
    train(2, 2, resized, model_factory=bn_model)
    train(1, 4, resized, model_factory=bn_model)
    train(4, 6, resized, model_factory=bn_model)
    _assert_bitwise(ref, saved(resized), "resize 2 -> 1 -> 4")
