"""What finished jobs' run lengths say about how long a running job still has: the expected remaining time.

Issue 23, eleventh session. A job that told no step count was expected to run as long again as it has run (least
attained service, ``pricing.remaining_prior``): the bet of Tiresias and Gavel's LAS that job lengths are
heavy-tailed. It wins on LLM and Gavel traces and loses where lengths are not heavy-tailed: on the unseen
replay-like traces (log-uniform 6-70 min) the flagship stopped jobs 20-40 min in for newcomers expected to run
6 min, which then ran 30, and lost up to 1.2x to plain Slurm.

Here the bet is read from the site's own jobs instead. From the run lengths (seconds holding GPUs) of the jobs
that finished, and the time the jobs still in the queue have run so far (censored: they ran at least that long),
a Kaplan-Meier estimate of the length distribution gives each job's mean residual life: the expected remaining
time of a job of its age. On decreasing hazard rates (heavy tails) it grows with age, so the ordering stays
least-attained-service; on increasing ones it falls with age, so a job that has run long is expected to end
soon and keeps its GPUs (first come, first served), as a Gittins index would order them.

Beyond the longest observed run nothing is known: there, and with too few finished jobs, the old prior stands
(as long again as it has run). Pure functions of numbers: the tick keeps the finished lengths in its state
(``SchedulerState.finished_lengths``), journaled by the daemon, so cron, a restarted daemon and the simulator
decide alike.
"""

from __future__ import annotations

import numpy as np

KEEP_FINISHED = 500
"""How many of the newest finished run lengths the tick remembers (the estimate follows the site's recent jobs)."""

SUPPORT = 5
"""Least finished runs longer than a job's age for the estimate to speak for it; an older job keeps the old prior.
Early in an overloaded queue the jobs that finished are the short ones, and a few of them say little about the
tail that the long-running jobs are in."""


