"""Every column order uses one Cell object per key, so the Cells a job's state keeps stay the columns' own.

Before (issue 27), a new column order (a job with a Cell no other job had came or went) built new Cell objects; the
running jobs' states kept the old ones as their current Cell and as the keys of their per-Cell seconds, so every
later tick hashed and compared (a dataclass ``__eq__``, a Python call) each of those lookups: ~460,000 calls on
``bench_sim --days 1``. This pins the one-object rule, and counts the comparisons on a real run's ticks.
"""

from __future__ import annotations

from slurmplan.domain import Cell
from slurmplan.mechanism import columns

from .helpers import crius_llm_simulation, mjob


def test_a_new_column_order_keeps_the_cells_it_shares_with_the_old_one() -> None:
    a, b = mjob(1, {"a100": {4: 2.0}, "v100": {2: 1.0}}), mjob(2, {"h100": {8: 5.0}, "a100": {4: 2.0}})
    first, _, _ = columns.matrix([a])
    second, _, _ = columns.matrix([a, b])
    assert second != first and len(second) == 3
    for cell in first:
        assert next(c for c in second if c == cell) is cell  # the same object, not an equal one
    assert columns.canonical_cell(("a100", 4, 1)) is next(c for c in second if c == Cell("a100", 4))
    again, _, _ = columns.matrix([b])
    assert all(c is columns.canonical_cell((c.gpu_type, c.gpus, c.stages)) for c in again)


def test_a_real_run_compares_almost_no_cells(monkeypatch) -> None:
    calls = {"eq": 0}
    plain = Cell.__eq__

    def counting(self, other):
        calls["eq"] += 1
        return plain(self, other)

    monkeypatch.setattr(Cell, "__eq__", counting)
    sim = crius_llm_simulation("las")
    result = sim.run()
    running_rows = sum(len(s.attained_by_cell) for s in sim.state.jobs.values())
    assert result.ticks > 50 and running_rows > 0
    assert calls["eq"] < 5 * result.ticks  # was ~125 a tick here (27,604 in 222 ticks)
