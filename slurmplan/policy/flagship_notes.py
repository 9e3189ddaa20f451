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
    """One admin-readable line per job: why it is where it is in the queue, and its wait bound."""
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
