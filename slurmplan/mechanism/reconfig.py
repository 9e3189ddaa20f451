"""When a running job should move: Rubick's reconfiguration-cost rule, weighed against the gain.

Rubick reconfigures a job only if ``(T - N*delta) / T > threshold`` (0.97): the time lost to checkpoint and
restart must stay a small fraction of the time the job runs. slurmplan applies it to the work-equivalent time
of a move over the horizon ``T`` the decision lasts (one round, or less if the job finishes sooner): staying
delivers ``thr_cur * T`` samples, moving delivers ``thr_new * (T - N*delta)``. The job moves only if

    (thr_new / thr_cur) * (T - N*delta) / T > 1 / threshold

i.e. the move must beat staying by more than Rubick's 3 % margin after paying the reconfiguration. With equal
throughputs it never moves (Gavel's lease renewal); a much faster configuration wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurmplan.tick_types import TickConfig


@dataclass(frozen=True)
class MoveVerdict:
    move: bool
    ratio: float
    """``(thr_new / thr_cur) * (T - N*delta) / T``, compared with ``1 / threshold``."""
    detail: str


def horizon_s(round_s: float, remaining_s: float) -> float:
    """How long a decision lasts: one round, or the job's remaining time when that is shorter."""
    if not math.isfinite(remaining_s) or remaining_s <= 0:
        return round_s
    return min(round_s, remaining_s)


def judge_move(thr_cur: float, thr_new: float, horizon: float, config: TickConfig, n: int = 1) -> MoveVerdict:
    """Whether moving from ``thr_cur`` to ``thr_new`` samples/s pays ``n`` reconfigurations within ``horizon``."""
    if thr_new <= 0:
        return MoveVerdict(False, 0.0, "target configuration has no throughput")
    if thr_cur <= 0:
        return MoveVerdict(True, math.inf, "current configuration has no throughput")
    if horizon <= 0:
        return MoveVerdict(False, 0.0, "no time left to pay a reconfiguration")
    gain = thr_new / thr_cur
    ratio = gain * (horizon - n * config.reconfig_cost_s) / horizon
    move = ratio > 1.0 / config.reconfig_threshold
    verb = "beats" if move else "does not beat"
    detail = (
        f"gain x{gain:.2f} over {horizon:.0f}s minus {n}x{config.reconfig_cost_s:.0f}s reconfiguration = {ratio:.3f}, "
        f"{verb} 1/{config.reconfig_threshold:g}"
    )
    return MoveVerdict(move, ratio, detail)
