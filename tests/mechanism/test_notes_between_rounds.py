"""Between rounds a kept job's detail is short and does not repeat the round's note (issue 23, seventeenth session).

The flagship writes a note per job at each round: why the round decided as it did. Before, a running job kept by the
round carried that detail to every tick until the next round, and ``decide`` appended the note again each tick
(details grew to 2,258 characters on ``decision_hash.py --days 0.5 --policy slurmplan``). Now the note is written on
the round's decision only; between rounds a kept row carries the round's own words without it. What ``explain``
shows (the journal's last decision: every row of a round, and only the changed ones between rounds) still holds the
round's note.
"""

from __future__ import annotations

from pathlib import Path

from slurmplan.control.journal import Journal
from slurmplan.domain import Reason
from slurmplan.mechanism import engine

from .helpers import crius_llm_simulation


def test_without_note_is_noted_inverse() -> None:
    note = "queue place 4: 6 min left"
    assert engine.without_note(engine._noted("lease renewed on a100x4", note), note) == "lease renewed on a100x4"
    assert engine.without_note("lease renewed on a100x4", note) == "lease renewed on a100x4"  # carried: unchanged
    assert engine.without_note("lease renewed", None) == "lease renewed"
    assert engine.without_note(note, note) == "as decided at the round"  # never an empty detail


def test_kept_detail_between_rounds_is_short_and_explain_keeps_the_note(tmp_path: Path) -> None:
    sim = crius_llm_simulation("slurmplan", hours=2.0)
    step = sim.step
    seen = {"between_kept": 0, "round_noted": 0}
    round_note: dict = {}  # job id -> its note at the last round
    journal = Journal(tmp_path / "journal.db")

    def checked_step():
        out = step()
        if out.new_round and out.allocation is not None and out.allocation.notes:
            round_note.clear()
            round_note.update(zip(out.allocation.job_ids, out.allocation.notes, strict=False))
        kept = [a for a in out.assignments if a.reason is Reason.KEPT]
        for a in kept:
            note = round_note.get(a.job_id)
            if out.new_round:
                if note:
                    assert a.detail.endswith(note)  # the round says why
                    seen["round_noted"] += 1
            else:
                assert len(a.detail) <= 300, a.detail  # the round's own words (the mechanism's), no note
                assert not note or note not in a.detail, a.detail
                seen["between_kept"] += 1
        rows = out.assignments if out.new_round else journal.decisions.changed(out.assignments)
        seen["ticks"] = seen.get("ticks", 0) + 1
        journal.decisions.record(seen["ticks"], out.state.round_index, 0.0, rows, None, False, "slurmplan")
        return out

    sim.step = checked_step  # type: ignore[method-assign]
    sim.run()
    assert seen["between_kept"] > 500 and seen["round_noted"] > 50
    # explain's rule for a job kept at the last round: the round's detail, note and all
    noted = [(j, n) for j, n in round_note.items() if n]
    last = {j: journal.decisions.of(j, limit=1) for j, _ in noted}
    hits = [j for j, n in noted if last[j] and last[j][-1]["reason"] == "kept" and last[j][-1]["detail"].endswith(n)]
    assert hits  # some job kept through the last round shows its round's note in the journal
    journal.close()
