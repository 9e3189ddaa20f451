"""Rubick's resource-sensitivity curves."""

from __future__ import annotations

import pytest

from slurmplan.domain import ValidationError
from slurmplan.perf.hardware import get_gpu
from slurmplan.perf.models import get_model
from slurmplan.perf.sensitivity import cpu_curve, gpu_curve, min_gpus_for, slope


def test_gpu_curve_is_flat_over_bad_counts_and_never_decreases() -> None:
    curve = gpu_curve(get_model("gpt2-1.5b"), get_gpu("v100"), 64, 12)
    tputs = [p.throughput for p in curve]
    assert all(b >= a for a, b in zip(tputs, tputs[1:], strict=False)) and tputs[-1] > 4 * tputs[0]
    # 64 samples do not divide over 5 or 7 replicas well; e.g. at 5 the curve keeps a smaller count's plan.
    assert curve[4].gpus_used <= 5 and curve[4].plan is not None and curve[4].plan.gpus == curve[4].gpus_used
    assert slope(curve, 0) > 0 and slope(curve, len(curve) - 1) == 0
    need = min_gpus_for(curve, curve[7].throughput)
    assert need is not None and need.amount <= 8
    assert min_gpus_for(curve, 1e12) is None
    with pytest.raises(ValidationError, match="max_gpus"):
        gpu_curve(get_model("gpt2-1.5b"), get_gpu("v100"), 64, 0)


def test_cpu_curve_helps_offload_only_jobs() -> None:
    # LLaMA-2-7B on one V100 only runs with ZeRO-Offload: more CPUs speed up its optimizer step.
    curve = cpu_curve(get_model("llama2-7b"), get_gpu("v100"), 1, 16, (2.0, 8.0, 32.0))
    assert curve[0].plan is not None and curve[0].plan.offload
    assert curve[0].throughput < curve[1].throughput < curve[2].throughput
    # A small model that fits without offload does not care.
    flat = cpu_curve(get_model("bert-large"), get_gpu("a100"), 1, 64, (2.0, 32.0))
    assert flat[0].throughput == pytest.approx(flat[1].throughput)
