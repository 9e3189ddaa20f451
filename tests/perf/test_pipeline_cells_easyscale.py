"""PipeDream partitioning, Crius stage determination and Cell estimate, EasyScale Eq. 1."""

from __future__ import annotations

import pytest

from slurmplan.domain import Cell, ValidationError
from slurmplan.perf.cells import crius_cell_estimate
from slurmplan.perf.easyscale import best_assignment, easyscale_throughput, single_gpu_rates
from slurmplan.perf.hardware import get_gpu
from slurmplan.perf.models import get_model
from slurmplan.perf.pipeline import crius_stages, pipedream_partition
from slurmplan.perf.search import search_plans


def test_pipedream_straight_pipeline_when_weights_are_heavy() -> None:
    # Syncing weights is expensive and activations are tiny: 4 equal stages of 2 layers, one worker each.
    part = pipedream_partition([1.0] * 8, [1.0] * 8, [1e9] * 8, [(4, 1e9)])
    assert [(s.first, s.last, s.replicas) for s in part.stages] == [(0, 1, 1), (2, 3, 1), (4, 5, 1), (6, 7, 1)]
    assert part.slowest_stage_time == pytest.approx(2.0)


def test_pipedream_pure_data_parallel_when_activations_are_heavy() -> None:
    part = pipedream_partition([1.0] * 8, [1e12] * 8, [1.0] * 8, [(4, 1e9)])
    assert [(s.first, s.last, s.replicas) for s in part.stages] == [(0, 7, 4)]
    assert part.slowest_stage_time == pytest.approx(2.0, rel=1e-6)


def test_pipedream_uneven_layers_and_hierarchy() -> None:
    # One heavy layer: it gets a stage of its own, replicated on more workers than the light ones.
    part = pipedream_partition([1.0, 1.0, 6.0, 1.0], [1.0] * 4, [1e3] * 4, [(4, 1e9)])
    heavy = next(s for s in part.stages if s.first <= 2 <= s.last)
    assert heavy.replicas >= 2 and part.workers == 4
    assert part.slowest_stage_time < 9.0 / 2
    two_level = pipedream_partition([1.0] * 16, [1.0] * 16, [1e9] * 16, [(4, 1e10), (2, 1e9)])
    assert two_level.slowest_stage_time == pytest.approx(2.0)
    with pytest.raises(ValidationError, match="layer_times"):
        pipedream_partition([1.0, -1.0], [1.0, 1.0], [1.0, 1.0], [(2, 1e9)])


def test_crius_stage_determination_follows_the_paper_example() -> None:
    # 6 ops on 8 GPUs; OP1 has 1/16 of the FLOPs (0.5 GPU), OP2 3/16 (1.5 GPUs); cut at the 3 cheapest boundaries.
    split = crius_stages([1, 3, 2, 2, 4, 4], [5, 1, 5, 1, 1], gpus=8, stages=4)
    assert split.ranges == ((0, 1), (2, 3), (4, 4), (5, 5))
    assert split.shares == pytest.approx((2.0, 2.0, 2.0, 2.0))
    assert split.gpus == (2, 2, 2, 2)
    uneven = crius_stages([1] * 13, [1] * 12, gpus=8, stages=2)
    assert sum(uneven.gpus) <= 8 and all(g & (g - 1) == 0 for g in uneven.gpus)
    with pytest.raises(ValidationError, match="stages"):
        crius_stages([1, 1], [1], gpus=8, stages=3)


def test_crius_cell_estimate_is_close_to_the_plan_search_and_memory_checked() -> None:
    model, gpu = get_model("gpt2-1.5b"), get_gpu("a100")
    for gpus, stages in ((4, 1), (8, 2), (8, 8)):
        est = crius_cell_estimate(model, gpu, Cell("a100", gpus, stages), 512)
        best = search_plans(model, gpu, gpus, 512, stages=stages).best()
        assert best is not None and len(est.stage_plans) == stages
        assert est.throughput == pytest.approx(best.throughput, rel=0.35)
        assert est.micro_batches == 4 * stages
    more = crius_cell_estimate(model, gpu, Cell("a100", 8, 1), 512).throughput
    assert more > crius_cell_estimate(model, gpu, Cell("a100", 4, 1), 512).throughput
    # Crius has no ZeRO or offload: LLaMA-2-7B does not fit 8 V100s in DP-only or TP-only stages.
    est = crius_cell_estimate(get_model("llama2-7b"), get_gpu("v100"), Cell("v100", 8, 2), 256)
    assert est.throughput == 0 and est.reason


def test_easyscale_paper_example() -> None:
    counts, rates = {"v100": 1, "p100": 2}, {"v100": 3.0, "p100": 1.5}
    given = easyscale_throughput(counts, rates, {"v100": 4, "p100": 2}, max_p=8)
    assert given.step_time == pytest.approx(4 / 3) and given.waste == pytest.approx(0.0)
    assert given.throughput == pytest.approx(6.0)
    best = best_assignment(counts, rates, max_p=8)
    assert dict(best.assignment) == {"v100": 4, "p100": 2} and best.throughput == pytest.approx(6.0)
    worse = easyscale_throughput(counts, rates, {"v100": 2, "p100": 3}, max_p=8)
    assert worse.throughput < best.throughput and worse.waste > 0
    with pytest.raises(ValidationError, match="assignment"):
        easyscale_throughput(counts, rates, {"v100": 1, "p100": 1}, max_p=8)
    with pytest.raises(ValidationError, match="max_p"):
        best_assignment(counts, rates, max_p=0)


def test_easyscale_mixed_types_from_the_model() -> None:
    rates = single_gpu_rates(get_model("bert-large"), ["v100", "p100", "t4"], 256, 8)
    assert rates["v100"] > rates["t4"] > 0 and rates["v100"] > rates["p100"] > 0
    alone = best_assignment({"v100": 2}, rates, 8)
    mixed = best_assignment({"v100": 2, "t4": 4}, rates, 8)
    assert mixed.throughput >= alone.throughput
    assert sum(n * mixed.assignment[t] for t, n in {"v100": 2, "t4": 4}.items()) >= 8
