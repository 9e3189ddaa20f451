"""Put the round's chosen jobs on nodes: consolidated, largest first, within free CPUs and memory.

Gavel places jobs in decreasing order of GPUs and packs a job's GPUs on one server to limit fragmentation
(narayanan.md A4). Here a job's GPUs go on as few nodes of its Cell's GPU type as possible, the same number
on each node (what Slurm's ``--gpus-per-node`` with ``--nodes`` expresses); among fitting nodes the fullest
are used first (best fit), so whole nodes stay free for large jobs. Jobs that keep running keep their nodes.

A job that just left its nodes (requeued, or about to restart elsewhere) would wait Slurm's requeue delay
(``cred_expire + 1``, 121 s by default) if it started again on one of them (``SlurmRules.may_skip_requeue_wait``):
its request names them in ``avoid`` and the same split goes on other nodes of the type where they have room.
A pending job already requeued (``refuse_avoided``) is not placed on them at all while the delay runs: its GPUs
would sit reserved and idle for the whole wait, so the round gives them to the next jobs by priority instead.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields

import numpy as np

from slurmplan.domain import Cell, frozen_from
from slurmplan.mechanism.problem import NodePool


@dataclass(frozen=True)
class PlacementRequest:
    """One job to place: its problem row, Cell, CPU and memory needs, and nodes it should keep if they fit."""

    row: int
    cell: Cell
    cpus: int = 0
    memory_mb: int = 0
    preferred: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    """Nodes the job just left (or, running, would leave), where Slurm would make it wait its requeue delay: used only
    if nothing else fits."""
    refuse_avoided: bool = False
    """Never use ``avoid`` (the job is pending in its requeue delay): Unplaced rather than waiting on them."""
    max_nodes: int | None = None
    """The job's own node limit (``--nodes``): never split over more nodes than this."""
    most_nodes: int = 0
    """At most this many nodes where the type allows (its candidate's node count: the throughput the decision was
    made with is for that many; issue 23 saw a 2-GPU T4 job spread over two nodes "throughput predicted for 1");
    0: no such limit. ``max_nodes`` (the user's) is a hard limit on top of it."""

    @classmethod
    def of(cls, *values: object) -> PlacementRequest:
        """``PlacementRequest(*values)`` with every field given, without the frozen dataclass's per-field
        setattr (it has no ``__post_init__``): one per chosen job per tick."""
        return frozen_from(cls, dict(zip(_REQUEST_FIELDS, values, strict=True)))


_REQUEST_FIELDS = tuple(f.name for f in fields(PlacementRequest))


@dataclass(frozen=True)
class Placed:
    nodes: tuple[str, ...]
    gpus_per_node: int

    @classmethod
    def of(cls, nodes: tuple[str, ...], gpus_per_node: int) -> Placed:
        """``Placed(nodes, gpus_per_node)`` without the frozen dataclass's per-field setattr: every kept job
        is placed anew every tick."""
        return frozen_from(cls, {"nodes": nodes, "gpus_per_node": gpus_per_node})


@dataclass(frozen=True)
class Unplaced:
    why: str
    waits: bool = False
    """It fits only on nodes it just left, where Slurm would hold it for its requeue delay (repacking cannot help)."""


_kept_rows: dict[int, tuple[tuple[str, ...], dict[str, int], str, int, tuple | None]] = {}
"""``_Free._rows``'s memo: a pure function of the node names, the type, the GPUs per node and the pool layout's
index, keyed by the names' identity (hashing a long node tuple every tick cost as much as the lookup it saves)."""


_kept_plans: dict[int, tuple[PlacementRequest, dict[str, int], tuple | None]] = {}
"""``keep_all``'s memo of ``_Free.plan``: a pure function of the request (frozen) and the pool layout's index (the
nodes' names and types), keyed by the request's identity."""


_kept_nodes: dict[int, tuple[PlacementRequest, dict[str, int], tuple | None]] = {}
"""``keep_all``'s second memo of ``_Free.plan``, keyed by the identity of the request's preferred node tuple (a
running job's own, the same object from tick to tick): a kept job's request is rebuilt whenever its row moves (a
job submitted before it came or went: 14-19 % of the kept requests on ``bench_sim`` and the site history), and
``plan`` does not read the row (``_same_but_row``)."""


