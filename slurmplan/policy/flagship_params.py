"""Every parameter of the flagship (``policy/flagship.py``) in one place: name, type, default, meaning.

The shipped preset (``policy/presets/slurmplan.yaml``) overrides some defaults; one preset serves every trace
and family (issue 23: nothing is tuned per trace). Each entry says what the value does and what is allowed; a
bad value is refused with the field named. Steps that read them:

- ordering (``flagship_order.py``): ``length_weight``, ``max_wait_s``, ``hold_s``, ``stretch_guard`` (with restart
  costs and ``hold_s`` also the hysteresis among jobs past it: a running one's stretch counts this many times,
  ``guard_rank``; and with ``guard_below``, towards the running jobs below it, ``below_running``),
  ``guard_ahead_s``, ``prior_floor_s``, ``sla``;
- selection and placement search (``flagship.py``): ``search_depth``, ``move_gain``, ``sla_catch_up``,
  ``deadline_floor``;
- type matching (``flagship_match.py``): ``match_types``, ``stay_bonus``, ``short_bias_s``, ``stretch_weight``;
- sizing (``flagship_sizing.py``): ``grow``, ``scale_up``, ``grow_first``, ``climb_by``, ``climb_floor_s``;
- expected remaining time (``flagship_order.py``, ``mechanism/lengths.py``): ``prior_floor_s``, ``learn_lengths``;
- between rounds (``flagship_fill.py``): ``fill_freed``; an extra round at an arrival (``mechanism/engine.py``):
  ``arrival_round``;
- move pricing and hysteresis (``flagship_moves.py``, ``mechanism/pricing.py``): ``move_pay``, ``prior_floor_s``,
  ``stop_gang``, ``protect_pushed`` (with ``hold_s``; the restart costs' hold time and the costs are the tick's:
  ``TickConfig.move_hold_rounds``, measured costs).
"""

from __future__ import annotations

from slurmplan.mechanism.pricing import PRIOR_FLOOR_S
from slurmplan.policy.base import Param, non_negative, positive
from slurmplan.tick_types import TickConfig

