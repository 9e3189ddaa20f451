"""``engine.running_info`` with its move horizons and times since the last move computed on demand
(``round.RowsOnDemand``) gives what the plain, eager code gave, on every tick of real runs.

Only ``greedy`` reads those two, for a running job whose best pair is a move; every tick built them for every row
before (issue 27, twenty-second session). The reference below is the plain code as it was. Each tick's lazy values
are read after the whole tick has run (the next tick's call, and the end of the run), so a value computed late from
something the tick changed meanwhile would differ from the reference taken when ``running_info`` was called.
"""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.mechanism import engine
from slurmplan.mechanism.pricing import remaining_prior
from slurmplan.mechanism.reconfig import horizons
from slurmplan.mechanism.round import RowsOnDemand

from .helpers import crius_llm_simulation


def _plain_horizon_since(ctx, states, config, now):
    """``running_info``'s horizon and since-moved arrays as it computed them before (every row, every tick)."""
    p = ctx.problem
    n = p.num_jobs
    current = np.asarray(p.current, dtype=np.int64) if p.current is not None else np.full(n, -1)
    thr = p.throughput[np.arange(n), np.maximum(current, 0)] if p.cells else np.zeros(n)
    remaining, _ = remaining_prior(
        p.column("steps_remaining"), thr, ctx.steps_known, p.column("attained_time"), p.time_limit_left, config.round_s
    )
    moved = [states[j].moved_at for j in p.job_ids]
    since = np.array([np.inf if t is None else now - t for t in moved], dtype=float)
    return horizons(config.round_s, remaining), since


@pytest.mark.parametrize("policy", ["las", "slurmplan"])
def test_running_info_equals_the_plain_code_on_every_tick(policy: str, monkeypatch) -> None:
    seen = {"ticks": 0, "read": 0, "moved": 0}
    pending: list[tuple] = []
    lazy_info = engine.running_info

    def compare(info, want_horizon, want_since) -> None:
        read = info.horizon._rows is not None  # type: ignore[union-attr]
        seen["read"] += read
        assert np.array_equal(np.asarray(info.horizon), want_horizon)
        assert np.array_equal(np.asarray(info.since_moved), want_since)
        seen["moved"] += int(np.isfinite(want_since).sum())

    def checked(ctx, states, config, now=0.0):
        while pending:  # the previous tick's values, read after that tick ran to its end
            compare(*pending.pop())
        info = lazy_info(ctx, states, config, now)
        assert isinstance(info.horizon, RowsOnDemand) and isinstance(info.since_moved, RowsOnDemand)
        pending.append((info, *_plain_horizon_since(ctx, states, config, now)))
        seen["ticks"] += 1
        return info

    monkeypatch.setattr(engine, "running_info", checked)
    crius_llm_simulation(policy).run()
    while pending:
        compare(*pending.pop())
    assert seen["ticks"] > 50
    assert seen["read"] > 0  # ``greedy`` asked for a horizon on some ticks: the values it decided by were compared
    assert seen["moved"] > 0  # rows moved before: the since-moved values were not all infinite


def test_rows_on_demand_computes_once() -> None:
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.array([1.0, 2.0])

    rows = RowsOnDemand(compute)
    assert not calls
    assert rows[1] == 2.0 and rows[0] == 1.0 and len(rows) == 2
    assert np.asarray(rows).tolist() == [1.0, 2.0]
    assert len(calls) == 1
