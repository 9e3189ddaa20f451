"""The problem's columns and throughput matrix: the distinct Cells over all jobs' candidates, one row per job.

Split from ``problem.py``. Everything here is a pure memo over values that stay the same objects from tick to tick
(a job's candidates tuple, its row, the column order), so that a tick pays only for the jobs that came and went;
decisions do not depend on any of it (``tests/sim/test_sim_same_decisions.py`` forgets every memo each tick).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import is_

import numpy as np

from slurmplan.domain import Candidate, Cell
from slurmplan.tick_types import ManagedJob

CellKey = tuple[str, int, int]


@dataclass(frozen=True, eq=False)
class _Row:
    """One job's best candidate per Cell: keys, candidates (an object array) and their throughputs."""

    keys: tuple[CellKey, ...]
    candidates: np.ndarray
    throughput: np.ndarray
    plan_batch: float = 1.0
    """The global batch of the first candidate with a plan (1 without one): ``_unit_per_step``, every tick."""


class _RowMemo:
    """Each job's ``_Row``, remembered by the identity of the job's candidates tuple.

    Candidates are computed once per job and handed over unchanged tick after tick (the daemon's and the
    simulator's caches), while 2,000 jobs x 20 candidates would otherwise be re-keyed every tick. Keyed by
    ``id`` with the tuple itself kept alive, so a hit is always the same object: a pure memo, decisions do not
    depend on it.
    """

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._rows: dict[int, tuple[tuple[Candidate, ...], _Row]] = {}
        self.hits = self._rows.get
        """The memo's lookup by ``id(candidates)``: a hit is ``(candidates, row)``, valid when it holds the very
        tuple asked about (``_build_matrix`` reads hits in place)."""

    def __call__(self, candidates: tuple[Candidate, ...]) -> _Row:
        hit = self._rows.get(id(candidates))
        if hit is not None and hit[0] is candidates:
            return hit[1]
        best: dict[CellKey, Candidate] = {}
        for cand in candidates:
            key = (cand.cell.gpu_type, cand.cell.gpus, cand.cell.stages)
            old = best.get(key)
            if old is None or cand.throughput > old.throughput:
                best[key] = cand
        cands = np.empty(len(best), dtype=object)
        cands[:] = list(best.values())
        thr = np.array([max(c.throughput, 0.0) for c in best.values()], dtype=float)
        row = _Row(tuple(best), cands, thr, _plan_batch(candidates))
        if len(self._rows) >= self.limit:
            self._rows.clear()
        self._rows[id(candidates)] = (candidates, row)
        return row


row_of = _RowMemo()


def matrix(rows: list[ManagedJob]) -> tuple[tuple[Cell, ...], np.ndarray, tuple[tuple[Candidate | None, ...], ...]]:
    """Columns (sorted Cells), the throughput matrix and the candidate behind each entry (best if repeated).

    Cells are keyed by plain tuples: hashing and comparing the dataclass itself costs several times more.
    """
    keys = tuple([tuple(mj.candidates) for mj in rows])  # a list first: no generator step per row
    last = _last_matrix.value  # read once: another thread may replace it, never change it
    if last is not None and len(last[0]) == len(keys) and all(map(is_, last[0], keys)):  # compared in C
        cells, throughput, table = last[1]  # same jobs with the same candidates as the previous tick
        return cells, throughput.copy(), table
    out = _build_matrix(keys)
    _last_matrix.value = (keys, out)
    return out[0], out[1].copy(), out[2]


class _LastMatrix:
    """``(candidates per row, result)`` of the previous ``matrix`` call: many ticks see the same jobs.

    A pure memo: a hit needs every row's candidates to be the very same objects, and the throughput matrix is
    handed out as a copy (policies may write to their problem's arrays).
    """

    value: tuple | None = None


_last_matrix = _LastMatrix()


def _build_matrix(
    keys: tuple[tuple[Candidate, ...], ...],
) -> tuple[tuple[Cell, ...], np.ndarray, tuple[tuple[Candidate | None, ...], ...]]:
    """The body of ``matrix`` for one row of candidates per job. The two memos' hits (``row_of``, ``line``) are read
    in place, as those calls read them: every row, on most ticks (issue 27, twenty-second session)."""
    rows_hit = row_of.hits
    lines = []
    for k in keys:
        hit = rows_hit(id(k))
        lines.append(hit[1] if hit is not None and hit[0] is k else row_of(k))
    dense = _dense.value  # read once: another thread may replace it, never change it
    order = _columns(lines)
    if dense is None or dense.order != order:
        dense = _DenseRows(order)
        _dense.value = dense
    spread = []
    lines_hit = dense.rows.get
    for r in lines:
        hit = lines_hit(id(r))
        spread.append((hit[1], hit[2]) if hit is not None and hit[0] is r else dense.line(r))
    throughput = np.array([t for t, _ in spread]) if spread else np.zeros((0, len(order)))
    return dense.cells, throughput.reshape(len(keys), len(order)), tuple(c for _, c in spread)


