"""Crius's Cell-based scheduler (crius.md section 3): place jobs by Cells, scaling others within a search depth.

Per round (Crius re-runs on arrivals, departures and every 5 minutes):
1. running jobs keep their current Cell when it is still valid;
2. pending jobs, in arrival order, each try every Cell they have: one that fits the free GPUs is a choice;
   otherwise up to ``search_depth`` scaling steps on other jobs of that GPU type (each step shrinks one job to
   a smaller Cell of its type, or moves it to another type with room, whichever loses the least throughput per
   GPU freed) make room. The choice with the highest total estimated throughput wins; a job with no feasible
   choice stays pending while later jobs use the idle GPUs (opportunistic execution, so nobody starves them);
3. an extra round hands GPUs still idle to running jobs (scale up / move to a faster type) by best gain per GPU.
Throughput is summed as speedups over each job's reference configuration (see greedy.py).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy.base import Param, Policy, non_negative
from slurmplan.policy.greedy import Packing, climb, reference_throughput


class Crius(Policy):
    objective: ClassVar[str] = "crius"
    PARAMS: ClassVar = {
        "search_depth": Param(int, 3, "an integer >= 0 (scaling steps per choice)", non_negative),
        "scale_up": Param(bool, True, "true (hand idle GPUs to running jobs) or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        self._last_chains = None
        pack = Packing.empty(problem)
        score = problem.throughput / reference_throughput(problem)[:, None]
        if problem.current is not None:
            for j, c in enumerate(np.asarray(problem.current, dtype=int)):
                if c >= 0 and pack.fits(j, int(c)):
                    pack.assign(j, int(c))
        for j in np.argsort(problem.column("submit_time"), kind="stable"):
            if pack.col[j] < 0:
                self._place(pack, int(j), score)
        if self.params["scale_up"]:
            climb(pack, score)
        return self.result(problem, pack.x(), pack.value(score))

    def _place(self, pack: Packing, j: int, score: np.ndarray) -> None:
        """Job j at its best column of any size, making room by up to ``search_depth`` scaling steps.

        The steps that make room on a type do not depend on which column of that type is tried (the cheapest
        step is chosen over the other jobs on the type), so each type's step sequence is computed once and a
        column uses its prefix until it fits: same choices as trying each column on its own copy, ~4x fewer
        searches (bench_policies: 16 columns on 4 types)."""
        best_value, best_state, best_c = -np.inf, None, -1
        states = self._chains(pack, j, score)  # type -> packing after 0, 1, ... steps (None: no step)
        columns = np.nonzero(pack.problem.throughput[j] > 0)[0].tolist()
        if pack.col[j] < 0:  # every search of a round: each type's columns at once (issue 27)
            found = self._rooms(pack, states, j, columns, score)
            bases: dict[int, tuple[np.ndarray, int]] = {}
            for c in columns:
                trial = found.get(c)
                if trial is None:
                    continue
                base = bases.get(id(trial))
                if base is None:
                    base = bases[id(trial)] = _value_base(trial, j, c, score)
                # the same sum as ``_trial_value``: the same elements in the same order (only j's differs)
                values = base[0].copy()
                values[base[1]] = score[j, c]
                value = float(values.sum())
                if value > best_value:
                    best_value, best_state, best_c = value, trial, c
        else:
            for c in columns:
                t = pack.cell_type[c]
                if t < 0:
                    continue
                trial = self._room_for(pack, states.setdefault(int(t), [pack]), j, c, score)
                if trial is None:
                    continue
                value = _trial_value(trial, j, c, score)
                if value > best_value:
                    best_value, best_state, best_c = value, trial, c
        if best_state is not None:
            best_state = best_state.copy()
            best_state.assign(j, best_c)
            pack.col[:], pack.free[:] = best_state.col, best_state.free
            for (_, free), (_, best_free) in zip(pack.host, best_state.host, strict=True):
                free[:] = best_free

    def _chains(self, pack: Packing, j: int, score: np.ndarray) -> dict[int, list[Packing | None]]:
        """The step chains (per GPU type) for placing j on ``pack``: the previous call's when it was on the same
        problem and scores, on a packing with the same contents, and j is not placed (empty otherwise).

        A waiting job that finds no choice leaves the packing as it was, and in a busy round most do (77 % of the
        searches on the site history's first day): the next job's search would compute the very same steps. A step
        depends on the packing's contents, the type and the scores only (j is excluded from the jobs it moves, and
        an unplaced j is not among them; a subclass's ``_cheapest_step`` may read no more than what its instance
        holds for the whole allocation, as the flagship's ``protected``). The chains hold packings that are never
        changed once built (``_place`` copies one before assigning), and their first, the packing itself, only by
        contents. Kept for one allocation: ``allocate`` forgets them."""
        if pack.col[j] >= 0:
            return {}
        key = (pack.col.tobytes(), pack.free.tobytes(), *(free.tobytes() for _, free in pack.host))
        last = self._last_chains
        if last is not None and last[0] is pack.problem and last[1] is score and last[2] == key:
            chains = last[3]
            for chain in chains.values():
                chain[0] = pack  # the same contents
            return chains
        chains: dict[int, list[Packing | None]] = {}
        self._last_chains = (pack.problem, score, key, chains)
        return chains

    _last_chains: tuple | None = None
    """``_chains``' memo: (problem, scores, the packing's contents, the chains by type)."""

    _last_rooms: tuple[dict, set] | None = None
    """``_rooms``' memo for the chains it was last given (by identity; ``_chains`` hands the same dict out again
    while the packing's contents stay): the columns (with host limits: each with the job's needs there) that fit in
    no packing of their type's chain. Whether a job not placed fits in a packing depends on the column's GPUs and
    its needs alone, and the chains do not depend on which job asks; a column that fits somewhere places the job
    (the packing changes, and the chains with it), so only the columns that fit nowhere are asked again."""

    def _room_for(self, pack: Packing, chain: list[Packing | None], j: int, c: int, score) -> Packing | None:
        """The first packing of type c's step chain (extended on demand) where j fits in c, as ``_make_room``
        would reach it; None when the search depth or the steps run out first."""
        t = pack.cell_type[c]
        for k in range(self.params["search_depth"] + 1):
            if k == len(chain):
                self._extend(chain, t, j, score)
            state = chain[k]
            if state is None:
                return None
            if state.fits(j, c):
                return state
        return None

    def _rooms(
        self, pack: Packing, states: dict[int, list[Packing | None]], j: int, columns: list[int], score: np.ndarray
    ) -> dict[int, Packing]:
        """``_room_for`` for every column of an unplaced j at once: column -> the first packing of its type's step
        chain where j fits (columns that fit nowhere within the depth are left out).

        Each type's columns are tested against the chain's packings together, one array comparison per packing,
        with ``Packing.fits``'s test for an unplaced job (its GPUs, then each host need, against the type's free
        amount plus 1e-9), and the chain is extended only while a column is left that fits in none so far: the
        same packings, the same chain, as the column-by-column walk (issue 27: 380,000 ``_room_for`` calls and
        600,000 ``fits`` a site day)."""
        last = self._last_rooms
        if last is not None and last[0] is states:
            nowhere = last[1]
        else:
            nowhere = set()
            self._last_rooms = (states, nowhere)  # holds the chains: their id stays theirs
        by_type: dict[int, list[int]] = {}
        types = pack.cell_type.tolist()
        key_of = {c: (c, *(float(need[j, c]) for need, _ in pack.host)) for c in columns} if pack.host else None
        for c in columns:
            t = types[c]
            if t >= 0 and (c if key_of is None else key_of[c]) not in nowhere:
                by_type.setdefault(t, []).append(c)
        found: dict[int, Packing] = {}
        depth = self.params["search_depth"]
        for t, cols in by_type.items():
            chain = states.setdefault(t, [pack])
            left = np.array(cols, dtype=np.int64)
            gpus = pack.cell_gpus[left]
            needs = [need[j, left] for need, _ in pack.host]
            for k in range(depth + 1):
                if k == len(chain):
                    self._extend(chain, t, j, score)
                state = chain[k]
                if state is None:
                    break
                ok = gpus <= state.free[t] + 0.0 + 1e-9
                for need, (_, free) in zip(needs, state.host, strict=True):
                    ok &= ~(need > free[t] + 0.0 + 1e-9)
                for c in left[ok].tolist():
                    found[c] = state
                if ok.all():
                    left = left[:0]
                    break
                keep = ~ok
                left, gpus, needs = left[keep], gpus[keep], [need[keep] for need in needs]
            nowhere.update(left.tolist() if key_of is None else (key_of[c] for c in left.tolist()))
        return found

    def _extend(self, chain: list[Packing | None], t: int, j: int, score: np.ndarray) -> None:
        """One more packing on type t's step chain: the last one after its cheapest step, or None (no step)."""
        prev = chain[-1]
        step = None if prev is None else self._cheapest_step(prev, t, j, score)
        if step is None:
            chain.append(None)
            return
        nxt = prev.copy()
        if step[1] < 0:
            nxt.release(step[0])
        else:
            nxt.assign(step[0], step[1])
        chain.append(nxt)

    def _make_room(self, pack: Packing, j: int, c: int, score: np.ndarray) -> bool:
        """Up to ``search_depth`` scaling steps on pack until j fits in c (the reference ``_place`` follows)."""
        t = pack.cell_type[c]
        for _ in range(self.params["search_depth"]):
            if pack.fits(j, c):
                return True
            step = self._cheapest_step(pack, t, j, score)
            if step is None:
                return False
            k, target = step
            if target < 0:
                pack.release(k)
            else:
                pack.assign(k, target)
        return pack.fits(j, c)

    def _cheapest_step(self, pack: Packing, t: int, j: int, score: np.ndarray) -> tuple[int, int] | None:
        """The move of one other job on type t that frees GPUs there at the least throughput lost per GPU.

        What does not change within a problem (which columns are of type t, the GPUs a move to each frees, the
        columns a job has throughput in) is computed once per problem and type (``_step_parts``); a search asks
        for ~17,000 steps a site day (issue 27). The same arrays, the same arithmetic: ``_cheapest_step_plain``
        is the reference (``tests/policy/test_crius_step.py``)."""
        other, same_gpus, same, usable, type_of = self._step_parts(pack, t)
        col = pack.col
        mask = (col >= 0) & (pack.cell_type[np.maximum(col, 0)] == t)
        mask[j] = False
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return None
        cur = col[rows]
        freed = pack.cell_gpus[cur][:, None] - same_gpus
        ok = usable[rows] & (freed > 0) & (same | (pack.cell_gpus <= pack.free[type_of] + 1e-9))
        for need, free in pack.host:
            extra = need[rows] - np.where(other, 0.0, need[rows, cur][:, None])
            ok &= extra <= free[type_of][None, :] + 1e-9
        if not ok.any():
            return None
        cost = np.where(ok, (score[rows, cur][:, None] - score[rows]) / np.maximum(freed, 1e-12), np.inf)
        r, c2 = np.unravel_index(int(np.argmin(cost)), cost.shape)
        return int(rows[r]), int(c2)

    def _step_parts(self, pack: Packing, t: int) -> tuple:
        """``_cheapest_step``'s per-problem arrays for type t: columns of another type (1 x C), the GPUs a
        column of type t takes (1 x C, 0 elsewhere), columns of type t (C), (job, column) pairs with throughput
        on a known type (J x C), and each column's type clipped at 0 (C). Remembered while the throughput matrix,
        the column types and GPUs are the very arrays (a packing's copies share them; held, so their ids stay
        theirs; none is written after ``Packing.empty``)."""
        last = self._last_steps
        problem = pack.problem
        if (
            last is None
            or last[0] is not problem.throughput
            or last[1] is not pack.cell_type
            or last[2] is not pack.cell_gpus
        ):
            usable = (problem.throughput > 0) & (pack.cell_type >= 0)[None, :]
            types = np.maximum(pack.cell_type, 0)
            last = self._last_steps = (problem.throughput, pack.cell_type, pack.cell_gpus, usable, types, {})
        parts = last[5].get(t)
        if parts is None:
            other = pack.cell_type[None, :] != t
            same_gpus = np.where(other, 0.0, pack.cell_gpus[None, :])
            parts = last[5][t] = (other, same_gpus, pack.cell_type == t, last[3], last[4])
        return parts

    _last_steps: tuple | None = None
    """``_step_parts``'s memo: (throughput, column types, column GPUs, usable pairs, clipped types, type -> parts)."""

    def _cheapest_step_plain(self, pack: Packing, t: int, j: int, score: np.ndarray) -> tuple[int, int] | None:
        """``_cheapest_step`` computing every array on each call, as before issue 27's memo: its reference."""
        on = pack.col >= 0
        rows = np.nonzero(on & (pack.cell_type[np.maximum(pack.col, 0)] == t) & (np.arange(len(pack.col)) != j))[0]
        if len(rows) == 0:
            return None
        cur = pack.col[rows]
        other = pack.cell_type[None, :] != t
        freed = pack.cell_gpus[cur][:, None] - np.where(other, 0.0, pack.cell_gpus[None, :])
        room = pack.free[np.maximum(pack.cell_type, 0)][None, :]
        ok = (pack.problem.throughput[rows] > 0) & (pack.cell_type >= 0)[None, :] & (freed > 0)
        ok &= ~other | (pack.cell_gpus[None, :] <= room + 1e-9)
        for need, free in pack.host:
            extra = need[rows] - np.where(other, 0.0, need[rows, cur][:, None])
            ok &= extra <= free[np.maximum(pack.cell_type, 0)][None, :] + 1e-9
        if not ok.any():
            return None
        cost = np.where(ok, (score[rows, cur][:, None] - score[rows]) / np.maximum(freed, 1e-12), np.inf)
        r, c2 = np.unravel_index(int(np.argmin(cost)), cost.shape)
        return int(rows[r]), int(c2)


def _trial_value(trial: Packing, j: int, c: int, score: np.ndarray) -> float:
    """The value of ``trial`` with j assigned to c (``Packing.value`` reads the columns only), without copying
    the packing: only the best is built (issue 27)."""
    return float(_value_base(trial, j, c, score)[0].sum())


def _value_base(trial: Packing, j: int, c: int, score: np.ndarray) -> tuple[np.ndarray, int]:
    """``_trial_value``'s summands for ``trial`` with j in c, and j's position among them: the other columns of
    j on the same packing differ in that one summand only."""
    cols = trial.col.copy()
    cols[j] = c
    on = cols >= 0
    rows = np.nonzero(on)[0]
    return score[rows, cols[on]], int(np.searchsorted(rows, j))
