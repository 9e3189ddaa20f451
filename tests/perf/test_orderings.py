"""The model against the orderings the Megatron thesis states for its parallel-configuration figures, and the
data-parallel bandwidth term that makes them hold (``perf.rubick.bandwidths``)."""

from __future__ import annotations

import numpy as np

from slurmplan.domain import Plan
from slurmplan.perf.hardware import get_gpu, with_node_shape
from slurmplan.perf.orderings import ORDERINGS, check_orderings, check_schedules, check_takeaway_1, schedule_times
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.rubick import bandwidths, dp_members_per_node
from tests.benchmark_modules import load_benchmark

A100 = with_node_shape(get_gpu("a100-80g"), 8)


def test_the_model_reproduces_every_stated_ordering_of_figures_4_13_to_4_15() -> None:
    results = check_orderings()
    assert len(results) == sum(len(o.batches) for o in ORDERINGS) == 10
    failed = [(r["id"], r["batch"], r["samples_per_s"]) for r in results if not r["holds"]]
    # With one NIC per all-reduce across nodes, 4.14 and 4.15 failed at batch 32 and 128 (DP), and 4.13's t = 32
    # came out 4x slower than t = 8 against the stated "up to 2x" (TP wider than a node).
    assert not failed, failed


def _space(*plans: Plan) -> PlanSpace:
    return PlanSpace.from_plans(list(plans), 8)


def test_a_dp_all_reduce_spreads_over_the_nics_of_its_group_members_in_each_node() -> None:
    # One global batch of 64 for all: dp * micro_batch * grad_accum = 64.
    plans = (
        Plan(dp=64, grad_accum=1),  # 8 replicas per node
        Plan(dp=32, tp=2, grad_accum=2),  # 4
        Plan(dp=16, tp=2, pp=2, grad_accum=4),  # 2
        Plan(dp=8, tp=8, grad_accum=8),  # 1
        Plan(dp=4, tp=4, pp=4, grad_accum=16),  # a replica spans two nodes: 1
        Plan(dp=64, grad_accum=1, zero_stage=3),  # ZeRO-3's per-layer gathers: one link (Table 4.2)
        Plan(dp=8, grad_accum=8),  # the whole group inside one node
        Plan(dp=2, tp=32, grad_accum=32),  # TP over 4 nodes: its all-reduces cross at 8 NICs a node
    )
    space = _space(*plans)
    assert list(dp_members_per_node(space)) == [8, 4, 2, 1, 1, 8, 8, 1]
    b_dp, b_tp, _ = (b / 1e9 for b in bandwidths(space, A100))
    nic, nvlink = A100.inter_node_gbps, A100.intra_node_gbps
    assert np.allclose(b_dp, [min(8 * nic, nvlink), 4 * nic, 2 * nic, nic, nic, nic, nvlink, nic])
    assert np.allclose(b_tp, [nvlink] * 7 + [min(8 * nic, nvlink)])


def _bench():
    return load_benchmark("bench_perf_model")


def test_table_4_1_plans_are_reported_among_all_plans_and_among_the_papers_recompute_choice() -> None:
    """The benchmark reports both counts; the model's preference for no recomputation below 76B holds even at the
    most activation memory Figure 4.17 allows, so it is not an artefact of the memory model's one uncertain factor."""
    from slurmplan.perf.published import fitted_rows, load_published

    bench = _bench()
    rows = fitted_rows(load_published())
    plans = {p["row"]: p for p in bench.table_4_1_plans(rows)}
    assert len(plans) == 10
    assert sum(p["within_5pct_with_recompute"] for p in plans.values()) >= 9
    assert all(plans[r]["paper_rank"] == 1 for r in ("t41-76b", "t41-145b", "t41-530b"))
    assert not plans["t41-39b"]["within_5pct_with_recompute"]  # t4 p4 over the paper's t8 p2 (no measurement of it)
    evidence = {e["row"]: e for e in bench.recompute_evidence(rows)}
    for row in ("t41-1.7b", "t41-3.6b", "t41-7.5b", "t41-18b", "t41-39b"):
        # Even with everything the 2021 code could hold beyond the model's count, a plan without recomputation
        # fits and is faster: the preference is not an artefact of the memory model.
        for memory in ("model", "pessimistic"):
            assert evidence[row][memory]["no_recompute"] is not None, (row, memory)
            assert evidence[row][memory]["no_recompute_over_recompute"] > 1.1, (row, memory)
    for row in ("t41-76b", "t41-145b", "t41-310b", "t41-530b", "t41-1t"):
        assert evidence[row]["model"]["no_recompute"] is None, row
    # At the paper's own micro-batches recomputation is needed in every row (139-357 GB against 76 GB usable).
    assert all(e["paper_plan_without_recompute_gb"] > 100 for e in evidence.values())