def _same_but_row(a: PlacementRequest, b: PlacementRequest) -> bool:
    """Whether ``_Free.plan`` answers ``a`` and ``b`` alike: the same preferred nodes (the very tuple), Cell, CPUs,
    memory and nodes to avoid, which is all it reads of a request."""
    return (
        a.preferred is b.preferred
        and (a.cell is b.cell or a.cell == b.cell)  # the very Cell mostly (``columns.canonical_cell``): no __eq__ call
        and a.cpus == b.cpus
        and a.memory_mb == b.memory_mb
        and a.avoid == b.avoid
    )


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Free:
    """Mutable free resources over the pool, consumed as jobs are placed (private to one call).

    Held as Python lists, which ``keep`` and ``fit`` read and write a few nodes at a time (numpy's per-element
    cost would dominate), and mirrored into numpy arrays only for ``_why``'s words.
    """

    def __init__(self, pool: NodePool) -> None:
        self.pool = pool
        self.g, self.c, self.m = pool.free_lists()
        self.gpus = self.cpus = self.mem = np.zeros(0, dtype=np.int64)  # built by ``arrays`` when asked
        self.stale = True
        self.index = pool.index()
        self.by_type = pool.by_type()  # read only here
        self._type_rows: dict[str, list[int]] = {}
        self._type_top: dict[str, int] = {}

    def arrays(self) -> None:
        """Bring the numpy mirror up to date with the lists."""
        if self.stale:
            self.gpus, self.cpus, self.mem = (np.array(v, dtype=np.int64) for v in (self.g, self.c, self.m))
            self.stale = False

    def keep(self, req: PlacementRequest) -> Placed | None:
        """The preferred nodes, if they are all of the right type and still fit an equal split."""
        plan = self.plan(req)
        return plan[4] if plan is not None and self._take(plan) else None

    def _take(self, plan: tuple) -> bool:
        """Take what ``plan`` (``plan``'s answer) needs if every one of its nodes still has it; False if not."""
        unique, gpn, cpn, mpn, _ = plan
        g, c, m = self.g, self.c, self.m
        for i in unique:
            if g[i] < gpn or c[i] < cpn or m[i] < mpn:
                return False
        for i in unique:  # a node named twice is taken once, as numpy's fancy ``-=`` would
            g[i] -= gpn
            c[i] -= cpn
            m[i] -= mpn
        self.stale = True
        return True

    def keep_all(self, requests: Sequence[PlacementRequest], out: dict[int, Placed | Unplaced]) -> list:
        """``keep`` for every request with preferred nodes, in order (the results go into ``out``); returns the
        requests left for ``fit``, in order.

        First every request takes its nodes at once. When no node went below zero, every ``keep`` in order would
        have found its nodes free (what each took is a part of the total, none negative), so the answer is the
        same as one ``keep`` after the other; otherwise the free lists start again from the pool (this is called
        first: nothing was taken before) and the plans are taken one after the other. Most ticks keep every
        running job where it runs, so the first pass is the answer."""
        plans = []
        g, c, m = self.g, self.c, self.m
        short = False
        for req in requests:  # a kept job's request is the same object tick after tick (``layout._kept_request``)
            if not req.preferred:
                plans.append(None)
                continue
            plan = self._remembered_plan(req)
            plans.append(plan)
            if plan is None:
                continue
            unique, gpn, cpn, mpn, _ = plan  # taken at once, in the same order as one pass after the plans would
            for i in unique:
                g[i] -= gpn
                c[i] -= cpn
                m[i] -= mpn
                short = short or g[i] < 0 or c[i] < 0 or m[i] < 0
        self.stale = True
        if short:
            self.g, self.c, self.m = self.pool.free_lists()
        later: list[PlacementRequest] = []
        for req, plan in zip(requests, plans, strict=True):
            if plan is not None and (not short or self._take(plan)):
                out[req.row] = plan[4]
            else:
                later.append(req)
        return later

    def largest_first(
        self,
        requests: Sequence[PlacementRequest],
        keep: Collection[int],
        out: dict[int, Placed | Unplaced],
        rival: dict[int, Placed | Unplaced] | None = None,
        frozen: Collection[int] = (),
    ) -> dict[int, Placed | Unplaced] | None:
        """Every request largest first, each on its preferred nodes if they still have room, else ``fit``; None
        as soon as a row in ``keep`` is left unplaced (``place_keeping`` without ``kept_first``: the round's
        repacking), or, given the first try's answer ``rival``, as soon as the answer can no longer be taken
        (``_Rival``).

        A stretch of requests with preferred nodes that can hold them (``plan``, remembered as ``keep_all``
        remembers it) takes its nodes at once: when no node went below zero, each ``keep`` in order would have
        found its nodes free, as in ``keep_all``; otherwise the stretch is given back and taken one request after
        the other. Only the requests between the stretches (new jobs, most rounds a few) are placed by ``fit``.
        The repacking placed each of ~230 requests by ``keep`` (issue 27: 1.1 s of a site day's 19 s). A plan is
        asked for when its request's turn comes (a repacking that stops early asks no more)."""
        order = sorted(requests, key=lambda r: (-r.cell.gpus, r.row))
        judge = _Rival(requests, keep, rival, frozen) if rival is not None else None
        plan_of = self._remembered_plan
        g, c, m = self.g, self.c, self.m
        i, n = 0, len(order)
        while i < n:
            req = order[i]
            plan = plan_of(req) if req.preferred else None
            if plan is None:
                where = out[req.row] = self.fit(req)
                if keep and req.row in keep and where.__class__ is not Placed:
                    return None
                if judge is not None and judge.gives_up(req, where):
                    return None
                i += 1
                continue
            plans = [plan]
            k = i + 1
            while k < n and order[k].preferred and (plan := plan_of(order[k])) is not None:
                plans.append(plan)
                k += 1
            short = False
            for unique, gpn, cpn, mpn, _ in plans:
                for r in unique:
                    g[r] -= gpn
                    c[r] -= cpn
                    m[r] -= mpn
                    short = short or g[r] < 0 or c[r] < 0 or m[r] < 0
            self.stale = True
            if not short:
                for j in range(i, k):
                    req = order[j]
                    where = out[req.row] = plans[j - i][4]
                    if judge is not None and judge.gives_up(req, where):
                        return None
                i = k
                continue
            for unique, gpn, cpn, mpn, _ in plans:  # given back, then one after the other
                for r in unique:
                    g[r] += gpn
                    c[r] += cpn
                    m[r] += mpn
            for j in range(i, k):
                req, plan = order[j], plans[j - i]
                where = out[req.row] = plan[4] if self._take(plan) else self.fit(req)
                if keep and req.row in keep and where.__class__ is not Placed:
                    return None
                if judge is not None and judge.gives_up(req, where):
                    return None
            i = k
        return out

    def _remembered_plan(self, req: PlacementRequest) -> tuple | None:
        """``plan`` through the two memos (``_kept_plans`` by the request, then ``_kept_nodes`` by its node tuple
        when only the same job's row moved), for ``keep_all`` and the repacking."""
        index = self.index
        hit = _kept_plans.get(id(req))
        if hit is not None and hit[0] is req and hit[1] is index:
            return hit[2]
        moved = _kept_nodes.get(id(req.preferred))
        plan = moved[2] if moved is not None and moved[1] is index and _same_but_row(moved[0], req) else self.plan(req)
        if len(_kept_plans) > 20_000:
            _kept_plans.clear()
            _kept_nodes.clear()
        _kept_plans[id(req)] = (req, index, plan)  # holds both: their ids stay theirs
        _kept_nodes[id(req.preferred)] = (req, index, plan)
        return plan

    def plan(self, req: PlacementRequest) -> tuple | None:
        """What ``keep`` takes for a request: (pool rows, GPUs, CPUs and memory per node, the Placed), or None
        when its preferred nodes can never do (wrong type or gone, an unequal split, nodes it must avoid)."""
        k = len(req.preferred)
        if k == 0 or req.cell.gpus % k or (req.avoid and not set(req.avoid).isdisjoint(req.preferred)):
            return None  # nodes it just left: ``fit`` looks elsewhere first
        gpn, cpn, mpn = req.cell.gpus // k, _ceil_div(req.cpus, k), _ceil_div(req.memory_mb, k)
        rows = self._rows(req.preferred, req.cell.gpu_type, gpn)
        if rows is None:
            return None
        return rows[0], gpn, cpn, mpn, rows[1]

    def _rows(self, nodes: tuple[str, ...], gpu_type: str, gpn: int) -> tuple[tuple[int, ...], Placed] | None:
        """The pool rows of ``nodes`` (each once) and the Placed on them (names in row order); None if one is
        missing or of another type. Remembered per node list while the pool's layout stays: a kept job asks
        every tick (a Placed is frozen: the same one is handed out again)."""
        hit = _kept_rows.get(id(nodes))  # by identity: a job's node tuple is the same object from tick to tick
        if hit is not None and hit[0] is nodes and hit[1] is self.index and hit[2] == gpu_type and hit[3] == gpn:
            return hit[4]
        idx = []
        types = self.pool.gpu_type
        for name in nodes:
            i = self.index.get(name)
            if i is None or types[i] != gpu_type:
                idx = None
                break
            idx.append(i)
        if idx is None:
            rows = None
        else:
            names = tuple(self.pool.names[i] for i in sorted(idx))
            rows = (tuple(sorted(set(idx))), Placed.of(names, gpn))
        if len(_kept_rows) > 100_000:
            _kept_rows.clear()
        _kept_rows[id(nodes)] = (nodes, self.index, gpu_type, gpn, rows)  # holds both: their ids stay theirs
        return rows

    def fit(self, req: PlacementRequest) -> Placed | Unplaced:
        """Fewest nodes first: k = 1, 2, ... (divisors of the GPU count), best-fit nodes for each k.

        Read from the free lists over the type's nodes (a hundred or so), not numpy arrays: a fit comes after
        a ``keep`` or another fit most of the time, and rebuilding the arrays and a dozen array operations on
        a type's nodes cost more than the loop (issue 27: 50,000 fits a site day)."""
        t = req.cell.gpu_type
        idx = self.by_type.get(t)
        g = req.cell.gpus
        if idx is None or idx.size == 0:
            return Unplaced(f"no schedulable {t} node: every one is down, drained or absent")
        nodes = self._rows_of(t, idx)
        # no more nodes than predicted, or than the fewest the type could ever hold it on (1-GPU nodes: g),
        # and never more than the user's own --nodes
        most = max(req.most_nodes, _ceil_div(g, max(1, self._top(t, idx)))) if req.most_nodes else g
        if req.max_nodes:
            most = min(most, req.max_nodes)
        free_g, free_c, free_m = self.g, self.c, self.m
        for k in range(1, min(g, len(nodes), most) + 1):
            if g % k:
                continue
            gpn, cpn, mpn = g // k, _ceil_div(req.cpus, k), _ceil_div(req.memory_mb, k)
            ok = [i for i in nodes if free_g[i] >= gpn and free_c[i] >= cpn and free_m[i] >= mpn]
            if len(ok) < k:
                continue
            if req.avoid:
                names = self.pool.names
                away = [i for i in ok if names[i] not in req.avoid]
                if len(away) >= k:
                    ok = away
                elif req.refuse_avoided:
                    return Unplaced(
                        f"waits: the policy chose {req.cell.short()} for it, which fits only on "
                        f"{','.join(sorted(req.avoid))}, which it has just left or would leave; Slurm would hold"
                        " it there for its requeue delay (cred_expire + 1), so those GPUs go to other jobs meanwhile,"
                        " and other GPU types are not tried for it before the next round",
                        waits=True,
                    )
            # the fullest first, then by position (``np.lexsort((ok, gpus[ok]))``, as before)
            best = [min(ok, key=lambda i: (free_g[i], i))] if k == 1 else sorted(ok, key=lambda i: (free_g[i], i))[:k]
            return self._take_rows(best, gpn, cpn, mpn)
        self.arrays()
        return Unplaced(self._why(req, idx))

    def _rows_of(self, t: str, idx: np.ndarray) -> list[int]:
        """The type's pool rows as a list (asked once per type and call)."""
        rows = self._type_rows.get(t)
        if rows is None:
            rows = self._type_rows[t] = idx.tolist()
        return rows

    def _top(self, t: str, idx: np.ndarray) -> int:
        """The most GPUs one node of the type has in the pool."""
        top = self._type_top.get(t)
        if top is None:
            top = self._type_top[t] = int(self.pool.gpus[idx].max())
        return top

    def _take_rows(self, rows: list[int], gpn: int, cpn: int, mpn: int) -> Placed:
        """``fit``'s nodes taken from the free lists (the numpy mirror goes stale), and the Placed on them."""
        g, c, m = self.g, self.c, self.m
        rows = sorted(rows)
        for i in rows:
            g[i] -= gpn
            c[i] -= cpn
            m[i] -= mpn
        self.stale = True
        names = self.pool.names
        return Placed(tuple(names[i] for i in rows), gpn)

    def _why(self, req: PlacementRequest, idx: np.ndarray) -> str:
        top = int(idx[np.argmax(self.gpus[idx])])
        return (
            f"does not fit now: {req.cell.short()} needs {req.cell.gpus} GPUs, {req.cpus} CPUs and {req.memory_mb} MB "
            f"of memory split equally over {req.cell.gpu_type} nodes; free now: {int(self.gpus[idx].sum())} GPUs on "
            f"{idx.size} nodes, the most on one node {int(self.gpus[top])} GPUs, {int(self.cpus[top])} CPUs and "
            f"{int(self.mem[top])} MB"
        )


