"""Do no harm: what a move, a resize or a preemption of a running job gains, and what it costs, in job-seconds.

Issue 23 (measured on real Slurm): a flagship that priced every move at "3 s of restart" over a gain counted for
one round moved one job t4 -> v100 -> t4 -> v100 -> a100 in 8 rounds and finished it 4x later than plain Slurm.
Here every change to a running job is priced the way a site would:

- **gain**: completion time saved over the job's *expected remaining time* (not one round), plus the waiting
  time saved by the jobs it makes room for;
- **cost**: the full restart cost measured end to end (checkpoint, requeue, Slurm's start latency, the payload's
  start-up to its first reported step, Slurm's requeue delay when it may land on a node it just left), which
  every job involved waits;
- **hysteresis**: a job that was moved less than ``hold_s`` ago is charged for both moves (the one it had and the
  one proposed), so it is not moved back unless the gain pays for both.

A change goes ahead only when ``gain > factor x cost``; otherwise the job stays, which is what plain Slurm would
have done. Pure functions of numbers, shared by the mechanism (``reconfig.judge_move`` for every policy) and the
flagship's own guard (``policy.flagship_moves``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slurmplan.tick_types import TickConfig

PRIOR_FLOOR_S = TickConfig.round_s
"""Least expected remaining seconds of a job that told no step count: a round (see ``remaining_prior``)."""


def remaining_prior(
    steps_left: np.ndarray,
    rate: np.ndarray,
    known: np.ndarray,
    attained_s: np.ndarray,
    limit_left_s: np.ndarray | None = None,
    floor_s: float | np.ndarray = PRIOR_FLOOR_S,
) -> tuple[np.ndarray, list[str]]:
    """Per job: expected seconds left at ``rate`` (steps/s), and where the figure comes from.

    Steps known (hints or the launcher's reports): ``steps_left / rate``. Otherwise the time the job has already
    held GPUs, at least ``floor_s``: job lengths are heavy-tailed, so a job's expected remaining time grows with
    its age (the assumption of least-attained-service schedulers, Tiresias and Gavel's LAS, which also run without
    job sizes). A Slurm time limit only caps the figure: a limit is an upper bound users set generously (the
    replay's jobs all read "7.0 d left"), never an estimate on its own.

    ``floor_s`` may instead be, per job, the expected remaining time learned from the site's finished jobs
    (``mechanism.lengths.learned_prior``, issue 23): it then stands for the job's age-based prior.
    """
    rate = np.asarray(rate, dtype=float)
    by_steps = np.where(rate > 0, np.asarray(steps_left, float) / np.where(rate > 0, rate, 1.0), math.inf)
    learned = np.ndim(floor_s) > 0
    prior = np.asarray(floor_s, float) if learned else np.maximum(np.asarray(attained_s, float), floor_s)
    guess = "finished jobs" if learned else "run so far"
    known = np.asarray(known, bool)
    est = np.where(known, by_steps, prior)
    capped = np.zeros(est.shape, bool)
    if limit_left_s is not None:
        limit = np.asarray(limit_left_s, float)
        capped = ~known & np.isfinite(limit) & (limit < est)
        est = np.where(capped, limit, est)
    # read as Python lists: iterating the arrays would make a numpy scalar of each element (every job, every tick)
    pairs = zip(known.tolist(), capped.tolist(), strict=True)
    source = ["steps" if k else ("time limit" if c else guess) for k, c in pairs]
    return est, source


def hold_cost_s(cost_s: float, since_moved_s: float, hold_s: float) -> tuple[float, str]:
    """The cost to charge a new change of a job last moved ``since_moved_s`` ago: both moves within the hold."""
    if hold_s > 0 and since_moved_s < hold_s:
        return 2.0 * cost_s, f"moved {since_moved_s:.0f} s ago, within the {hold_s:.0f} s hold: pays for both moves"
    return cost_s, ""


@dataclass(frozen=True)
class MovePrice:
    """One change priced: seconds of completion time gained (all jobs involved) against its cost."""

    gain_s: float
    cost_s: float
    pays: bool
    detail: str


def price_change(
    remaining_s: float,
    thr_cur: float,
    thr_new: float,
    cost_s: float,
    others_gain_s: float = 0.0,
    own_delay_s: float = 0.0,
    factor: float = 1.0,
) -> MovePrice:
    """Whether changing a running job from ``thr_cur`` to ``thr_new`` samples/s (0: stopped) pays.

    The job's own gain is ``remaining x (1 - thr_cur / thr_new)``, negative for a shrink; a stopped job instead
    loses ``own_delay_s`` (until it runs again). ``others_gain_s`` is the waiting time saved by the jobs the change
    makes room for. It pays when the total gain exceeds ``factor x cost_s``; the restart costs the job ``cost_s``.
    """
    if not math.isfinite(remaining_s) or remaining_s <= 0:
        return MovePrice(0.0, cost_s, False, "no time left in which a restart could pay off")
    if thr_new > 0 and thr_cur > 0:
        own = remaining_s * (1.0 - thr_cur / thr_new)
    elif thr_new > 0:
        own = remaining_s  # its current configuration makes no progress
    else:
        own = -own_delay_s
    gain = own + others_gain_s
    pays = gain > factor * cost_s
    parts = [f"{_s(own)} for itself over its {_s(remaining_s)} left"]
    if others_gain_s:
        parts.append(f"{_s(others_gain_s)} of waiting for the jobs it makes room for")
    verb = "pays" if pays else "does not pay"
    return MovePrice(gain, cost_s, pays, f"gains {' and '.join(parts)}; {verb} the {_s(cost_s)} a restart costs")


def _s(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 120:
        return f"{sign}{seconds:.0f} s"
    if seconds < 7200:
        return f"{sign}{seconds / 60:.0f} min"
    return f"{sign}{seconds / 3600:.1f} h"
