"""The flagship's selection and its guard's room-making ask fewer ``Packing.fits`` questions (issue 27) and must
decide exactly what the plain code below (the code before that change) decides.

- ``flagship_moves._make_room`` asked whether ``j`` fits before every job of the queue, also after skipping a job
  that changed nothing, and tested every job of the queue for a move; it now asks only after a step and walks
  only the jobs that can move (a step changes the moved job's column alone).
- ``Slurmplan._select`` built each job's list of fitting columns; the search branch (most waiting jobs of a busy
  round) never reads it, and the hold branch needs only whether the job's own column fits.

Both are compared with their plain versions on every call of a busy real run (the Crius cluster at 800 arrivals an
hour: rounds with searches, blocked types and priced moves), on copies of the same packing: the same answer and
the same packing afterwards. The test also checks that the branches were taken (else it would compare nothing).
"""

from __future__ import annotations

import numpy as np

from slurmplan.policy import flagship_moves
from slurmplan.policy.flagship import Slurmplan
from slurmplan.policy.greedy import Packing


def _plain_make_room(trial: Packing, j: int, c0: int, order: np.ndarray, cur: np.ndarray):
    pushed: list[int] = []
    back: list[int] = []
    t = trial.cell_type[c0]
    for k in order[::-1].tolist():
        if trial.fits(j, c0):
            return pushed, back
        col = trial.col[k]
        if k == j or col < 0 or trial.cell_type[col] != t or col == cur[k]:
            continue
        trial.release(k)
        if cur[k] < 0:
            pushed.append(k)
        elif trial.fits(k, int(cur[k])) and trial.cell_type[cur[k]] != t:
            trial.assign(k, int(cur[k]))
            back.append(k)
        else:
            return None
    return (pushed, back) if trial.fits(j, c0) else None


def _plain_select(self, problem, queue, floors, catch, guarded, running, pays=None):
    from slurmplan.policy.flagship_sizing import catch_up

    pack = Packing.empty(problem)
    search, score = self._search(problem, floors)
    hold = self.params["hold_s"]
    blocked = np.zeros(len(pack.free), dtype=bool)
    first = guarded | queue.overdue
    caught = False
    for j in queue.order.tolist():
        if not caught and floors[j] <= 0:
            choose = lambda k, floor: self._choices(problem, k, floor)  # noqa: E731
            floors, caught = catch_up(problem, pack, queue.order, floors, catch, choose), True
        choices = self._choices(problem, j, floors[j])
        if pays is not None and running[j]:
            choices = [c for c in choices if pays[j, c]]
        fit = [c for c in choices if pack.fits(j, c)]
        cur = int(problem.current[j]) if running[j] else -1
        if blocked.any() and not first[j]:
            fit = [c for c in fit if c == cur or pack.cell_type[c] < 0 or not blocked[pack.cell_type[c]]]
            if fit:
                pack.assign(j, cur if hold > 0 and cur in fit else self._stay_or_move(problem, j, fit))
            continue
        if hold > 0 and cur in fit:
            pack.assign(j, cur)
        elif search is not None and floors[j] <= 0:
            search._place(pack, j, score)
        elif fit:
            pack.assign(j, self._stay_or_move(problem, j, fit))
        if first[j] and pack.col[j] < 0:
            size = problem.cells[choices[0]].gpus if choices else 0
            for c in choices:
                if problem.cells[c].gpus == size and pack.cell_type[c] >= 0:
                    blocked[pack.cell_type[c]] = True
    self._blocked = blocked
    if not caught:
        choose = lambda k, floor: self._choices(problem, k, floor)  # noqa: E731
        floors = catch_up(problem, pack, queue.order, floors, catch, choose)
    return pack, floors


def _same_packing(a: Packing, b: Packing) -> None:
    np.testing.assert_array_equal(a.col, b.col)
    np.testing.assert_array_equal(a.free, b.free)
    for (_, free), (_, other) in zip(a.host, b.host, strict=True):
        np.testing.assert_array_equal(free, other)


def test_fewer_fits_questions_decide_what_the_plain_code_decides(monkeypatch) -> None:
    from tests.mechanism.helpers import crius_llm_simulation

    seen = {"rooms": 0, "made": 0, "pushed": 0, "selects": 0, "held": 0}
    make_room, select = flagship_moves._make_room, Slurmplan._select

    def checked_make_room(trial, j, c0, order, cur):
        ref = trial.copy()
        want = _plain_make_room(ref, j, c0, order, cur)
        got = make_room(trial, j, c0, order, cur)
        assert got == want
        if got is not None:  # the caller reads the packing only when room was made
            _same_packing(trial, ref)
            seen["made"] += 1
            seen["pushed"] += bool(got[0] or got[1])
        seen["rooms"] += 1
        return got

    def checked_select(self, problem, queue, floors, catch, guarded, running, pays=None):
        ref_pack, ref_floors = _plain_select(self, problem, queue, floors.copy(), catch, guarded, running, pays)
        ref_blocked = self._blocked.copy()
        pack, out = select(self, problem, queue, floors, catch, guarded, running, pays)
        _same_packing(pack, ref_pack)
        np.testing.assert_array_equal(out, ref_floors)
        np.testing.assert_array_equal(self._blocked, ref_blocked)
        seen["selects"] += 1
        cur = np.asarray(problem.current if problem.current is not None else np.full(problem.num_jobs, -1))
        seen["held"] += int(((cur >= 0) & (pack.col == cur)).sum())
        return pack, out

    monkeypatch.setattr(flagship_moves, "_make_room", checked_make_room)
    monkeypatch.setattr(Slurmplan, "_select", checked_select)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["selects"] > 10 and seen["held"] > 100, seen
    assert seen["rooms"] > 50 and seen["made"] > 10 and seen["pushed"] > 5, seen