def test_figures_4_12_and_4_18_hold_and_the_unoptimised_interleaving_statement_is_a_known_miss() -> None:
    results = {r["id"]: r for r in check_schedules()}
    assert results["fig4.12-interleaved-ahead-gap-closing"]["holds"]
    assert results["fig4.18-scatter-gather-up-to-11pct"]["holds"]
    # Known miss, reported by the benchmark: at batch 60 the model still puts interleaving without scatter/gather
    # 2 % ahead of the default schedule, where section 4.5.3 says the default is ahead. Its cross-node
    # point-to-point is about 1.25x too cheap for that, which is worth under 0.5 % on Table 4.1's 39B plans.
    miss = results["s4.5.3-no-scatter-gather-default-ahead-at-batch-60"]
    assert not miss["holds"] and 1.0 < miss["interleaved_no_sg_over_default"] < 1.05
    assert 60 < miss["model_default_ahead_from_batch"] <= 96  # the model's crossover lies just past the figure


def test_without_scatter_gather_every_tensor_rank_sends_the_whole_activation() -> None:
    times = schedule_times(60)
    for name in ("default", "interleaved"):
        assert times[f"{name}_no_scatter_gather"] > times[name]
    # interleaving multiplies the pipeline traffic by v = 4, so its unoptimised penalty is larger
    extra = {n: times[f"{n}_no_scatter_gather"] - times[n] for n in ("default", "interleaved")}
    assert 3.0 < extra["interleaved"] / extra["default"] < 4.5


def test_takeaway_1_holds_schedule_for_schedule_and_fails_only_where_interleaving_beats_t8() -> None:
    from slurmplan.perf.published import fitted_rows, load_published

    results = check_takeaway_1(fitted_rows(load_published()))
    same = [r for r in results if r["id"] == "takeaway1-same-schedule"]
    best = {r["row"]: r for r in results if r["id"] == "takeaway1-best-schedule"}
    assert {r["row"] for r in same} == {"t41-18b", "t41-39b", "t41-1t"}
    assert all(r["holds"] for r in same), same
    assert all(best[r]["holds"] for r in ("t41-145b", "t41-310b", "t41-1t"))
    # Known misses at d = 32 (the takeaway is derived at d = 1): the thesis's own count of tensor traffic per GPU
    # (l_stage 8bsh(t-1)/t) doubles from t = 4 to t = 8 at a fixed t p, and interleaving hides the bubble.
    for row in ("t41-18b", "t41-39b"):
        assert not best[row]["holds"] and " v" in best[row]["rival"], best[row]


def test_megatron_interleaves_only_with_more_than_two_stages() -> None:
    from slurmplan.perf.stacks import get_stack

    plans = [
        Plan(dp=4, tp=4, pp=2, grad_accum=8, virtual_stages=2),
        Plan(dp=4, tp=4, pp=2, grad_accum=8),
        Plan(dp=2, tp=4, pp=4, grad_accum=16, virtual_stages=2),
    ]
    for stack in ("megatron", "megatron-2021", "auto"):
        assert list(get_stack(stack).runs(_space(*plans))) == [False, True, True], stack
