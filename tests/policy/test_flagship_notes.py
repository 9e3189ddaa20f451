"""The flagship's queue notes read as Python lists give the words the plain per-element loop gave.

``flagship_notes.queue_notes`` writes every job's note at each round; it reads its arrays as lists once and words
the wait bound once (issue 27, twenty-second session). The plain loop below is the code before that change; both
must give the same strings on every round of a busy real run (queue places, guaranteed jobs, jobs past their
stretch guard and jobs left out of the round), and again with every waiting job past its wait bound.
"""

from __future__ import annotations

from slurmplan.policy import flagship, flagship_notes
from slurmplan.policy.flagship_notes import _hm  # unchanged by the speed-up: the plain loop words times as it does
from tests.mechanism.helpers import crius_llm_simulation


def _plain_notes(problem, pack, rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch, params):
    out = []
    cap = params["max_wait_s"]
    unless = " unless past its stretch guard" if params["stretch_guard"] > 0 else ""
    for j in range(problem.num_jobs):
        if overdue[j]:
            why = f"first: waited {_hm(waited[j])}, over the {_hm(cap)} bound"
        elif urgent[j]:
            why = f"ahead to meet its deadline: {_hm(est[j])} left ({source[j]}), deadline first"
        elif floors[j] > 0:
            why = f"ahead as a guaranteed job; {_hm(est[j])} left ({source[j]})"
        else:
            why = f"queue place {rank[j] + 1}: {_hm(est[j])} left ({source[j]})"
        start = "" if pack.col[j] >= 0 else "; not this round"
        guard = ""
        if guarded[j] and not (overdue[j] or urgent[j] or floors[j] > 0):
            guard = (
                f"; ahead of the due order, fastest GPU first: it would finish {stretch[j]:.1f}x its time "
                f"alone, guard {params['stretch_guard']:.1f}x"
            )
        out.append(
            f"{why}; waited {_hm(waited[j])}, bound {_hm(cap)}; "
            f"no job submitted over {_hm(min(lead[j], cap))} after it can go ahead{unless}{guard}{start}"
        )
    return out


def test_queue_notes_equal_the_plain_loop_on_a_real_run(monkeypatch) -> None:
    seen = {"rounds": 0, "notes": 0, "guarded": 0, "guaranteed": 0, "left": 0}
    fast = flagship_notes.queue_notes

    def checked(problem, pack, rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch, params):
        args = (rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch, params)
        got = fast(problem, pack, *args)
        assert got == _plain_notes(problem, pack, *args)
        late = overdue | (pack.col < 0)  # every job left out past its bound: the other wording of each note
        late_args = (rank, est, source, lead, waited, late, floors, urgent, guarded, stretch, params)
        assert fast(problem, pack, *late_args) == _plain_notes(problem, pack, *late_args)
        seen["rounds"] += 1
        seen["notes"] += len(got)
        seen["guarded"] += sum("fastest GPU first" in n for n in got)
        seen["guaranteed"] += sum("guaranteed" in n for n in got)
        seen["left"] += sum(n.endswith("not this round") for n in got)
        return got

    monkeypatch.setattr(flagship, "queue_notes", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["rounds"] > 10 and seen["notes"] > 1000, seen
    assert seen["guarded"] > 0 and seen["guaranteed"] > 0 and seen["left"] > 0, seen
