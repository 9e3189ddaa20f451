"""Seating a chosen job that kept jobs fragment away moves the fewest kept jobs (issue 23), not the whole round."""

from __future__ import annotations

from types import SimpleNamespace

from slurmplan.domain import Cell
from slurmplan.mechanism.layout import place_with_repack
from slurmplan.mechanism.placement import Placed, PlacementRequest, Unplaced, place
from slurmplan.mechanism.repack import evict_fewest
from tests.mechanism.test_placement import pool

NODES = {"n0": 4, "n1": 4, "n2": 4, "n3": 4}


def _round() -> list[PlacementRequest]:
    """Seven kept 1-GPU jobs and one kept 2-GPU job on four 4-GPU nodes (one GPU free on n0 and n1, two on n2,
    three on n3), and a waiting 4-GPU job for one node: 7 GPUs are free, but no node has 4."""
    kept = {0: "n0", 1: "n0", 2: "n0", 3: "n1", 4: "n1", 5: "n1", 6: "n3"}
    reqs = [PlacementRequest(row, Cell("a100", 1), preferred=(node,)) for row, node in kept.items()]
    reqs.append(PlacementRequest(7, Cell("a100", 2), preferred=("n2",)))
    reqs.append(PlacementRequest(8, Cell("a100", 4), most_nodes=1))  # predicted on one node
    return reqs


def test_one_kept_job_moves_to_seat_the_larger_job_not_every_job_on_its_node() -> None:
    reqs = _round()
    first = place(pool(NODES), reqs)
    assert isinstance(first[8], Unplaced)  # kept jobs fragment the nodes
    out = evict_fewest(pool(NODES), reqs, first)
    assert out is not None
    placed, moved = out
    assert moved == 1
    assert placed[8] == Placed(("n3",), 4)  # the node with one kept job on it
    assert placed[6] != first[6] and isinstance(placed[6], Placed)  # that job moved, and still runs
    changed = [row for row in range(8) if placed[row] != first[row]]
    assert changed == [6]
    # the round's placement takes it; a whole-round repack largest first moved the three jobs on n0
    assert place_with_repack(SimpleNamespace(pool=pool(NODES)), reqs) == placed
    whole = place(pool(NODES), reqs, kept_first=False)
    assert sum(whole[row] != first[row] for row in range(8)) >= 3


def test_nothing_is_moved_when_no_node_can_be_freed_without_losing_a_job() -> None:
    # Both nodes hold a kept 3-GPU job: freeing either for a 4-GPU job leaves its 3 GPUs nowhere to go.
    reqs = [
        PlacementRequest(0, Cell("a100", 3), preferred=("n0",)),
        PlacementRequest(1, Cell("a100", 3), preferred=("n1",)),
        PlacementRequest(2, Cell("a100", 4)),
    ]
    nodes = {"n0": 4, "n1": 4}
    first = place(pool(nodes), reqs)
    assert evict_fewest(pool(nodes), reqs, first) is None
    kept = place_with_repack(SimpleNamespace(pool=pool(nodes)), reqs)
    assert kept[0] == first[0] and kept[1] == first[1] and isinstance(kept[2], Unplaced)


def test_a_job_whose_qos_the_round_may_not_preempt_is_never_moved_to_seat_another() -> None:
    # Row 6 alone on n3 is the cheapest to move (test above); with its QOS protected from the waiting job's,
    # it stays, and the next-cheapest node is freed instead (n2's 2-GPU job) or nothing moves.
    reqs = _round()
    first = place(pool(NODES), reqs)
    out = evict_fewest(pool(NODES), reqs, first, frozenset({6}))
    assert out is not None
    placed, _ = out
    assert placed[6] == first[6]
    assert isinstance(placed[8], Placed) and "n3" not in placed[8].nodes
    everything = frozenset(range(8))
    assert evict_fewest(pool(NODES), reqs, first, everything) is None
    kept = place_with_repack(SimpleNamespace(pool=pool(NODES)), reqs, everything)
    assert all(kept[row] == first[row] for row in range(8)) and isinstance(kept[8], Unplaced)


def test_frozen_rows_follow_slurm_qos_preemption_rules() -> None:
    import numpy as np

    from slurmplan.mechanism.qos import frozen_rows

    rules = {"high": (100, ()), "normal": (10, ("low",)), "low": (0, ())}
    qos = ("high", "low", "normal", "normal", "low")
    running = np.array([True, True, True, False, False])
    # the waiting normal job (row 3) may preempt low (row 1) and normal (row 2), not high (row 0)
    assert frozen_rows(qos, rules, running, [3]) == frozenset({0})
    # a waiting low job (row 4) may preempt only low
    assert frozen_rows(qos, rules, running, [3, 4]) == frozenset({0, 2})
    assert frozen_rows(qos, {}, running, [3, 4]) == frozenset()
    assert frozen_rows(None, rules, running, [3]) == frozenset()
