"""SchedulerState <-> journal: the scheduler's memory between ticks, saved with the intents it produced.

``save_state`` is called inside the transaction that writes the tick's intents, so the state the next tick
starts from is always the one that matches the actions on record (see ``journal``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from slurmplan.control.codec import allocation_from_dict, allocation_to_dict, job_state_from_dict, job_state_to_dict
from slurmplan.control.journal import Journal
from slurmplan.tick import SchedulerState

_EXTRA_SCALARS = ("last_tick", "epoch_start")
"""Optional float fields of ``SchedulerState`` stored as they are (present in newer tick modules)."""


def save_state(journal: Journal, state: SchedulerState) -> None:
    """Replace the stored state by ``state`` (jobs missing from it are forgotten)."""
    with journal.transaction():
        journal.set_value("round_index", state.round_index)
        journal.set_value("last_round_start", state.last_round_start)
        for name in _EXTRA_SCALARS:
            if hasattr(state, name):
                journal.set_value(name, getattr(state, name))
        if hasattr(state, "allocation"):
            journal.set_value("allocation", allocation_to_dict(state.allocation))
        journal.db.execute("DELETE FROM job_state")
        journal.db["job_state"].insert_all(
            {"job_id": job_id, "value": json.dumps(job_state_to_dict(js))} for job_id, js in state.jobs.items()
        )


def load_state(journal: Journal) -> SchedulerState:
    """The last saved state, or the initial one for a new journal."""
    jobs = {
        int(r["job_id"]): job_state_from_dict(json.loads(r["value"]))
        for r in journal.db["job_state"].rows_where(order_by="job_id")
    }
    extra: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(SchedulerState)}
    for name in _EXTRA_SCALARS:
        if name in names:
            extra[name] = journal.get_value(name)
    if "allocation" in names:
        extra["allocation"] = allocation_from_dict(journal.get_value("allocation"))
    return SchedulerState(
        round_index=int(journal.get_value("round_index", 0)),
        last_round_start=journal.get_value("last_round_start"),
        jobs=jobs,
        **extra,
    )
