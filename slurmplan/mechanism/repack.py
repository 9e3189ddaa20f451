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
    used = [0] * len(pool.names)  # GPUs taken per node, a list: read and written one node at a time
    on_node: dict[int, list[int] | tuple[int, ...]] = {}
    for row, where in placed.items():
        if where.__class__ is not Placed:
            continue
        gpn = where.gpus_per_node
        movable = row in kept and row not in frozen
        for name in where.nodes:
            i = index[name]
            used[i] += gpn
            if movable:
                on_node.setdefault(i, []).append(row)
    todo = sorted(
        (r for r in requests if (w := placed[r.row]).__class__ is not Placed and not w.waits),
        key=lambda r: (-r.cell.gpus, r.row),
    )
    moved: set[int] = set()
    seats: dict[int, tuple[str, ...]] = {}
    seated: dict[int, PlacementRequest] = {}
    for req in todo:
        nodes = _cheapest_nodes(pool, req, used, on_node, kept, placed, moved)
        if nodes is None:
            continue
        seats[req.row] = tuple(pool.names[i] for i in nodes)
        seated[req.row] = req
        gpn = req.cell.gpus // len(nodes)
        for i in nodes:
            used[i] += gpn
    if not seats or _cannot_replace(pool, requests, placed, kept, moved, seats, seated):
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


def _cannot_replace(
    pool: NodePool,
    requests: list[PlacementRequest],
    placed: Placement,
    kept: dict[int, PlacementRequest],
    moved: set[int],
    seats: dict[int, tuple[str, ...]],
    seated: dict[int, PlacementRequest],
) -> bool:
    """True when the placement ``evict_fewest`` is about to make must lose a job placed before, so it would answer
    None: proved on GPUs alone from what that placement surely keeps where it is.

    Issue 27: on the site history's busy day 1,254 of 1,473 evictions were thrown away for a lost job, each after
    building and placing the whole round again. What ``place_keeping`` (kept first) surely does: the kept jobs
    that stay take their own nodes (they are first in its list and fitted together in ``placed``), and then each
    seat takes its nodes when the GPUs, CPUs and memory left after them and the seats before it hold it (checked
    here; else nothing is proved). Every other job placed before (the moved ones and the rest) must then fit in
    the GPUs left on the seats' GPU types: a job split over ``k`` nodes at ``p`` GPUs each uses ``k * (p // s)``
    whole ``s``-GPU blocks, and a node with ``f`` GPUs free holds ``f // s`` of them however its jobs are
    packed (``a // s + b // s <= (a + b) // s``). When the jobs need more blocks than the nodes hold for some
    ``s``, one of them is left unplaced. A necessary condition only: False says nothing (the evictions run)."""
    index = pool.index()
    types = {r.cell.gpu_type for r in seated.values()}
    have, cpus, mem = pool.gpus.tolist(), pool.cpus.tolist(), pool.memory_mb.tolist()
    n = len(have)
    used, used_c, used_m = [0] * n, [0] * n, [0] * n
    items: list[PlacementRequest] = []
    for r in requests:
        where = placed[r.row]
        if where.__class__ is not Placed or r.cell.gpu_type not in types:
            continue
        if r.row not in kept or r.row in moved:
            items.append(r)  # placed before, placed again by the second pass: somewhere on its type
            continue
        nodes = where.nodes
        k = len(nodes)
        if r.avoid or len(r.preferred) != k or (k > 1 and len(set(nodes)) != k):
            return False  # its ``plan`` may be None (then ``fit`` places it anew), or name a node twice
        gpn, cpn, mpn = where.gpus_per_node, -(-r.cpus // k), -(-r.memory_mb // k)
        for name in nodes:
            i = index[name]
            used[i] += gpn
            used_c[i] += cpn
            used_m[i] += mpn
    for row, nodes in seats.items():
        r = seated[row]
        k = len(nodes)
        gpn, cpn, mpn = r.cell.gpus // k, -(-r.cpus // k), -(-r.memory_mb // k)
        for name in nodes:
            i = index[name]
            used[i] += gpn
            used_c[i] += cpn
            used_m[i] += mpn
            if used[i] > have[i] or used_c[i] > cpus[i] or used_m[i] > mem[i]:
                return False  # the seat might not be taken
    by_type = pool.by_type()
    for t in types:
        rows = by_type[t].tolist()
        top = max(have[i] for i in rows)
        shapes = [_shapes(r, len(rows), top) for r in items if r.cell.gpu_type == t]
        if not all(shapes):
            return True  # a job placed before that neither its nodes nor ``fit`` can place
        for s in sorted({p for options in shapes for _, p in options}):
            need = sum(min(k * (p // s) for k, p in options) for options in shapes)
            if need > sum((have[i] - used[i]) // s for i in rows):
                return True
    return False


def _shapes(req: PlacementRequest, type_nodes: int, top: int) -> list[tuple[int, int]]:
    """Every (nodes, GPUs per node) ``place_keeping`` may place ``req`` with: on its preferred nodes (``plan``,
    each node taken once), or by ``fit`` (``k`` dividing its GPUs, within its node limits); an empty list when
    neither can place it."""
    g = req.cell.gpus
    most = max(req.most_nodes, -(-g // max(1, top))) if req.most_nodes else g
    if req.max_nodes:
        most = min(most, req.max_nodes)
    out = [(k, g // k) for k in range(1, min(g, type_nodes, most) + 1) if g % k == 0]
    if req.preferred and g % len(req.preferred) == 0:
        out.append((len(set(req.preferred)), g // len(req.preferred)))
    return out


def _kept(where: Placed | Unplaced, req: PlacementRequest) -> bool:
    if where.__class__ is not Placed:
        return False
    return where.nodes == req.preferred or set(where.nodes) == set(req.preferred)  # mostly the same order


def _cheapest_nodes(
    pool: NodePool,
    req: PlacementRequest,
    used: list[int],
    on_node: dict[int, list[int] | tuple[int, ...]],
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
    names, have = pool.names, pool.gpus.tolist()  # read per node as Python ints (issue 27)
    rows = [i for i in idx.tolist() if names[i] not in req.avoid]
    top = max((have[i] for i in rows), default=0)
    for k in range(1, min(g, len(rows), most) + 1):
        if g % k or g // k > top:
            continue
        gpn = g // k
        costs = []
        for i in rows:
            plan = _evictions(i, have[i] - used[i], gpn, on_node, kept, placed, moved)
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
    ``free``: its GPUs free now. A node's list in ``on_node`` is sorted the first time it is asked for (a tuple
    from then on: ``evict_fewest`` asks ``_cheapest_nodes`` again for each job it seats)."""
    if free >= gpn:
        return [], 0  # nobody to move (the loop below would stop before its first job)
    on = on_node.get(i, ())
    if on.__class__ is list:
        on = on_node[i] = tuple(sorted(on, key=lambda r: (kept[r].cell.gpus, r)))
    rows: list[int] = []
    gpus = 0
    for row in on:
        if row in moved:
            continue
        if free >= gpn:
            break
        rows.append(row)
        free += placed[row].gpus_per_node
        gpus += kept[row].cell.gpus
    return (rows, gpus) if free >= gpn else None


def _move(row: int, pool: NodePool, used: list[int], placed: Placement, moved: set[int]) -> None:
    if row in moved:
        return
    moved.add(row)
    where = placed[row]
    index = pool.index()
    for name in where.nodes:
        used[index[name]] -= where.gpus_per_node
