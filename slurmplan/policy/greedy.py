"""Shared machinery of the greedy, integral policies (Rubick, Crius, EasyScale): one column per job.

These systems do not solve an LP: each job runs in exactly one configuration (or none), chosen by a greedy
that compares marginal gains per GPU ("slopes"). ``Packing`` holds that state; ``climb`` is the common loop
"repeatedly apply the move with the best gain per added GPU that still fits", with a filter hook that each
policy uses to express its own move set (EasyScale: same-type scale-out only; Rubick: anything).

Throughputs are compared across jobs after dividing by each job's reference throughput (its requested
configuration when known, else its best one), so "sum of throughputs" means "sum of speedups", as Rubick's
evaluation reports it, instead of favouring models that happen to process many samples per second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from slurmplan.domain import AllocationProblem
from slurmplan.policy import lp

MoveFilter = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(current column per job, candidate mask J x C) -> the mask with the moves this policy forbids removed."""


def reference_throughput(problem: AllocationProblem) -> np.ndarray:
    """Per job: throughput in its requested column if it has one, else its best throughput (1 if none)."""
    thr = np.asarray(problem.throughput, dtype=float)
    best = thr.max(axis=1, initial=0.0)
    ref = best.copy()
    if problem.requested is not None:
        req = np.asarray(problem.requested, dtype=int)
        ok = req >= 0
        ref[ok] = np.where(thr[np.nonzero(ok)[0], req[ok]] > 0, thr[np.nonzero(ok)[0], req[ok]], best[ok])
    return np.where(ref > 0, ref, 1.0)


@dataclass
class Packing:
    """Mutable greedy state: the column of each job (-1: none) and free GPUs per type."""

    problem: AllocationProblem
    col: np.ndarray
    free: np.ndarray
    types: tuple[str, ...]
    cell_type: np.ndarray
    cell_gpus: np.ndarray
    host: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """CPUs and host memory when the problem limits them: (need per job x column, free per type)."""

    @classmethod
    def empty(cls, problem: AllocationProblem) -> Packing:
        types = tuple(sorted(problem.capacity))
        pos = {t: i for i, t in enumerate(types)}
        cell_type = np.array([pos.get(c.gpu_type, -1) for c in problem.cells], dtype=int)
        free = np.array([float(problem.capacity[t]) for t in types])
        host = []
        caps = (problem.cpu_capacity, problem.memory_capacity_mb)
        # the needs only where a host limit is known (issue 27: a site without them built both matrices every round)
        needs = lp.host_needs(problem) if any(cap is not None for cap in caps) else (None, None)
        for need, cap in zip(needs, caps, strict=True):
            if cap is not None and need.any():
                host.append((need, np.array([float(cap.get(t, np.inf)) for t in types])))
        cols = np.full(problem.num_jobs, -1)
        return cls(problem, cols, free, types, cell_type, problem.gpus_per_cell.copy(), host)

    def copy(self) -> Packing:
        host = [(need, free.copy()) for need, free in self.host]
        return Packing(
            self.problem, self.col.copy(), self.free.copy(), self.types, self.cell_type, self.cell_gpus, host
        )

    def _host_fits(self, j: int, c: int) -> bool:
        t, cur = self.cell_type[c], self.col[j]
        for need, free in self.host:
            back = need[j, cur] if cur >= 0 and self.cell_type[cur] == t else 0.0
            if need[j, c] > free[t] + back + 1e-9:
                return False
        return True

    def gpus_of(self, j: int) -> float:
        return float(self.cell_gpus[self.col[j]]) if self.col[j] >= 0 else 0.0

    def fits(self, j: int, c: int) -> bool:
        t = self.cell_type[c]
        if t < 0 or self.problem.throughput[j, c] <= 0:
            return False
        back = self.gpus_of(j) if self.col[j] >= 0 and self.cell_type[self.col[j]] == t else 0.0
        return self.cell_gpus[c] <= self.free[t] + back + 1e-9 and self._host_fits(j, c)

    def assign(self, j: int, c: int) -> None:
        self.release(j)
        self.free[self.cell_type[c]] -= self.cell_gpus[c]
        for need, free in self.host:
            free[self.cell_type[c]] -= need[j, c]
        self.col[j] = c

    def release(self, j: int) -> None:
        c = self.col[j]
        if c >= 0:
            self.free[self.cell_type[c]] += self.cell_gpus[c]
            for need, free in self.host:
                free[self.cell_type[c]] += need[j, c]
            self.col[j] = -1

    def x(self) -> np.ndarray:
        x = np.zeros(self.problem.throughput.shape)
        on = self.col >= 0
        x[np.nonzero(on)[0], self.col[on]] = 1.0
        return x

    def value(self, score: np.ndarray) -> float:
        on = self.col >= 0
        return float(score[np.nonzero(on)[0], self.col[on]].sum())


def climb(
    pack: Packing,
    score: np.ndarray,
    allowed: MoveFilter | None = None,
    jobs: np.ndarray | None = None,
    max_moves: int = 1_000_000,
) -> int:
    """Apply, one at a time, the move (job -> column) with the highest gain per added GPU until none helps.

    A move's gain is ``score[j, c] - score[j, current]`` and must be positive; moves that add no GPUs but gain
    (a faster type or plan at the same size) rank first; ties go to more GPUs (EasyScale's rule). ``jobs``
    limits which jobs may move. Returns the number of moves made.
    """
    thr = pack.problem.throughput
    nj = score.shape[0]
    movable = np.ones(nj, dtype=bool) if jobs is None else np.isin(np.arange(nj), jobs)
    usable = (thr > 0) & (pack.cell_type >= 0)[None, :] & movable[:, None]
    moves = 0
    while moves < max_moves:
        on = pack.col >= 0
        cur = np.where(on, pack.col, 0)
        cur_score = np.where(on, score[np.arange(nj), cur], 0.0)
        cur_gpus = np.where(on, pack.cell_gpus[cur], 0.0)
        cur_type = np.where(on, pack.cell_type[cur], -1)
        same = pack.cell_type[None, :] == cur_type[:, None]
        need = pack.cell_gpus[None, :] - np.where(same, cur_gpus[:, None], 0.0)
        room = pack.free[np.maximum(pack.cell_type, 0)][None, :]
        ok = usable & (need <= room + 1e-9)
        for host_need, host_free in pack.host:
            held = np.where(on, host_need[np.arange(nj), cur], 0.0)
            extra = host_need - np.where(same, held[:, None], 0.0)
            ok &= extra <= host_free[np.maximum(pack.cell_type, 0)][None, :] + 1e-9
        gain = score - cur_score[:, None]
        ok &= gain > 1e-12
        if allowed is not None:
            ok = allowed(pack.col, ok)
        if not ok.any():
            break
        added = pack.cell_gpus[None, :] - cur_gpus[:, None]
        slope = np.where(added > 0, gain / np.maximum(added, 1e-12), np.inf)
        key = np.where(ok, slope, -np.inf)
        best = key.max()
        cand = np.argwhere(key == best)
        j, c = max(cand.tolist(), key=lambda jc: (pack.cell_gpus[jc[1]], gain[jc[0], jc[1]]))
        pack.assign(int(j), int(c))
        moves += 1
    return moves
