"""``assign`` with the policy's notes gives what ``assign`` then ``with_policy_notes`` gave, on a real run's ticks.

The flagship writes a note for most jobs every tick. ``decide`` used to build every Assignment, then build it again
with the note appended (``with_policy_notes``); it now hands the notes to ``assign`` (``row_notes``), which writes
each detail once (issue 27). This runs the flagship on the first hours of a generated trace and, at every tick,
compares the two ways byte for byte (their ``repr``, which the decision hash covers), including the rows whose
detail is empty, unplaceable or preempted. Notes are handed over on a new round's tick only (issue 23, seventeenth
session: between rounds they were appended again to the detail carried from the tick before, every tick); the
comparison covers both kinds of tick.
"""

from __future__ import annotations

from slurmplan.mechanism import engine

from .helpers import crius_llm_simulation


def test_notes_written_by_assign_equal_notes_appended_afterwards(monkeypatch) -> None:
    seen = {"ticks": 0, "noted": 0, "rows": 0, "between": 0}
    last: dict = {}
    plain_assign, plain_row_notes = engine.assign, engine.row_notes

    def recording_row_notes(allocation, problem):
        last["allocation"], last["problem"] = allocation, problem
        return plain_row_notes(allocation, problem)

    def checked_assign(ctx, choice, placed, x, states, info, notes=None, settled=None, new_round=False):
        out = plain_assign(ctx, choice, placed, x, states, info, notes, settled, new_round)  # steady rows' fast path
        reference = plain_assign(ctx, choice, placed, x, states, info)
        if notes is not None:
            reference = engine.with_policy_notes(reference, last["allocation"], last["problem"])
            seen["rows"] += len(out)
            seen["noted"] += sum(1 for n in notes if n)
        assert repr(out) == repr(reference)
        seen["ticks"] += 1
        seen["between"] += not new_round
        return out

    monkeypatch.setattr(engine, "row_notes", recording_row_notes)
    monkeypatch.setattr(engine, "assign", checked_assign)
    crius_llm_simulation("slurmplan").run()
    assert seen["ticks"] > 50 and seen["between"] > 25
    assert seen["noted"] > seen["rows"] // 4  # the flagship wrote notes: the comparison covered them


def test_row_notes_is_none_without_notes_and_follows_the_problems_rows() -> None:
    class _Alloc:
        job_ids = (3, 1)
        notes = ("three", "")

    class _Problem:
        job_ids = (1, 2, 3)

    assert engine.row_notes(None, _Problem()) is None
    assert engine.row_notes(_Alloc(), _Problem()) == ["", None, "three"]
    assert engine._noted("kept", "three") == "kept; three"
    assert engine._noted("", "three") == "three"
    assert engine._noted("kept", "") == "kept" and engine._noted("kept", None) == "kept"
