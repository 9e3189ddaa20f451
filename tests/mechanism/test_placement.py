"""Placing chosen jobs on nodes: consolidated, largest first, CPU and memory respected, keep nodes."""

from __future__ import annotations

import numpy as np

from slurmplan.domain import Cell
from slurmplan.mechanism.placement import Placed, PlacementRequest, Unplaced, place
from slurmplan.mechanism.problem import NodePool


def pool(free: dict[str, int], *, gpu_type: str = "a100", cpus: int = 64, mem: int = 100_000) -> NodePool:
    names = tuple(sorted(free))
    return NodePool(
        names,
        tuple(gpu_type for _ in names),
        np.array([free[n] for n in names]),
        np.full(len(names), cpus),
        np.full(len(names), mem),
    )


def test_multi_gpu_job_goes_on_one_node_when_it_fits() -> None:
    out = place(pool({"n0": 8, "n1": 8}), [PlacementRequest(0, Cell("a100", 8))])
    assert out[0] == Placed(("n0",), 8)


def test_best_fit_leaves_whole_nodes_free_for_large_jobs() -> None:
    reqs = [PlacementRequest(0, Cell("a100", 2)), PlacementRequest(1, Cell("a100", 8))]
    out = place(pool({"n0": 8, "n1": 3}), reqs)
    assert out[1] == Placed(("n0",), 8)  # largest first, and the 2-GPU job did not split node n0
    assert out[0] == Placed(("n1",), 2)


def test_job_larger_than_a_node_is_split_equally_over_few_nodes() -> None:
    out = place(pool({"n0": 8, "n1": 8, "n2": 8}), [PlacementRequest(0, Cell("a100", 16))])
    assert out[0] == Placed(("n0", "n1"), 8)


def test_cpu_and_memory_limits_force_a_split_or_refuse_with_why() -> None:
    # 4 GPUs fit on one node, but 4 x 24 CPUs do not: two nodes with 2 GPUs and 48 CPUs each.
    out = place(pool({"n0": 8, "n1": 8}, cpus=64), [PlacementRequest(0, Cell("a100", 4), cpus=96)])
    assert out[0] == Placed(("n0", "n1"), 2)
    refused = place(pool({"n0": 8}, mem=1000), [PlacementRequest(0, Cell("a100", 2), memory_mb=5000)])
    assert isinstance(refused[0], Unplaced)
    assert "5000 MB" in refused[0].why and "1000 MB" in refused[0].why


def test_fragmented_gpus_are_unplaceable_with_the_largest_free_block_named() -> None:
    out = place(pool({"n0": 3, "n1": 3, "n2": 3}), [PlacementRequest(0, Cell("a100", 8))])
    assert isinstance(out[0], Unplaced)
    assert "9 GPUs on 3 nodes" in out[0].why and "3 GPUs" in out[0].why


def test_kept_job_keeps_its_nodes_even_when_a_better_fit_exists() -> None:
    reqs = [PlacementRequest(0, Cell("a100", 2), preferred=("n1",)), PlacementRequest(1, Cell("a100", 8))]
    out = place(pool({"n0": 2, "n1": 8, "n2": 8}), reqs)
    assert out[0] == Placed(("n1",), 2)
    assert out[1] == Placed(("n2",), 8)


def test_wrong_type_and_missing_type() -> None:
    out = place(
        pool({"n0": 8}), [PlacementRequest(0, Cell("v100", 1)), PlacementRequest(1, Cell("a100", 1), preferred=("zz",))]
    )
    assert isinstance(out[0], Unplaced) and "no schedulable v100 node" in out[0].why
    assert out[1] == Placed(("n0",), 1)
