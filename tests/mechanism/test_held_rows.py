"""``actions._hold``'s memo of held jobs' comments gives what the plain code gives, on every call of a real run.

A waiting job slurmplan has not chosen asks ``_hold`` every tick; once it is held and its comment holds no running
decision, nothing is sent and nothing recorded, so the next tick asked again, parsing the same comment (issue 27:
164,000 times on the flagship's busy site day). ``_held_as_written`` remembers the comment (by identity) found to
need nothing. This runs the flagship on a busy hour and a half (1,500 arrivals an hour on the Crius cluster) and, at
every call, compares the answer with the memo against the answer with the memo emptied (``repr`` of the actions and
of the state). Every fifth advance an "admin" writes a running decision into the even-numbered held jobs' comments,
so that held jobs whose comment must be marked held again are among the calls compared; a memo that ignores the
comment, or answers for a job Slurm no longer holds, fails here.
"""

from __future__ import annotations

from slurmplan import formats
from slurmplan.domain import ActionKind, Cell
from slurmplan.domain import JobState as SlurmState
from slurmplan.mechanism import actions

from .helpers import crius_llm_simulation

_RUNNING_DECISION = formats.with_decision("", formats.decision_text(Cell("a100", 4), None, 1))


def test_held_rows_equal_the_plain_path_on_every_call(monkeypatch) -> None:
    seen = {"calls": 0, "remembered": 0, "annotated": 0, "held": 0}
    plain = actions._hold

    def checked_hold(job, a, st, stamp):
        remembered = job.held and actions._held_as_written.get(job.job_id, actions._NO_COMMENT) is job.admin_comment
        memo = dict(actions._held_as_written)
        actions._held_as_written.clear()
        want = plain(job, a, st, stamp)  # with nothing remembered
        actions._held_as_written.clear()
        actions._held_as_written.update(memo)
        got = plain(job, a, st, stamp)
        assert repr(got[0]) == repr(want[0])
        assert repr(got[1]) == repr(want[1])
        seen["calls"] += 1
        seen["remembered"] += remembered
        seen["annotated"] += any(act.kind is ActionKind.ANNOTATE for act in got[0])
        seen["held"] += any(act.kind is ActionKind.HOLD for act in got[0])
        return got

    monkeypatch.setattr(actions, "_hold", checked_hold)
    sim = crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=1500.0, hours=1.5)
    advance, steps = sim.backend.advance, [0]

    def advance_then_overwrite(t: float):
        done = advance(t)
        steps[0] += 1
        if steps[0] % 5 == 0:
            for job in sim.backend.jobs.values():
                if job.state is SlurmState.PENDING and job.held and job.job_id % 2 == 0:
                    job.admin_comment, job.cached = _RUNNING_DECISION, None
        return done

    monkeypatch.setattr(sim.backend, "advance", advance_then_overwrite)
    sim.run()
    assert seen["calls"] > 2_000
    assert seen["remembered"] > seen["calls"] // 3  # the memo answered many calls (admins overwrite the rest)
    assert seen["annotated"] > 20  # held jobs whose comment an admin overwrote were marked held again


def test_a_remembered_comment_answers_only_for_a_held_job() -> None:
    """A job Slurm no longer holds (an admin released it) is held again although its comment is remembered."""
    from dataclasses import replace

    from slurmplan.domain import Assignment, Job, Reason
    from slurmplan.tick_types import JobState

    job = Job(job_id=91, name="j", state=SlurmState.PENDING, held=True, admin_comment="")
    a = Assignment(91, Reason.WAITING, detail="outranked")
    acts, _ = actions._hold(job, a, JobState(), actions.RoundStamp(3))
    assert acts == [] and actions._held_as_written.get(91, actions._NO_COMMENT) is job.admin_comment
    acts, st = actions._hold(replace(job, held=False), a, JobState(), actions.RoundStamp(4))
    assert [act.kind for act in acts] == [ActionKind.HOLD] and st.sent == "hold round 4"