PARAMS: dict[str, Param] = {
    "length_weight": Param(
        float, 1.0, "a number >= 0: seconds of due time per second of expected remaining work", non_negative
    ),
    "max_wait_s": Param(
        float, 7 * 86400.0, "a positive number of seconds: a job that waited this long goes first", positive
    ),
    "stay_bonus": Param(
        float,
        0.0,
        "a number >= 0: a running job's current column is worth this much more relative speed "
        "when re-placing (a restart's cost as a fraction of a round)",
        non_negative,
    ),
    "move_gain": Param(
        float,
        0.0,
        "a number >= 0: a running job changes column only if another is this fraction faster",
        non_negative,
    ),
    "match_types": Param(bool, True, "true (place the chosen jobs where they are relatively fastest) or false"),
    "short_bias_s": Param(
        float, 0.0, "a number >= 0 of seconds: weight + this / time left when placing on fast GPUs", non_negative
    ),
    "stretch_weight": Param(
        float,
        0.0,
        "a number >= 0: weight of (time in the system / time left) when placing on fast GPUs",
        non_negative,
    ),
    "hold_s": Param(
        float,
        0.0,
        "a number >= 0 of seconds: a running job keeps its column, and is displaced only by a job due this "
        "much earlier (hysteresis against restarts; 0: re-decide every round)",
        non_negative,
    ),
    "search_depth": Param(
        int,
        0,
        "an integer >= 0: a job that does not fit may shrink or move up to this many placed jobs of the "
        "type it wants (Crius's scaling search; 0: backfill only)",
        non_negative,
    ),
    "grow": Param(bool, True, "true (hand leftover GPUs to elastic jobs) or false"),
    "scale_up": Param(
        bool,
        False,
        "true (leftover GPUs go to the job gaining most speed per added GPU, Crius's climb) or false "
        "(in due order, same type)",
    ),
    "grow_first": Param(
        bool,
        False,
        "true (with scale_up: first grow jobs within their type in due order, then climb with what is "
        "left) or false (climb only)",
    ),
    "climb_by": Param(
        str,
        "speed",
        "'speed' (Crius's climb: relative speed gained per added GPU), 'short' (that gain / expected "
        "remaining time: shortest first) or 'time_saved' (hours of the job's remaining time saved per GPU)",
        lambda v: v in ("speed", "short", "time_saved"),
    ),
    "climb_floor_s": Param(
        float,
        600.0,
        "a positive number of seconds: expected remaining times below this count as this in climb_by",
        positive,
    ),
    "sla_catch_up": Param(
        bool,
        False,
        "true (a guaranteed job that waited for a round starts in a column fast enough to still meet its "
        "SLA) or false (a column at its SLA rate)",
    ),
    "deadline_floor": Param(
        bool,
        False,
        "true (a job with a deadline ahead is placed and protected like a guaranteed job, at the rate that "
        "meets its deadline or its fastest column when its length is unknown) or false",
    ),
    "sla": Param(bool, True, "true (serve guaranteed jobs first, at their SLA) or false"),
    "stretch_guard": Param(
        float,
        0.0,
        "a number >= 0: a job whose finish-time ratio (time in the system + time left, over its time alone on "
        "its fastest GPU) would pass this goes first, on its fastest GPU (0: off)",
        non_negative,
    ),
    "guard_below": Param(
        bool,
        False,
        "true (with restart costs, a waiting job past its stretch guard goes ahead of the other waiting jobs, "
        "but ahead of the running ones only once stretch_guard times past it) or false (ahead of both)",
    ),
    "guard_ahead_s": Param(
        float,
        TickConfig.round_s,
        "a positive number of seconds: how far ahead the stretch guard looks (a round: the daemon's round_s)",
        positive,
    ),
    "move_pay": Param(
        float,
        1.0,
        "a number >= 0: a move, resize or stop of a running job goes ahead only if the completion time it saves "
        "(its own over its expected remaining time, plus the waiting of the jobs it makes room for) exceeds this "
        "many times its full restart cost (flagship_moves.py; 0: never priced)",
        non_negative,
    ),
    "prior_floor_s": Param(
        float,
        PRIOR_FLOOR_S,
        "a positive number of seconds: a job that told no step count is expected to run as long again as it has "
        "run so far, at least this long (mechanism/pricing.py; its time limit only caps the figure)",
        positive,
    ),
    "learn_lengths": Param(
        int,
        0,
        "an integer >= 0: once this many jobs have finished, a job that told no step count is expected to run as "
        "long as the finished jobs' run lengths say a job of its age still runs (mechanism/lengths.py: least "
        "attained service on heavy tails, first come first served where long-running jobs are near their end), "
        "instead of the prior_floor_s rule (0: never)",
        non_negative,
    ),
    "fill_freed": Param(
        bool,
        False,
        "true (between rounds, GPUs freed since the round start the waiting jobs that never ran, in due order, on "
        "their requested size, as plain Slurm starts the next job at each completion) or false (they stay idle "
        "until the next round unless a job arrived since the round)",
    ),
    "arrival_round": Param(
        bool,
        False,
        "true (a job that arrives between rounds, when every job not running arrived since the round and free GPUs "
        "can start it, opens a round at once: the round sizes it and prices every other change as at any round; "
        "the rounds' grid is kept; mechanism/engine.arrival_round) or false. In the preset since the twentieth session "
        "(sim/RESULTS.md section 7: averaged over the rounds' phase, fewer losses and restart flags on the held-out "
        "sets and every family median the same or better)",
    ),
    "stop_gang": Param(
        bool,
        False,
        "true (a stopped job's own delay, when the guard prices its stop, runs until enough of the jobs that took its "
        "GPUs have ended for it to fit again: all of them for a gang job whose GPUs they split) or false (until the "
        "first of them ends; flagship_moves.py). The preset sets true (fourteenth session, sim/RESULTS.md section 7: "
        "on 134 development and held-out traces no loss, worst ratio or Gavel figure changes, restart flags 6 -> 5)",
    ),
    "protect_pushed": Param(
        bool,
        False,
        "true (a running job that another job's change pushed off its GPUs less than hold_s ago is pushed "
        "again only by a change that pays for both restarts; flagship_moves._shield) or false. The preset sets true "
        "(fifteenth session, fourth shift, sim/RESULTS.md section 7: restart flags 5 -> 4 on the held-out sets, no "
        "new loss, family medians within 0.5 %, only LLM rows change)",
    ),
}