def survival(finished: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan-Meier: the distinct finished lengths ``t`` (sorted) and ``S(t)`` just after each (P(length > t))."""
    finished = np.sort(np.asarray(finished, dtype=float))
    censored = np.sort(np.asarray(censored, dtype=float))
    times, deaths = np.unique(finished, return_counts=True)
    # at risk at t: every run that lasted at least t, finished or still going
    at_risk = (finished.size - np.searchsorted(finished, times, side="left")) + (
        censored.size - np.searchsorted(censored, times, side="left")
    )
    return times, np.cumprod(1.0 - deaths / np.maximum(at_risk, 1))


def _curve(finished: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """S as a step function on [0, last]: knots 0, t_1, ..., t_k, last; value S_i on [knot_i, knot_i+1); the
    integral of S from 0 to each knot; and the area past ``last``, taken as ``S(last) x last`` (the runs still
    going are expected to run as long again: the least-attained-service prior). None without finished runs."""
    times, surv = survival(finished, censored)
    if times.size == 0:
        return None
    last = max(float(times[-1]), float(np.max(censored, initial=0.0)))
    knots = np.concatenate(([0.0], times, [last]))
    values = np.concatenate(([1.0], surv))
    area = np.concatenate(([0.0], np.cumsum(values * np.diff(knots))))
    return knots, values, area, float(values[-1] * last)


def _at(curve: tuple, ages: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per age (clipped to the curve): S(age), the integral of S from 0 to it, and whether anything is known past
    it (an age at or beyond the longest run observed is not)."""
    knots, values, area, _ = curve
    a = np.clip(ages, 0.0, knots[-1])
    i = np.clip(np.searchsorted(knots, a, side="right") - 1, 0, values.size - 1)
    return values[i], area[i] + values[i] * (a - knots[i]), (ages < knots[-1]) & (values[i] > 0)


def mean_residual_s(
    finished: np.ndarray, censored: np.ndarray, ages: np.ndarray, fallback: np.ndarray, support: int = 1
) -> np.ndarray:
    """Per age: E[length - age | length > age] under the Kaplan-Meier estimate (the expected remaining time, what
    a move or a stop is priced over); ``fallback`` (per age) where fewer than ``support`` finished runs were longer
    than the age (nothing, or too little, is known past it)."""
    ages = np.asarray(ages, dtype=float)
    curve = _curve(finished, censored)
    if curve is None:
        return np.asarray(fallback, dtype=float)
    s_at, a_at, known = _at(curve, ages)
    done = np.sort(np.asarray(finished, dtype=float))
    known &= done.size - np.searchsorted(done, ages, side="right") >= support
    with np.errstate(divide="ignore", invalid="ignore"):
        mrl = (curve[2][-1] - a_at + curve[3]) / s_at
    return np.where(known & np.isfinite(mrl), mrl, np.asarray(fallback, dtype=float))


def gittins_remaining_s(
    finished: np.ndarray,
    censored: np.ndarray,
    ages: np.ndarray,
    fallback: np.ndarray,
    quantum_s: float,
    support: int = 1,
) -> np.ndarray:
    """Per age: the Gittins index in seconds, ``min over quanta D of E[min(L - a, D) | L > a] / P(L - a <= D |
    L > a)``: the expected service per job completed of the best quantum to serve it next. D ranges over the
    finished lengths at least ``quantum_s`` past the age (the scheduler re-decides once a round, and shorter quanta
    read noise from single finished runs) and no limit (the mean residual). Ordering by it minimises the mean
    completion time on one server when lengths are unknown but their distribution is (Gittins; Aalto et al.). It
    is least attained service on decreasing hazard rates and first come first served on increasing ones; unlike
    the mean residual it still lets newcomers go first where many jobs are short and a few very long."""
    ages = np.asarray(ages, dtype=float)
    mrl = mean_residual_s(finished, censored, ages, np.full(ages.shape, np.nan), support)
    curve = _curve(finished, censored)
    if curve is None:
        return np.asarray(fallback, dtype=float)
    knots, values, area, _ = curve
    s_at, a_at, _ = _at(curve, ages)
    ends, s_end, area_end = knots[1:-1], values[1:], area[1:-1]  # each finished length t_k and S just after it
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (area_end[None, :] - a_at[:, None]) / (s_at[:, None] - s_end[None, :])
    ratio = np.where((ends[None, :] >= ages[:, None] + quantum_s) & (s_at[:, None] > s_end[None, :]), ratio, np.inf)
    index = np.minimum(mrl, ratio.min(axis=1, initial=np.inf))
    return np.where(np.isnan(mrl), np.asarray(fallback, dtype=float), index)


def learned_prior(
    finished: np.ndarray | None, attained: np.ndarray, floor_s: float, min_finished: int, index: bool = False
) -> np.ndarray | None:
    """Per job: the expected remaining seconds of a job of its age (``mean_residual_s``), or with ``index`` its
    Gittins index in seconds (``gittins_remaining_s``), censored by the attained time of every job that has run;
    None when fewer than ``min_finished`` jobs have finished (or ``min_finished`` is 0: off), which keeps the old
    prior: as long again as it has run, at least ``floor_s`` (also the fallback past the longest run seen, and the
    index's shortest quantum)."""
    if min_finished <= 0 or finished is None or len(finished) < min_finished:
        return None
    attained = np.asarray(attained, dtype=float)
    fallback = np.maximum(attained, floor_s)
    finished, censored = np.asarray(finished, float), attained[attained > 0]
    if index:
        return gittins_remaining_s(finished, censored, attained, fallback, floor_s, SUPPORT)
    return mean_residual_s(finished, censored, attained, fallback, SUPPORT)


def remember_finished(kept: tuple[float, ...], left: list[float]) -> tuple[float, ...]:
    """The finished lengths to keep: ``kept`` then the runs of jobs that just left, the newest ``KEEP_FINISHED``."""
    if not left:
        return kept
    return (tuple(kept) + tuple(float(x) for x in left))[-KEEP_FINISHED:]