class _Columns:
    """The previous ``_columns`` call: its rows by identity, how many of them have each key, and the sorted keys.

    A pure memo (a new value per call that changed the rows, never changed in place): jobs come and go a few at a
    time, so the union of ~100 rows' ~40 keys each, every tick, becomes the keys of the rows that came and went.
    """

    value: tuple[dict[int, _Row], dict[CellKey, int], tuple[CellKey, ...]] = ({}, {}, ())


_last_columns = _Columns()


def _columns(lines: list[_Row]) -> tuple[CellKey, ...]:
    """``tuple(sorted(union of the rows' keys))``, from the previous call's by the rows that came and went."""
    before, count, order = _last_columns.value  # read once: another thread may replace it, never change it
    now = dict(zip(map(id, lines), lines, strict=True))  # holds the rows: an id stays theirs while either dict lives
    if now.keys() == before.keys():
        return order
    count = dict(count)
    changed = False
    for i in before.keys() - now.keys():
        for k in before[i].keys:
            left = count[k] - 1
            if left:
                count[k] = left
            else:
                del count[k]
                changed = True
    for i in now.keys() - before.keys():
        for k in now[i].keys:
            seen = count.get(k, 0)
            count[k] = seen + 1
            changed = changed or not seen
    order = tuple(sorted(count)) if changed else order
    _last_columns.value = (now, count, order)
    return order


class _DenseRows:
    """Each job's row spread over one column order: its throughputs and its candidate per column (None if none).

    Jobs come and go between ticks while the columns (the distinct Cells over all jobs) mostly stay: a job's row
    over the same columns is the same, so it is spread once, not every tick. A pure memo keyed by the identity
    of the job's ``_Row`` (kept alive with it) and built afresh when the columns change.
    """

    def __init__(self, order: tuple[CellKey, ...], limit: int = 50_000) -> None:
        self.order = order
        self.cells = tuple(canonical_cell(k) for k in order)
        self.col = {k: i for i, k in enumerate(order)}
        self.limit = limit
        self.rows: dict[int, tuple[_Row, np.ndarray, tuple[Candidate | None, ...]]] = {}

    def line(self, r: _Row) -> tuple[np.ndarray, tuple[Candidate | None, ...]]:
        hit = self.rows.get(id(r))
        if hit is not None and hit[0] is r:
            return hit[1], hit[2]
        cols = [self.col[k] for k in r.keys]
        thr = np.zeros(len(self.order))
        thr[cols] = r.throughput
        cands: list[Candidate | None] = [None] * len(self.order)
        for c, cand in zip(cols, r.candidates.tolist(), strict=True):
            cands[c] = cand
        if len(self.rows) >= self.limit:
            self.rows.clear()
        out = (r, thr, tuple(cands))
        self.rows[id(r)] = out
        return out[1], out[2]


_CELLS: dict[CellKey, Cell] = {}
"""One Cell object per key, for every column order (``canonical_cell``); a few hundred keys at most, bounded."""


def canonical_cell(key: CellKey) -> Cell:
    """The one Cell object of ``key`` that every column order uses.

    The jobs' states keep the Cells they ran in from tick to tick (their current assignment, and the keys of their
    per-Cell attained and epoch seconds). Were a new column order to build new Cells, every later lookup of an old
    key would hash the new object and then compare the two with the dataclass's ``__eq__`` (a Python call), every
    running job, every tick, for the rest of the run (issue 27: ~460,000 such calls on ``bench_sim --days 1``).
    One object per key keeps those lookups to an identity check, and ``column_ids`` finds them by id. Cells are
    frozen and equal by value, so which equal object a state holds decides nothing."""
    cell = _CELLS.get(key)
    if cell is None:
        if len(_CELLS) > 10_000:
            _CELLS.clear()
        cell = _CELLS.setdefault(key, Cell(*key))
    return cell


class _Dense:
    value: _DenseRows | None = None


_dense = _Dense()


def _plan_batch(candidates: tuple[Candidate, ...]) -> float:
    plan = next((c.plan for c in candidates if c.plan is not None), None)
    return float(plan.global_batch) if plan is not None and plan.global_batch else 1.0