class _Rival:
    """When a repacking can no longer be taken instead of the first try's answer ``rival`` (what
    ``layout.place_with_repack`` checks on the whole answer): a row of ``frozen`` placed otherwise, or more kept
    rows moved (placed otherwise than in ``rival``, among those with preferred nodes in ``keep``) than rows
    outside ``keep`` can still be seated, or none left to seat (then no more GPUs are placed). Each is final
    once seen: a request's answer is given once and never changed.

    Issue 27: the site history's busy day repacked 1,308 times between rounds and took one; 1,288 of them stop
    here (1,270 having moved more kept rows than they could seat), on average 44 % down the largest-first
    order."""

    __slots__ = ("keep", "rival", "frozen", "seatable", "moved")

    def __init__(
        self,
        requests: Sequence[PlacementRequest],
        keep: Collection[int],
        rival: dict[int, Placed | Unplaced],
        frozen: Collection[int],
    ) -> None:
        self.keep, self.rival, self.frozen = keep, rival, frozen
        self.seatable = sum(1 for r in requests if r.row not in keep)
        self.moved = 0

    def gives_up(self, req: PlacementRequest, where: Placed | Unplaced) -> bool:
        """Count ``req``'s answer ``where``; True when the repacking can no longer be taken."""
        row = req.row
        was = self.rival[row]
        if where is not was and where != was:
            if row in self.frozen:
                return True
            if row in self.keep:
                self.moved += bool(req.preferred)
        if row not in self.keep and where.__class__ is not Placed:
            self.seatable -= 1
        return self.seatable == 0 or self.moved > self.seatable


