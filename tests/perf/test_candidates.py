"""job_candidates: the entry point the mechanism, simulator and daemon call."""

from __future__ import annotations

import pytest

from slurmplan.domain import (
    Cluster,
    Hints,
    JobClass,
    Measurement,
    Node,
    NodeState,
    Plan,
    ThroughputSource,
    ValidationError,
)
from slurmplan.perf.candidates import count_range, gpu_counts, job_candidates, stage_counts
from slurmplan.perf.models import get_model


def _cluster() -> Cluster:
    nodes = [Node(f"a{i}", NodeState.IDLE, "a100", 8, cpus=64, memory_mb=512_000) for i in range(4)]
    nodes += [Node(f"v{i}", NodeState.IDLE, "v100", 4, cpus=32, memory_mb=256_000) for i in range(4)]
    nodes += [Node("k0", NodeState.IDLE, "k80", 4, cpus=16, memory_mb=128_000)]
    nodes += [Node("down", NodeState.DOWN, "t4", 4, cpus=16, memory_mb=128_000)]
    return Cluster(tuple(nodes))


def test_cells_cover_types_counts_and_stages() -> None:
    cands = job_candidates(Hints(model="llama2-7b", gpus=8, min_gpus=4, max_gpus=16, global_batch=256), _cluster())
    cells = {(c.cell.gpu_type, c.cell.gpus, c.cell.stages) for c in cands}
    assert ("a100", 4, 1) in cells and ("a100", 8, 1) in cells and ("a100", 16, 1) in cells
    assert ("a100", 8, 2) in cells and ("a100", 16, 16) in cells
    assert not any(t == "t4" for t, _, _ in cells)  # its only node is down
    totals = {"a100": 32, "v100": 16, "k80": 4}
    assert all(g <= totals[t] for t, g, _ in cells)  # never more than the type has
    assert any(t == "v100" for t, _, _ in cells)
    for c in cands:
        assert c.plan is not None and c.plan.pp == c.cell.stages and c.plan.gpus <= c.cell.gpus
        assert c.plan.global_batch == 256
        assert c.throughput > 0 and c.source is ThroughputSource.ESTIMATED
        assert c.nodes == -(-c.cell.gpus // (8 if c.cell.gpu_type == "a100" else 4))
        assert c.cpus >= c.cell.gpus and c.host_memory_mb > 0 and c.gpu_memory_gb > 0


def test_more_gpus_never_slower() -> None:
    hints = Hints(model="gpt2-1.5b", gpus=4, min_gpus=2, max_gpus=8, global_batch=512)
    cands = job_candidates(hints, {"a100": 64, "v100": 64, "a10": 64})
    by_key: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for c in cands:
        by_key.setdefault((c.cell.gpu_type, c.cell.stages), []).append((c.cell.gpus, c.throughput))
    for series in by_key.values():
        series.sort()
        assert all(b[1] >= a[1] for a, b in zip(series, series[1:], strict=False))


def test_faster_gpu_types_predict_more() -> None:
    cands = job_candidates(Hints(model="bert-large", gpus=1, global_batch=256), {"k80": 4, "v100": 4, "h100": 4})
    one = {c.cell.gpu_type: c.throughput for c in cands if c.cell.gpus == 1}
    assert one["k80"] < one["v100"] < one["h100"]


def test_infeasible_cells_are_omitted() -> None:
    # LLaMA-2-70B cannot fit on one or two 12 GB K80s in any plan.
    assert job_candidates(Hints(model="llama2-70b", gpus=2, global_batch=64), {"k80": 2}) == ()


def test_measurement_overrides_exact_cell_and_calibrates_others() -> None:
    hints = Hints(model="bert-large", gpus=2, min_gpus=1, max_gpus=4, global_batch=256)
    base = {(c.cell.gpu_type, c.cell.gpus, c.cell.stages): c for c in job_candidates(hints, {"v100": 8})}
    plan = Plan(dp=2, micro_batch=8, grad_accum=16)
    measured = base[("v100", 2, 1)].throughput * 0.5
    m = Measurement(model="BERT-large", gpu_type="v100", gpus=2, plan=plan, samples_per_s=measured)
    after = {(c.cell.gpu_type, c.cell.gpus, c.cell.stages): c for c in job_candidates(hints, {"v100": 8}, [m])}
    exact = after[("v100", 2, 1)]
    assert exact.source is ThroughputSource.MEASURED and exact.plan == plan
    assert exact.throughput == pytest.approx(measured)
    other = after[("v100", 4, 1)]
    assert other.source is ThroughputSource.FITTED
    assert other.throughput < base[("v100", 4, 1)].throughput * 0.9


def test_bad_hints_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match="gpus"):
        job_candidates(Hints(model="bert-large", gpus=-2), {"a100": 8})
    with pytest.raises(ValidationError, match="min_gpus"):
        job_candidates(Hints(model="bert-large", gpus=2, min_gpus=8, max_gpus=4), {"a100": 8})
    with pytest.raises(ValidationError, match="min_gpus"):
        job_candidates(Hints(model="my-own-net", gpus=2, min_gpus=8, max_gpus=4), {"a100": 8})


