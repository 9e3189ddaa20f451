"""Room for a chosen job that kept jobs fragment away: move the fewest kept jobs, not the whole round.

Issue 23 (measured on the 1,000-job LLM trace with the default costs): the round's fallback repacked every job
largest first whenever one chosen job found no nodes. Placing one 8-GPU job on the 4-GPU A100 nodes then moved
20-odd kept jobs to other A100 nodes at once, each paying a full restart and Slurm's requeue delay: more than half
of all restarts (2.2 of 3.4 per job) were such reshuffles at the same configuration, for every policy.

Here each chosen job left without nodes (largest first) picks the nodes of its type that need the fewest kept
jobs moved off them (smallest first on each node, ties: fewest GPUs moved), those jobs give up their nodes, and
the round is placed again with the chosen job on the freed nodes before the moved jobs look for new ones. The
result is used only if every job placed before is still placed and more GPUs are placed; otherwise the caller
keeps its first answer (the jobs wait for GPUs to free up, as under plain Slurm).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from slurmplan.mechanism.placement import Placed, PlacementRequest, Unplaced, place_keeping, placed_gpus
from slurmplan.mechanism.problem import NodePool

Placement = dict[int, Placed | Unplaced]


def evict_fewest(
    pool: NodePool, requests: list[PlacementRequest], placed: Placement, frozen: frozenset = frozenset()
) -> tuple[Placement, int] | None:
    """A placement that seats the unplaced requests by moving the fewest kept jobs, and how many moved; None
    when it seats nothing more or loses a job that was placed. Rows in ``frozen`` (a QOS the round may not
    preempt, ``qos.frozen_rows``) are never moved."""
    index = pool.index()
    kept = {r.row: r for r in requests if r.preferred and _kept(placed[r.row], r)}
    used = np.zeros(len(pool.names), dtype=np.int64)
    on_node: dict[int, list[int]] = {}
    for row, where in placed.items():
        if isinstance(where, Placed):
            for name in where.nodes:
                used[index[name]] += where.gpus_per_node
                if row in kept and row not in frozen:
                    on_node.setdefault(index[name], []).append(row)
    todo = sorted(
        (r for r in requests if isinstance(placed[r.row], Unplaced) and not placed[r.row].waits),
        key=lambda r: (-r.cell.gpus, r.row),
    )
    moved: set[int] = set()
    seats: dict[int, tuple[str, ...]] = {}
    for req in todo:
        nodes = _cheapest_nodes(pool, req, used, on_node, kept, placed, moved)
        if nodes is None:
            continue
        seats[req.row] = tuple(pool.names[i] for i in nodes)
        gpn = req.cell.gpus // len(nodes)
        for i in nodes:
            used[i] += gpn
    if not seats:
        return None
    stay = [r for r in requests if r.row in kept and r.row not in moved]
    first = [replace(r, preferred=seats[r.row]) for r in requests if r.row in seats]
    rest = [
        replace(r, preferred=(), avoid=tuple(sorted(set(r.avoid) | set(r.preferred)))) if r.row in moved else r
        for r in requests
        if (r.row not in kept or r.row in moved) and r.row not in seats
    ]
    before = {row for row, where in placed.items() if isinstance(where, Placed)}
    again = place_keeping(pool, stay + first + rest, before)  # None: it lost a job placed before
    if again is None or placed_gpus(again) <= placed_gpus(placed):
        return None
    return again, len(moved)


def _kept(where: Placed | Unplaced, req: PlacementRequest) -> bool:
    return isinstance(where, Placed) and set(where.nodes) == set(req.preferred)


def _cheapest_nodes(
    pool: NodePool,
    req: PlacementRequest,
    used: np.ndarray,
    on_node: dict[int, list[int]],
    kept: dict[int, PlacementRequest],
    placed: Placement,
    moved: set[int],
) -> list[int] | None:
    """The ``k`` nodes (fewest nodes first) that seat ``req`` moving the fewest kept jobs; marks them in
    ``moved`` and frees their GPUs in ``used``. None when no split fits even with every kept job moved."""
    idx = pool.by_type().get(req.cell.gpu_type)
    if idx is None or idx.size == 0:
        return None
    g = req.cell.gpus
    most = req.most_nodes or g
    if req.max_nodes:
        most = min(most, req.max_nodes)
    idx = np.array([i for i in idx.tolist() if pool.names[i] not in req.avoid], dtype=np.int64)
    for k in range(1, min(g, idx.size, most) + 1):
        if g % k or g // k > int(pool.gpus[idx].max(initial=0)):
            continue
        gpn = g // k
        costs = []
        have, taken = pool.gpus.tolist(), used.tolist()  # read per node as Python ints (issue 27)
        for i in idx.tolist():
            plan = _evictions(i, have[i] - taken[i], gpn, on_node, kept, placed, moved)
            if plan is not None:
                costs.append((len(plan[0]), plan[1], i, plan[0]))
        if len(costs) < k:
            continue
        costs.sort()  # by (jobs moved, their GPUs, node): the node is unique, so the lists are never compared
        chosen = costs[:k]
        for _, _, _, rows in chosen:
            for row in rows:
                _move(row, pool, used, placed, moved)
        return [c[2] for c in chosen]
    return None


def _evictions(i, free, gpn, on_node, kept, placed, moved) -> tuple[list[int], int] | None:
    """Kept jobs to move off node ``i`` (smallest first) so that it has ``gpn`` GPUs free, and their GPUs;
    ``free``: its GPUs free now."""
    if free >= gpn:
        return [], 0  # nobody to move (the loop below would stop before its first job)
    rows: list[int] = []
    gpus = 0
    for row in sorted((r for r in on_node.get(i, []) if r not in moved), key=lambda r: (kept[r].cell.gpus, r)):
        if free >= gpn:
            break
        rows.append(row)
        free += placed[row].gpus_per_node
        gpus += kept[row].cell.gpus
    return (rows, gpus) if free >= gpn else None


def _move(row: int, pool: NodePool, used: np.ndarray, placed: Placement, moved: set[int]) -> None:
    if row in moved:
        return
    moved.add(row)
    where = placed[row]
    index = pool.index()
    for name in where.nodes:
        used[index[name]] -= where.gpus_per_node
