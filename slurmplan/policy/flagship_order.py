"""The flagship's ordering step: who goes first, by due time, deadlines, SLAs, the wait bound and the stretch guard.

Due time (issue 17): ``submit + length_weight x expected remaining``; a deadline that can still be met pulls it
forward to the job's latest start (EDF). Expected remaining (issue 23): ``steps left / fastest throughput`` when
the job told its steps (hints, or the launcher's reports on the daemon), else the time it has already held GPUs,
at least ``prior_floor_s`` (``mechanism.pricing.remaining_prior``): never the Slurm time limit alone, which made
every job read "7.0 d left (time limit)" on real Slurm. Jobs that told nothing are therefore served in submission
order while they wait (FIFO, as plain Slurm), and a long-running one is no longer protected by a short estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmplan.domain import AllocationProblem, JobClass
from slurmplan.mechanism import lengths
from slurmplan.mechanism.pricing import PRIOR_FLOOR_S, remaining_prior


def sla_floors(problem: AllocationProblem) -> np.ndarray:
    """Throughput floors of guaranteed jobs (0 for best-effort jobs or when no SLA is given)."""
    sla = problem.column("sla_throughput")
    if problem.job_class is None:  # no class given: nobody is guaranteed
        return np.zeros(problem.num_jobs)
    guaranteed = np.array([c is JobClass.GUARANTEED for c in problem.job_class])
    return np.where(guaranteed, sla, 0.0)


def known_steps(problem: AllocationProblem) -> np.ndarray:
    n = problem.num_jobs
    return np.ones(n, bool) if problem.steps_known is None else np.asarray(problem.steps_known, bool)


def expected_remaining_s(
    problem: AllocationProblem, floor_s: float | np.ndarray = PRIOR_FLOOR_S
) -> tuple[np.ndarray, list[str]]:
    """Per job: expected seconds left on its fastest column, and where that figure comes from (for the note).
    ``floor_s``: the prior's floor, or per job the prior learned from finished jobs (``learned_prior``)."""
    best = np.asarray(problem.throughput, dtype=float).max(axis=1, initial=0.0)
    return remaining_prior(
        problem.column("steps_remaining"), best, known_steps(problem), problem.column("attained_time"),
        problem.time_limit_left, floor_s,
    )  # fmt: skip


def account_scale(problem: AllocationProblem) -> np.ndarray:
    """Per job: its account's weight over the mean weight of the accounts with jobs in this problem (1 without
    weights, or with one account).

    The weights are the site's fairshare (the association tree's shares x 2^(-usage/shares), read from slurmctld
    each round, ``control/site_accounting.py``) or the daemon config's ``account_weights``. The due time divides a
    job's expected remaining work by this, so the jobs of an account that used more than its share are due later
    and those of one that used less sooner, as Slurm's own fairshare factor would order them. An account without
    a weight counts the mean; the scale is clipped to [1/8, 8] (the wait bound ``max_wait_s`` holds for all)."""
    n = problem.num_jobs
    weights, accounts = problem.account_weights, problem.accounts
    if not weights or accounts is None:
        return np.ones(n)
    known = [float(w) for w in weights.values() if float(w) > 0]
    default = sum(known) / len(known) if known else 1.0
    per_account = {a: max(float(weights.get(a, default)), 1e-12) for a in set(accounts)}
    mean = sum(per_account.values()) / len(per_account)
    return np.clip(np.array([per_account[a] / mean for a in accounts]), 1 / 8, 8.0)


@dataclass(frozen=True, eq=False)
class Queue:
    """The ordering step's result, per job: due time, waited seconds, urgency flags, and the order itself."""

    due: np.ndarray
    waited: np.ndarray
    urgent: np.ndarray
    """A deadline that can still be met set the due time (its latest start)."""
    overdue: np.ndarray
    """Waited ``max_wait_s``: goes before everyone who has not."""
    order: np.ndarray
    scale: np.ndarray
    """Each job's account weight relative to the others' (``account_scale``; 1: no fairshare effect)."""