def test_a_job_that_did_not_say_it_is_elastic_keeps_its_gpu_count() -> None:
    """gpus=4 with neither min nor max: only 4-GPU Cells (it ran as a100x2 before); either bound makes it
    elastic."""
    fixed = job_candidates(Hints(model="bert-large", gpus=4, global_batch=256), {"a100": 16, "v100": 16})
    assert fixed and {c.cell.gpus for c in fixed} == {4}
    guaranteed = Hints(model="bert-large", gpus=8, job_class=JobClass.GUARANTEED, global_batch=256)
    assert {c.cell.gpus for c in job_candidates(guaranteed, {"v100": 16})} == {8}
    elastic = job_candidates(Hints(model="bert-large", gpus=4, max_gpus=8, global_batch=256), {"a100": 16})
    assert {c.cell.gpus for c in elastic} == {2, 4, 8}
    assert count_range(Hints(gpus=4)) == (4, 4, 4)
    assert count_range(Hints(gpus=4, min_gpus=2, workers=6)) == (4, 2, 6)


def test_counts_and_stage_helpers() -> None:
    assert gpu_counts(8, 1, 16, 64) == (4, 8, 16)
    assert gpu_counts(8, 6, 8, 64) == (6, 8)
    assert gpu_counts(8, 1, 16, 8) == (4, 8)
    assert stage_counts(get_model("llama-30b"), 16) == (1, 2, 4)  # 60 layers: 8 and 16 do not divide


def test_restricting_gpu_types_and_caching_returns_equal_results() -> None:
    hints = Hints(model="vit-b", gpus=2, gpu_types=("v100",), global_batch=1024)
    first = job_candidates(hints, _cluster())
    assert first and {c.cell.gpu_type for c in first} == {"v100"}
    assert job_candidates(hints, _cluster()) == first


def test_opaque_table_job_types_get_table_candidates() -> None:
    cands = job_candidates(Hints(model="ResNet-50 (batch size 64)", gpus=2), {"v100": 8, "k80": 8, "a100": 8})
    by_type = {c.cell.gpu_type: c for c in cands}
    assert set(by_type) == {"v100", "k80"}  # Gavel measured no A100
    assert all(c.source is ThroughputSource.TABLE and c.cell.gpus == 2 and c.plan is None for c in cands)
    assert by_type["v100"].throughput > by_type["k80"].throughput
    assert job_candidates(Hints(model="ResNet-50 (batch size 64)", gpus=3), {"v100": 8}) == ()


def test_unknown_gpu_types_in_a_cluster_are_skipped() -> None:
    cands = job_candidates(Hints(model="bert-large", gpus=1, global_batch=64), {"mystery": 8, "t4": 4})
    assert cands and {c.cell.gpu_type for c in cands} == {"t4"}


def test_workers_cap_gpus_and_none_measurements_and_hf_names() -> None:
    cands = job_candidates(Hints(model="meta-llama/Llama-2-7b-hf", gpus=8, workers=8, global_batch=256),
                           {"a100": 64}, None)  # fmt: skip
    assert cands and max(c.cell.gpus for c in cands) == 8


def test_a_measured_cell_is_kept_even_when_the_memory_model_says_it_cannot_fit() -> None:
    hints = Hints(model="llama2-70b", gpus=2, global_batch=64)
    assert job_candidates(hints, {"t4": 4}) == ()
    plan = Plan(dp=2, micro_batch=1, grad_accum=32, checkpointing=True, zero_stage=3, offload=True)
    m = Measurement(model="llama2-70b", gpu_type="t4", gpus=2, plan=plan, samples_per_s=0.01)
    (cand,) = job_candidates(hints, {"t4": 4}, [m])
    assert cand.source is ThroughputSource.MEASURED and cand.plan == plan and cand.throughput == 0.01
    assert cand.gpu_memory_gb > 15  # the memory model's figure is still reported


def test_the_stack_hint_picks_the_jobs_own_framework() -> None:
    """A DDP job gets data-parallel plans only and the prediction of unfused kernels; a bad stack names the field."""
    from slurmplan.domain import ValidationError

    ask = {"a100-80g": 16}
    ddp = job_candidates(Hints(model="gpt2-1.5b", gpus=8, stack="ddp"), ask)
    default = job_candidates(Hints(model="gpt2-1.5b", gpus=8), ask)
    assert ddp and all(c.plan.tp == 1 and c.plan.pp == 1 for c in ddp)
    best = {c.cell: c.throughput for c in default}
    assert all(c.throughput < best[c.cell] for c in ddp if c.cell in best)
    with pytest.raises(ValidationError) as err:
        job_candidates(Hints(model="gpt2-1.5b", gpus=8, stack="jax"), ask)
    assert err.value.field == "stack" and "megatron" in err.value.allowed
