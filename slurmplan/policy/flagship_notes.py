"""The flagship's words: one admin-readable line per job (``slurmplan explain``), why it is where it is."""

from __future__ import annotations

import math


def _hm(seconds: float) -> str:
    """Seconds as an admin reads them: '40 min', '2.5 h', '3 d'."""
    if not math.isfinite(seconds):
        return "unbounded"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def queue_notes(
    problem, pack, rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch, params: dict
) -> list[str]:
    """One admin-readable line per job: why it is where it is in the queue, and its wait bound.

    Every job's note is written at each round (the mechanism puts it in the round's details), so this reads the
    arrays as Python lists once and words the bound once (issue 27, twenty-second session: 4 ``_hm`` calls and a
    dozen numpy element reads a job a round); ``tests/policy/test_flagship_notes.py`` compares it with the plain
    loop."""
    out = []
    cap = params["max_wait_s"]
    bound = _hm(cap)
    unless = " unless past its stretch guard" if params["stretch_guard"] > 0 else ""
    placed = (pack.col >= 0).tolist()
    est, source, lead, waited = _list(est), _list(source), _list(lead), _list(waited)
    rank, stretch, floors = _list(rank), _list(stretch), _list(floors)
    overdue, urgent, guarded = _list(overdue), _list(urgent), _list(guarded)
    ratio = f"{params['stretch_guard']:.1f}"
    for j in range(problem.num_jobs):
        wait = _hm(waited[j])
        if overdue[j]:
            why = f"first: waited {wait}, over the {bound} bound"
        elif urgent[j]:
            why = f"ahead to meet its deadline: {_hm(est[j])} left ({source[j]}), deadline first"
        elif floors[j] > 0:
            why = f"ahead as a guaranteed job; {_hm(est[j])} left ({source[j]})"
        else:
            why = f"queue place {rank[j] + 1}: {_hm(est[j])} left ({source[j]})"
        start = "" if placed[j] else "; not this round"
        guard = ""
        if guarded[j] and not (overdue[j] or urgent[j] or floors[j] > 0):
            guard = (
                f"; ahead of the due order, fastest GPU first: it would finish {stretch[j]:.1f}x its time "
                f"alone, guard {ratio}x"
            )
        out.append(
            f"{why}; waited {wait}, bound {bound}; "
            f"no job submitted over {_hm(min(lead[j], cap))} after it can go ahead{unless}{guard}{start}"
        )
    return out


def _list(values) -> list:
    """An array's elements as Python values (a list or tuple as it is): the loop reads each several times."""
    return values.tolist() if hasattr(values, "tolist") else list(values)
