"""The round's fallbacks place with ``placement.place_keeping``, which stops as soon as a job placed before is left
unplaced (issue 27: most of their placements were thrown away for that after placing every request). On every
such call of a busy real run it must give ``place``'s very answer, or None exactly where ``place``'s answer leaves
a row of ``keep`` unplaced; both outcomes must occur (else the test would compare nothing)."""

from __future__ import annotations

from slurmplan.mechanism import layout, placement, repack
from slurmplan.mechanism.placement import Placed


def test_place_keeping_answers_what_place_answers(monkeypatch) -> None:
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"full": 0, "stopped": 0}
    keeping = placement.place_keeping

    def checked(pool, requests, keep, **kw):
        kw.pop("rival", None)  # the repacking's give-up: tests/mechanism/test_fallback_pruning.py
        kw.pop("frozen", None)
        plain = placement.place(pool, requests, **kw)
        out = keeping(pool, requests, keep, **kw)
        if out is None:
            assert keep and any(not isinstance(plain[row], Placed) for row in keep)
            seen["stopped"] += 1
        else:
            assert out == plain
            assert all(isinstance(plain[row], Placed) for row in keep)
            seen["full"] += 1
        return out

    monkeypatch.setattr(layout, "place_keeping", checked)
    monkeypatch.setattr(repack, "place_keeping", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["stopped"] > 5 and seen["full"] > 5, seen


def test_largest_first_answers_what_one_request_after_the_other_answers(monkeypatch) -> None:
    """The repacking (``kept_first=False``) takes each stretch of requests with preferred nodes at once
    (``_Free.largest_first``): on every such call of a busy real run, the very answer (or None) of placing one
    request after the other (``_largest_first_plain``), with and without rows to keep."""
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"calls": 0, "stopped": 0, "kept": 0}
    keeping = placement.place_keeping

    def checked(pool, requests, keep, **kw):
        kw.pop("rival", None)  # the repacking's give-up: tests/mechanism/test_fallback_pruning.py
        kw.pop("frozen", None)
        out = keeping(pool, requests, keep, **kw)
        if not kw.get("kept_first", True):
            assert out == placement._largest_first_plain(pool, requests, keep)
            assert keeping(pool, requests, (), kept_first=False) == placement._largest_first_plain(pool, requests, ())
            seen["calls"] += 1
            seen["stopped"] += out is None
            seen["kept"] += out is not None and any(r.preferred and out[r.row] for r in requests)
        return out

    monkeypatch.setattr(layout, "place_keeping", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["calls"] > 10 and seen["stopped"] > 2 and seen["kept"] > 2, seen


def test_largest_first_gives_back_a_stretch_that_does_not_fit_at_once() -> None:
    """Two requests prefer the same 8-GPU node: taken at once it goes below zero, so the stretch is given back and
    taken one after the other (the larger keeps the node, the smaller goes to ``fit`` and takes the node a third
    request preferred), as the plain code does."""
    import numpy as np

    from slurmplan.domain import Cell
    from slurmplan.mechanism.placement import PlacementRequest
    from slurmplan.mechanism.problem import NodePool

    pool = NodePool(("a", "b", "c"), ("a100",) * 3, np.array([8, 8, 4]), np.array([64, 64, 64]), np.array([10**6] * 3))
    reqs = [
        PlacementRequest(0, Cell("a100", 4), 8, 100, ("a",)),
        PlacementRequest(1, Cell("a100", 8), 8, 100, ("a",)),
        PlacementRequest(2, Cell("a100", 4), 8, 100, ("c",)),
        PlacementRequest(3, Cell("a100", 2), 8, 100),
    ]
    got = placement.place_keeping(pool, reqs, (), kept_first=False)
    assert got == placement._largest_first_plain(pool, reqs, ())
    # the 8-GPU job keeps a; the 4-GPU job that preferred a fits best on c, which the other 4-GPU job preferred
    assert got == {0: Placed(("c",), 4), 1: Placed(("a",), 8), 2: Placed(("b",), 4), 3: Placed(("b",), 2)}
    assert placement.place_keeping(pool, reqs, {0, 1, 2, 3}, kept_first=False) == got


def _plain_fit(self, req):
    """``_Free.fit`` as it was before it read the free lists (numpy arrays over the type's nodes): the reference."""
    import numpy as np

    from slurmplan.mechanism.placement import Unplaced, _ceil_div

    idx = self.by_type.get(req.cell.gpu_type)
    self.arrays()
    g = req.cell.gpus
    if idx is None or idx.size == 0:
        return Unplaced(f"no schedulable {req.cell.gpu_type} node: every one is down, drained or absent")
    most = max(req.most_nodes, _ceil_div(g, max(1, int(self.pool.gpus[idx].max())))) if req.most_nodes else g
    if req.max_nodes:
        most = min(most, req.max_nodes)
    for k in range(1, min(g, idx.size, most) + 1):
        if g % k:
            continue
        gpn, cpn, mpn = g // k, _ceil_div(req.cpus, k), _ceil_div(req.memory_mb, k)
        ok = idx[(self.gpus[idx] >= gpn) & (self.cpus[idx] >= cpn) & (self.mem[idx] >= mpn)]
        if ok.size < k:
            continue
        if req.avoid:
            away = np.array([self.pool.names[i] not in req.avoid for i in ok.tolist()], dtype=bool)
            if int(away.sum()) >= k:
                ok = ok[away]
            elif req.refuse_avoided:
                return Unplaced("waits", waits=True)
        best = ok[np.lexsort((ok, self.gpus[ok]))[:k]]
        self.gpus[best] -= gpn
        self.cpus[best] -= cpn
        self.mem[best] -= mpn
        for i in sorted(set(best.tolist())):
            self.g[i] -= gpn
            self.c[i] -= cpn
            self.m[i] -= mpn
        return Placed(tuple(self.pool.names[i] for i in sorted(best.tolist())), gpn)
    return Unplaced(self._why(req, idx))


def test_fit_from_the_free_lists_places_what_the_arrays_placed(monkeypatch) -> None:
    """``_Free.fit`` reads the free lists over the type's nodes: every placement of a busy real run (the first
    try, the evictions', the repackings' and the refills') is the one the array version gives (a refused wait is
    compared by its ``waits`` flag; its words are the same function's)."""
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"calls": 0, "fits": 0, "unplaced": 0, "split": 0}
    keeping, fit = placement.place_keeping, placement._Free.fit

    def counted(self, req):
        out = fit(self, req)
        seen["fits"] += 1
        seen["unplaced"] += not isinstance(out, Placed)
        seen["split"] += isinstance(out, Placed) and len(out.nodes) > 1
        return out

    def checked(pool, requests, keep, **kw):
        kw.pop("rival", None)  # the repacking's give-up: tests/mechanism/test_fallback_pruning.py
        kw.pop("frozen", None)
        out = keeping(pool, requests, keep, **kw)
        with monkeypatch.context() as m:
            m.setattr(placement._Free, "fit", _plain_fit)
            ref = keeping(pool, requests, keep, **kw)
        same = lambda a, b: a == b or (not isinstance(a, Placed) and a.waits and b.waits)  # noqa: E731
        assert (out is None) == (ref is None)
        assert out is None or (out.keys() == ref.keys() and all(same(out[r], ref[r]) for r in out))
        seen["calls"] += 1
        return out

    monkeypatch.setattr(placement._Free, "fit", counted)
    monkeypatch.setattr(placement, "place_keeping", checked)
    monkeypatch.setattr(layout, "place_keeping", checked)
    monkeypatch.setattr(repack, "place_keeping", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["calls"] > 100 and seen["fits"] > 500 and seen["unplaced"] > 20 and seen["split"] > 5, seen
