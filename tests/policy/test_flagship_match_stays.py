"""The flagship's matching skips its LP where every chosen job's only variable is its own column, and that
changes nothing: the same packing as solving the LP and re-placing (``flagship_match._stays``, issue 27).

Every ``match_types`` call of a real run (the Crius cluster at 60 arrivals an hour, seed 12) is made twice on
copies of the same packing, with the shortcut and with it turned off (the LP solved and its answer re-placed); both
packings must be equal, the shortcut must have been taken on some rounds and not on others, and where it was taken
the LP with random values must answer all ones (or nothing). The chosen jobs released at once (``_released``) are
compared with releasing them one by one on the same calls.
"""

from __future__ import annotations

import numpy as np

from slurmplan.policy import flagship, flagship_match
from tests.mechanism.helpers import crius_llm_simulation


def _released_as_one_by_one(pack, rng: np.random.Generator) -> None:
    """``flagship_match._released`` (the chosen jobs released as arrays) against ``Packing.release`` job by job,
    on the run's packing and on it with made-up host limits in fractions (where the order of the sums shows)."""
    chosen = np.flatnonzero(pack.col >= 0)
    with_host = pack.copy()
    shape = (pack.col.size, pack.cell_gpus.size)
    with_host.host = [(rng.uniform(0.1, 7.7, shape), rng.uniform(0.0, 99.9, pack.free.size)) for _ in range(2)]
    for start in (pack, with_host):
        got, want = flagship_match._released(start, chosen), start.copy()
        for j in chosen.tolist():
            want.release(j)
        np.testing.assert_array_equal(got.col, want.col)
        assert got.free.tobytes() == want.free.tobytes()
        assert all(a.tobytes() == b.tobytes() for (_, a), (_, b) in zip(got.host, want.host, strict=True))


def test_skipping_the_lp_where_every_job_stays_changes_nothing(monkeypatch) -> None:
    seen = {"calls": 0, "stayed": 0, "solved": 0}
    match, stays = flagship_match.match_types, flagship_match._stays

    rng = np.random.default_rng(12)

    def counted(pack, chosen, rows, cols):
        out = stays(pack, chosen, rows, cols)
        seen["stayed" if out else "solved"] += 1
        if out:  # the LP's only answer is all ones, whatever the values
            x = flagship_match.transport(rows, cols, rng.uniform(0.1, 3.0, rows.size), pack, chosen)
            assert x is None or np.allclose(x, 1.0, rtol=0.0, atol=1e-7)
        return out

    def checked(problem, pack, *args):
        _released_as_one_by_one(pack, rng)
        plain = pack.copy()
        monkeypatch.setattr(flagship_match, "_stays", lambda *a: False)
        match(problem, plain, *args)
        monkeypatch.setattr(flagship_match, "_stays", counted)
        match(problem, pack, *args)
        np.testing.assert_array_equal(pack.col, plain.col)
        assert pack.free.tobytes() == plain.free.tobytes()
        seen["calls"] += 1

    monkeypatch.setattr(flagship, "match_types", checked)
    crius_llm_simulation("slurmplan", seed=12).run()  # a seed with rounds where every job stays
    assert seen["stayed"] > 5 and seen["solved"] > 100, seen