def due_times(problem: AllocationProblem, est: np.ndarray, length_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Per job: its due time, and whether a reachable deadline set it (EDF). Fairshare: the expected remaining
    work counts divided by the account's relative weight (``account_scale``)."""
    submit = problem.column("submit_time")
    due = submit + length_weight * np.minimum(est, 1e12) / account_scale(problem)  # 1e12: finite for lexsort
    now = submit + problem.column("time_since_start")
    with np.errstate(invalid="ignore"):  # no deadline and no known length: inf - inf is no latest start
        latest = now + problem.column("deadline") - est
    urgent = np.isfinite(latest) & (latest >= now) & (latest < due)
    return np.where(urgent, latest, due), urgent


def queue_order(
    problem: AllocationProblem,
    est: np.ndarray,
    floors: np.ndarray,
    guarded: np.ndarray,
    stretch: np.ndarray,
    running: np.ndarray,
    params: dict,
    soft: np.ndarray | None = None,
) -> Queue:
    """Overdue jobs (longest wait first), guaranteed jobs, jobs at their stretch guard (most stretched first),
    then everyone by due time; a running job counts ``hold_s`` earlier (only a job due that much sooner
    displaces it). A ``soft`` job (``guard_below``) counts due when the running job due last is (ahead of it,
    most stretched first): it goes ahead of every waiting job due after that and may take that running job's
    GPUs, but no other running job's (sorting it behind that job as well measured worse: RESULTS.md 7)."""
    n = problem.num_jobs
    due, urgent = due_times(problem, est, params["length_weight"])
    waited = np.maximum(0.0, problem.column("time_since_start") - problem.column("attained_time"))
    overdue = (waited >= params["max_wait_s"]) & ~running
    hold = params["hold_s"]
    key = due - hold * running if hold > 0 else due
    soft = np.zeros(n, dtype=bool) if soft is None else soft
    if soft.any() and running.any():
        key = np.where(soft, np.minimum(key, key[running].max()), key)
    order = np.lexsort(
        (
            np.arange(n),
            np.where(soft, -stretch, 0.0),
            key,
            np.where(guarded, -guard_rank(problem, stretch, running, params), 0.0),
            ~guarded,
            ~(floors > 0),
            np.where(overdue, -waited, 0.0),
            ~overdue,
        )
    )
    return Queue(due, waited, urgent, overdue, order, account_scale(problem))


def guard_rank(problem: AllocationProblem, stretch: np.ndarray, running: np.ndarray, params: dict) -> np.ndarray:
    """How jobs past their stretch guard are ordered among themselves: most stretched first, where with restart
    costs (and ``hold_s``) a running job's stretch counts ``stretch_guard`` times, so a waiting job displaces it
    only when that much more stretched. Hysteresis (issue 23): a waiting job's stretch grows and a running
    one's falls, so without it two jobs of unknown length swapped whenever their ratios crossed (a 4-GPU job
    went a100 <-> t4 45 times on an overloaded dev-cluster LLM trace)."""
    cost = problem.restart_cost_s
    if params["hold_s"] <= 0 or cost is None or not (np.asarray(cost) > 0).any():
        return stretch
    return np.where(running, stretch * max(1.0, params["stretch_guard"]), stretch)


def below_running(
    problem: AllocationProblem, guarded: np.ndarray, stretch: np.ndarray, running: np.ndarray, params: dict
) -> np.ndarray:
    """The waiting jobs past their stretch guard, but less than ``stretch_guard`` times past it: they go ahead of
    the other waiting jobs, and of no running job but the one due last (``guard_below``; ``queue_order``). Only
    with restart costs and ``hold_s``, as ``guard_rank``.

    It extends ``guard_rank``'s hysteresis (a waiting job displaces a running one only when ``stretch_guard`` times
    as stretched) to the running jobs below the guard, whose stretch is below ``stretch_guard``: a waiting job goes
    ahead of them all only once its stretch passes ``stretch_guard`` squared. Why (issue 23): a job of unknown
    length that had waited half a round went ahead of running jobs and stopped them; that left 5 of 44 traces
    behind plain Slurm, 2 with this rule (sim/RESULTS.md section 7)."""
    cap = params["stretch_guard"]
    cost = problem.restart_cost_s
    if not params["guard_below"] or params["hold_s"] <= 0 or cost is None or not (np.asarray(cost) > 0).any():
        return np.zeros(problem.num_jobs, dtype=bool)
    return guarded & ~running & (stretch < cap * cap)


def projected_stretch(
    problem: AllocationProblem, est: np.ndarray, alone_s: dict, ahead_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per job: its finish-time ratio if it ran on its fastest GPU after the next round, (time in the system +
    a round + time left) / time alone on its fastest GPU, against its share of the cluster (first) and alone
    (second). For a job whose length is unknown (no steps told): time in the system / time served.

    ``alone_s`` remembers each job's time alone from the first round it was seen (updated in place)."""
    known = known_steps(problem)
    age = problem.column("time_since_start")
    attained = problem.column("attained_time")
    ids = problem.job_ids
    alone = np.array([alone_s.setdefault(i, e + a) for i, e, a in zip(ids, est, attained, strict=True)])
    if len(alone_s) > 4 * max(problem.num_jobs, 1024):  # forget jobs that left
        live = set(ids)
        for i in [i for i in alone_s if i not in live]:
            del alone_s[i]
    # As finish-time fairness counts it (Gavel, sim/metrics.py): against the job alone on its 1/n share of
    # the cluster when n jobs share it and its GPUs exceed that share (a busy cluster stretches everyone).
    total = max(float(sum(problem.capacity.values())), 1.0)
    gpus = np.ones(problem.num_jobs)
    if problem.requested is not None:
        req = np.asarray(problem.requested, dtype=int)
        gpus = np.array([problem.cells[r].gpus if r >= 0 else 1 for r in req.tolist()], dtype=float)
    ok = known & np.isfinite(alone) & (alone > 0)
    # One round ahead: the ratio the job would have after one more round without progress, so that a short
    # job is moved before it passes the guard, not a round after.
    ahead = age + ahead_s + np.minimum(est, 1e12)
    # Unknown length: time in the system over time served, a round ahead (the ratio it would have if it
    # finished right after that round); a job left waiting passes the guard within rounds, as under LAS.
    unknown = (age + ahead_s) / (attained + ahead_s)
    plain = np.where(ok, ahead / np.where(ok, alone, 1.0), np.where(known, 1.0, unknown))
    return plain / np.maximum(1.0, gpus * problem.num_jobs / total), plain


def learned_priors(
    problem: AllocationProblem, floor_s: float, min_finished: int
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """The priors for jobs that told no step count, to order them and to price their changes: per job, its
    Gittins index and its expected remaining time by the site's finished jobs' run lengths (``mechanism.lengths``,
    ``learn_lengths``); or ``floor_s`` for both (as long again as it has run, at least that) while fewer than
    ``min_finished`` jobs have finished."""
    finished, attained = problem.finished_lengths, problem.column("attained_time")
    index = lengths.learned_prior(finished, attained, floor_s, min_finished, index=True)
    if index is None:
        return floor_s, floor_s
    return index, lengths.learned_prior(finished, attained, floor_s, min_finished)  # type: ignore[return-value]
