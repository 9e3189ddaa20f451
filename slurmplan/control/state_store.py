"""SchedulerState <-> journal: the scheduler's memory between ticks, saved with the intents it produced.

``save_state`` is called inside the transaction that writes the tick's intents, so the state the next tick
starts from is always the one that matches the actions on record (see ``journal``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from slurmplan.control.codec import allocation_from_dict, allocation_to_dict, job_state_from_dict, job_state_to_dict
from slurmplan.control.journal import Journal
from slurmplan.tick_types import SchedulerState

_EXTRA_SCALARS = ("last_tick", "epoch_start")
"""Optional float fields of ``SchedulerState`` stored as they are (present in newer tick modules)."""


def save_state(journal: Journal, state: SchedulerState) -> None:
    """Replace the stored state by ``state`` (jobs missing from it are forgotten)."""
    with journal.transaction():
        journal.state.set("round_index", state.round_index)
        journal.state.set("last_round_start", state.last_round_start)
        for name in _EXTRA_SCALARS:
            if hasattr(state, name):
                journal.state.set(name, getattr(state, name))
        if hasattr(state, "allocation"):
            journal.state.set("allocation", allocation_to_dict(state.allocation))
        if hasattr(state, "finished_lengths"):
            journal.state.set("finished_lengths", list(state.finished_lengths))
        journal.state.replace_jobs({job_id: job_state_to_dict(js) for job_id, js in state.jobs.items()})


def load_state(journal: Journal) -> SchedulerState:
    """The last saved state, or the initial one for a new journal."""
    jobs = {job_id: job_state_from_dict(value) for job_id, value in journal.state.jobs().items()}
    extra: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(SchedulerState)}
    for name in _EXTRA_SCALARS:
        if name in names:
            extra[name] = journal.state.get(name)
    if "allocation" in names:
        extra["allocation"] = allocation_from_dict(journal.state.get("allocation"))
    if "finished_lengths" in names:  # a bad stored value (hand-edited journal) is forgotten, not fatal
        extra["finished_lengths"] = _finished_lengths(journal.state.get("finished_lengths"))
    return SchedulerState(
        round_index=int(journal.state.get("round_index", 0)),
        last_round_start=journal.state.get("last_round_start"),
        jobs=jobs,
        **extra,
    )


def _finished_lengths(value: Any) -> tuple[float, ...]:
    """The stored finished run lengths, or none when the value is not a list of non-negative numbers."""
    if not isinstance(value, list):
        return ()
    try:
        out = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        return ()
    return out if all(x >= 0 and x == x for x in out) else ()
