"""The round's fallbacks between rounds mostly come to nothing (issue 27: on the site history's busy day 1,308 of
1,473 evictions and 1,307 of 1,308 repackings were thrown away), so each is cut short where it provably cannot be
taken: the evictions when the jobs to place again cannot fit around the jobs that stay (``repack._cannot_replace``),
the repacking as soon as it moves more kept jobs than it can seat (``placement._Rival``). On every fallback of a
busy real run the pruned code must give the plain code's very answer; a test that is too strong must fail that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from slurmplan.mechanism import layout, placement, repack
from slurmplan.mechanism.placement import Placed


def _compare_on_a_busy_run(
    monkeypatch, cannot_replace: Callable = repack._cannot_replace, rival: type = placement._Rival
) -> Counter:
    """Run the busy simulation with the fallbacks pruned by ``cannot_replace`` and ``rival``; at every
    ``place_with_repack`` call also run the plain fallbacks (no precheck, no give-up) on the same inputs and count
    how the answers compare (the simulation goes on with the plain answer)."""
    from tests.mechanism.helpers import crius_llm_simulation

    seen: Counter = Counter()
    plain_place_with_repack, keeping = layout.place_with_repack, placement.place_keeping

    def proved(*args) -> bool:
        out = cannot_replace(*args)
        seen["evictions proved fruitless"] += out
        return out

    def plain_keeping(pool, requests, keep, **kw):
        kw.pop("rival", None)
        kw.pop("frozen", None)
        return keeping(pool, requests, keep, **kw)

    def checked(ctx, requests, frozen=frozenset()):
        with monkeypatch.context() as m:
            m.setattr(repack, "_cannot_replace", lambda *a: False)
            m.setattr(layout, "place_keeping", plain_keeping)
            plain = plain_place_with_repack(ctx, requests, frozen)
        with monkeypatch.context() as m:
            m.setattr(repack, "_cannot_replace", proved)
            m.setattr(placement, "_Rival", rival)
            pruned = plain_place_with_repack(ctx, requests, frozen)
        first = placement.place(ctx.pool, requests)
        if any(not isinstance(w, Placed) and not w.waits for w in first.values()):
            seen["fallbacks"] += 1
            seen["taken"] += plain != first
        seen["differ"] += pruned != plain
        return plain

    monkeypatch.setattr(layout, "place_with_repack", checked)
    crius_llm_simulation("slurmplan", num_jobs=800, rate_per_h=800.0, hours=3.0).run()
    return seen


def test_pruned_fallbacks_answer_what_the_plain_fallbacks_answer(monkeypatch) -> None:
    gave_up = Counter()
    gives_up = placement._Rival.gives_up

    def counted(self, req, where):
        out = gives_up(self, req, where)
        gave_up["repackings given up"] += out
        return out

    monkeypatch.setattr(placement._Rival, "gives_up", counted)
    seen = _compare_on_a_busy_run(monkeypatch)
    assert seen["differ"] == 0, seen
    # both prunings worked, and fallbacks were also taken (else the test compared only failures)
    assert seen["fallbacks"] > 100 and seen["taken"] > 10, seen
    assert seen["evictions proved fruitless"] > 20 and gave_up["repackings given up"] > 20, (seen, gave_up)


def test_a_precheck_that_counts_a_split_job_as_one_piece_fails(monkeypatch) -> None:
    """Too strong: a job split over ``k`` nodes counted as ``(k * p) // s`` blocks instead of ``k * (p // s)``
    (two 2-GPU halves need no 4-GPU block) proves evictions fruitless that were taken."""

    def too_strong(*args) -> bool:
        with monkeypatch.context() as m:
            m.setattr(repack, "_shapes", lambda *a: [(1, k * p) for k, p in shapes(*a)])
            return cannot_replace(*args)

    shapes, cannot_replace = repack._shapes, repack._cannot_replace
    seen = _compare_on_a_busy_run(monkeypatch, cannot_replace=too_strong)
    assert seen["differ"] > 0, seen


def _repack_taken() -> tuple[object, list]:
    """A round whose repacking is taken, moving exactly as many kept jobs as it seats: a 4-GPU job with 32 CPUs
    waits; the eviction picks n0 (one 1-GPU job to move, the first such node), whose 8 CPUs cannot hold it, so it
    seats nothing; largest first, the job takes n1 and moves the 1-GPU job there to n0 (one moved, one seated)."""
    from types import SimpleNamespace

    import numpy as np

    from slurmplan.domain import Cell
    from slurmplan.mechanism.placement import PlacementRequest
    from slurmplan.mechanism.problem import NodePool

    pool = NodePool(("n0", "n1"), ("a100", "a100"), np.array([4, 4]), np.array([8, 64]), np.array([10**5] * 2))
    reqs = [
        PlacementRequest(0, Cell("a100", 1), 1, 100, ("n0",)),
        PlacementRequest(1, Cell("a100", 1), 1, 100, ("n1",)),
        PlacementRequest(2, Cell("a100", 4), 32, 100, most_nodes=1),
    ]
    return SimpleNamespace(pool=pool), reqs


def test_a_repacking_is_taken_where_it_moves_as_many_as_it_seats() -> None:
    ctx, reqs = _repack_taken()
    assert repack.evict_fewest(ctx.pool, reqs, placement.place(ctx.pool, reqs)) is None
    assert layout.place_with_repack(ctx, reqs) == {
        0: Placed(("n0",), 1),
        1: Placed(("n0",), 1),
        2: Placed(("n1",), 4),
    }


def test_a_repacking_that_gives_up_one_move_early_fails(monkeypatch) -> None:
    """Too strong: giving up when the moved rows only equal the rows left to seat drops the repacking above (the
    busy run's repackings are never taken: each moves more kept jobs than it seats)."""

    class Early(placement._Rival):
        def gives_up(self, req, where) -> bool:
            return super().gives_up(req, where) or (self.moved > 0 and self.moved >= self.seatable)

    ctx, reqs = _repack_taken()
    monkeypatch.setattr(placement, "_Rival", Early)
    assert isinstance(layout.place_with_repack(ctx, reqs)[2], placement.Unplaced)
