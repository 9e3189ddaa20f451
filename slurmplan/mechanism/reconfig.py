"""When a running job should move: Rubick's reconfiguration-cost rule, weighed against the gain.

Rubick reconfigures a job only if ``(T - N*delta) / T > threshold`` (0.97): the time lost to checkpoint and
restart must stay a small fraction of the time the job runs. slurmplan applies it to the work-equivalent time
of a move over the job's expected remaining time ``T`` (``pricing.remaining_prior``: from its steps when known,
else from the time it has run; issue 23: one round as ``T`` let a 2.2x gain for 12 s pay any move, and the job
went back and forth): staying delivers ``thr_cur * T`` samples, moving delivers ``thr_new * (T - N*delta)``,
i.e. the move saves more completion time than it costs. delta is the full restart cost (``full_cost_for``); a
job moved within the hold (``TickConfig.move_hold_s``) pays for both moves (N = 2). The job moves only if

    (thr_new / thr_cur) * (T - N*delta) / T > 1 / threshold

i.e. the move must beat staying by more than Rubick's 3 % margin after paying the reconfiguration. With equal
throughputs it never moves (Gavel's lease renewal); a much faster configuration wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slurmplan.tick_types import TickConfig


@dataclass(frozen=True)
class MoveVerdict:
    move: bool
    ratio: float
    """``(thr_new / thr_cur) * (T - N*delta) / T``, compared with ``1 / threshold``."""
    detail: str


def horizons(round_s: float, remaining_s: np.ndarray) -> np.ndarray:
    """Over how long each job's move is weighed: its expected remaining time (one round when that is unknown,
    infinite or not positive). Every row at once: every tick asks for every job."""
    remaining_s = np.asarray(remaining_s, dtype=float)
    return np.where(np.isfinite(remaining_s) & (remaining_s > 0), remaining_s, float(round_s))


def judge_move(
    thr_cur: float,
    thr_new: float,
    horizon: float,
    config: TickConfig,
    n: int = 1,
    gpus: int | None = None,
    wait_s: float = 0.0,
    since_moved_s: float = math.inf,
) -> MoveVerdict:
    """Whether moving from ``thr_cur`` to ``thr_new`` samples/s pays ``n`` reconfigurations within ``horizon``.

    ``gpus`` is the size of the configuration the job would move to: its delta is the cost measured on this
    cluster for that size (``TickConfig.reconfig_cost_by_gpus``), the configured constant without one.
    ``wait_s``: time the job also stands still before its restart (Slurm's requeue delay when it may restart on
    the nodes it leaves); it counts like the reconfiguration cost, or a resize in place looks free.
    ``since_moved_s``: time since a decision last moved the job; within ``config.move_hold_s`` it pays twice."""
    if thr_new <= 0:
        return MoveVerdict(False, 0.0, "the other configuration has no throughput")
    if thr_cur <= 0:
        return MoveVerdict(True, math.inf, "its current configuration has no throughput")
    if horizon <= 0:
        return MoveVerdict(False, 0.0, "no time left in which a restart could pay off")
    gain = thr_new / thr_cur
    if config.move_hold_s > 0 and since_moved_s < config.move_hold_s:
        n *= 2  # hysteresis: a job moved within the hold is not moved back unless the gain pays for both moves
    delta = config.full_cost_for(gpus) if gpus is not None else config.reconfig_cost_s + config.start_latency_s
    cost = n * delta + wait_s
    ratio = gain * (horizon - cost) / horizon
    move = ratio > 1.0 / config.reconfig_threshold
    return MoveVerdict(move, ratio, _move_sentence(move, gain, horizon, cost, ratio, 1.0 / config.reconfig_threshold))


def _move_sentence(move: bool, gain: float, horizon: float, cost: float, ratio: float, needed: float) -> str:
    """The rule in words with units: ``moving would gain 4.1x for 20 s but costs 78 s`` (an admin reads this
    in ``explain``; the old ``gain x4.09 over 20s minus 1x78s reconfiguration = -11.853`` needed the paper)."""
    stops = f"{cost:.0f} s of restart" if cost else "no restart time"
    if move:
        return (
            f"moving gains {gain:.1f}x for {horizon:.0f} s and costs {stops}: {ratio:.2f}x the progress of "
            f"staying, above the {needed:.2f}x a move must reach"
        )
    if cost >= horizon:
        return (
            f"moving would run {gain:.1f}x as fast, but its restart takes {cost:.0f} s, longer than the"
            f" {horizon:.0f} s over which a move is weighed"
        )
    if gain <= 1.0:
        return f"moving would run {gain:.2f}x as fast, no gain"
    return (
        f"moving would gain {gain:.1f}x for {horizon:.0f} s but costs {stops}: {ratio:.2f}x the progress of "
        f"staying, not above the {needed:.2f}x a move must reach"
    )
