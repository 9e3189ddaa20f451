"""A model slurmplan does not know (none named, or a researcher's own network) is scheduled, Gavel-style: from
a documented default until it reports, then from its measured throughput."""

from __future__ import annotations

import pytest

from slurmplan.domain import Hints, Measurement, Plan, ThroughputSource
from slurmplan.perf.candidates import job_candidates
from slurmplan.perf.hardware import get_gpu

CLUSTER = {"a100": 8, "v100": 8, "t4": 4}


def _by_cell(cands):  # noqa: ANN001, ANN202
    return {(c.cell.gpu_type, c.cell.gpus): c for c in cands}


def test_no_model_gets_default_candidates_on_the_allowed_types() -> None:
    """The issue's job: --plan-gpus=1:4 --plan-gpu-types=v100,t4 --plan-workers=8, no model."""
    hints = Hints(model=None, gpus=1, min_gpus=1, max_gpus=4, gpu_types=("t4", "v100"), workers=8)
    cands = _by_cell(job_candidates(hints, CLUSTER))
    assert set(cands) == {("t4", 1), ("t4", 2), ("v100", 1), ("v100", 2)}  # N/2, N, 2N around 1 within 1..4
    for (gpu_type, gpus), c in cands.items():
        assert c.source is ThroughputSource.DEFAULT and c.plan == Plan(dp=gpus)
        assert c.throughput == pytest.approx(gpus * get_gpu(gpu_type).fp16_tflops)
    assert cands[("v100", 2)].throughput > cands[("t4", 2)].throughput


def test_an_unknown_model_is_measured_then_fitted_on_other_cells() -> None:
    hints = Hints(model="my-resnet-variant", gpus=2, min_gpus=1, max_gpus=4)
    reports = [Measurement("my-resnet-variant", "v100", 2, Plan(dp=2), 300.0)]
    cands = _by_cell(job_candidates(hints, CLUSTER, reports))
    assert cands[("v100", 2)].source is ThroughputSource.MEASURED and cands[("v100", 2)].throughput == 300.0
    fitted = cands[("a100", 4)]
    assert fitted.source is ThroughputSource.FITTED
    per_tflop = 300.0 / 2 / get_gpu("v100").fp16_tflops
    assert fitted.throughput == pytest.approx(per_tflop * 4 * get_gpu("a100").fp16_tflops)
    other = _by_cell(job_candidates(hints, CLUSTER, [Measurement("someone-else", "v100", 2, Plan(dp=2), 1.0)]))
    assert other[("v100", 2)].source is ThroughputSource.DEFAULT  # another model's reports are not this job's


def test_an_unknown_model_without_bounds_keeps_its_count() -> None:
    assert {c.cell.gpus for c in job_candidates(Hints(model="mine", gpus=4), CLUSTER)} == {4}