def place(
    pool: NodePool, requests: Sequence[PlacementRequest], *, kept_first: bool = True
) -> dict[int, Placed | Unplaced]:
    """Where each request runs, by row.

    With ``kept_first`` requests with preferred nodes are placed first (in the order given), then the rest
    largest first. Without it every request is taken largest first and only tries its preferred nodes when its
    turn comes: the repacking a round falls back to when kept jobs fragment the nodes a larger job needs.
    """
    out = place_keeping(pool, requests, (), kept_first=kept_first)
    assert out is not None  # nothing to keep placed
    return out


def place_keeping(
    pool: NodePool,
    requests: Sequence[PlacementRequest],
    keep: Collection[int],
    *,
    kept_first: bool = True,
    rival: dict[int, Placed | Unplaced] | None = None,
    frozen: Collection[int] = (),
) -> dict[int, Placed | Unplaced] | None:
    """``place``, or None as soon as a row in ``keep`` is left unplaced (it would be in the whole answer too: a
    request's answer is given once and never changed). Without ``kept_first`` and given the first try's answer
    ``rival`` (and the rows ``frozen`` in it), also None as soon as the answer could not replace ``rival``
    (``_Rival``: the repacking's own tests in ``layout.place_with_repack``).

    The round's fallbacks (``repack.evict_fewest``, ``layout.place_with_repack``'s repacking) throw away an answer
    that loses a job placed before, and on the site history's first day most did (1,254 of the 1,473 evictions'
    placements, 645 of the 1,308 repackings), after placing every request (issue 27)."""
    free = _Free(pool)
    out: dict[int, Placed | Unplaced] = {}
    if not kept_first:
        return free.largest_first(requests, keep, out, rival, frozen)
    for req in sorted(free.keep_all(requests, out), key=lambda r: (-r.cell.gpus, r.row)):
        where = out[req.row] = free.fit(req)
        if keep and req.row in keep and not isinstance(where, Placed):
            return None
    return out


def _largest_first_plain(
    pool: NodePool, requests: Sequence[PlacementRequest], keep: Collection[int]
) -> dict[int, Placed | Unplaced] | None:
    """``place_keeping(..., kept_first=False)`` one request after the other (``keep``, then ``fit``), as before
    ``_Free.largest_first``: its reference (``tests/mechanism/test_place_keeping.py``)."""
    free = _Free(pool)
    out: dict[int, Placed | Unplaced] = {}
    for req in sorted(requests, key=lambda r: (-r.cell.gpus, r.row)):
        kept = free.keep(req) if req.preferred else None
        where = out[req.row] = kept or free.fit(req)
        if keep and req.row in keep and not isinstance(where, Placed):
            return None
    return out


def placed_gpus(result: dict[int, Placed | Unplaced]) -> int:
    """GPUs a placement gives out in all (to compare a repacking with the first try)."""
    return sum(p.gpus_per_node * len(p.nodes) for p in result.values() if isinstance(p, Placed))
