"""The one decision function that both the daemon and the simulator call.

A tick is pure: ``decide(TickInput, policy, SchedulerState) -> TickOutput``. It reads no clock, runs no
Slurm command and touches no database; the daemon (``control/``) and the simulator (``sim/``) are the two
edges that observe before it and act after it. Keeping it pure is what lets the simulator predict exactly
what the daemon would do, and lets ``slurmplan explain`` replay a decision from the journal.
"""

from __future__ import annotations

from slurmplan.domain import Policy
from slurmplan.mechanism.engine import decide as _decide
from slurmplan.tick_types import (
    JobState,
    ManagedJob,
    SchedulerState,
    TickConfig,
    TickInput,
    TickOutput,
)

__all__ = ["JobState", "ManagedJob", "SchedulerState", "TickConfig", "TickInput", "TickOutput", "decide"]


def decide(inp: TickInput, policy: Policy, state: SchedulerState) -> TickOutput:
    """One tick's decision: actions, assignments (each with a Reason) and the state for the next tick.

    ``policy`` is any :class:`~slurmplan.domain.Policy` (``name`` and ``allocate(problem) -> Allocation``). A new
    round starts on the first tick and whenever ``config.round_s`` has passed since the last one: the policy is
    solved and the mechanism picks, places and diffs. Between rounds the round's decisions stand: grace
    periods expire, new jobs are held, and GPUs freed by finished jobs are refilled from the round's X.
    Pure: the same arguments always give the same output.
    """
    return _decide(inp, policy, state)
