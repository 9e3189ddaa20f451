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
