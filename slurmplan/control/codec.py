"""JSON forms of the domain values the journal stores (actions, assignments, per-job scheduler state).

Kept apart from the journal so that the round trip ``value -> dict -> value`` is tested on its own: a
re-applied intent must be the very action that was decided, and a restored ``SchedulerState`` must make the
next tick decide exactly as if the daemon had never stopped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from slurmplan.domain import (
    Action,
    ActionKind,
    Allocation,
    Assignment,
    Candidate,
    Cell,
    Hints,
    Plan,
    Reason,
)
from slurmplan.tick import JobState


def cell_to_dict(cell: Cell) -> dict[str, Any]:
    return {"gpu_type": cell.gpu_type, "gpus": cell.gpus, "stages": cell.stages}


def cell_from_dict(d: dict[str, Any]) -> Cell:
    return Cell(gpu_type=d["gpu_type"], gpus=int(d["gpus"]), stages=int(d.get("stages", 1)))


def cell_key(cell: Cell) -> str:
    """A stable text key for a Cell (JSON object keys must be strings)."""
    return f"{cell.gpu_type}:{cell.gpus}:{cell.stages}"


def cell_from_key(key: str) -> Cell:
    gpu_type, gpus, stages = key.rsplit(":", 2)
    return Cell(gpu_type=gpu_type, gpus=int(gpus), stages=int(stages))


def plan_to_dict(plan: Plan | None) -> dict[str, Any] | None:
    return None if plan is None else dataclasses.asdict(plan)


def plan_from_dict(d: dict[str, Any] | None) -> Plan | None:
    if d is None:
        return None
    names = {f.name for f in dataclasses.fields(Plan)}
    return Plan(**{k: v for k, v in d.items() if k in names})


def action_to_dict(a: Action) -> dict[str, Any]:
    return {
        "kind": a.kind.value,
        "job_id": a.job_id,
        "gpu_type": a.gpu_type,
        "gpus_per_node": a.gpus_per_node,
        "node_count": a.node_count,
        "nodelist": list(a.nodelist) if a.nodelist is not None else None,
        "admin_comment": a.admin_comment,
        "signal": a.signal,
        "reason": a.reason,
        "previous_nodes": list(a.previous_nodes) if a.previous_nodes is not None else None,
    }


def action_from_dict(d: dict[str, Any]) -> Action:
    nodelist, previous = d.get("nodelist"), d.get("previous_nodes")
    return Action(
        kind=ActionKind(d["kind"]),
        job_id=int(d["job_id"]),
        gpu_type=d.get("gpu_type"),
        gpus_per_node=d.get("gpus_per_node"),
        node_count=d.get("node_count"),
        nodelist=tuple(nodelist) if nodelist is not None else None,
        admin_comment=d.get("admin_comment"),
        signal=d.get("signal"),
        reason=d.get("reason", ""),
        previous_nodes=tuple(previous) if previous is not None else None,
    )


def assignment_to_dict(a: Assignment) -> dict[str, Any]:
    return {
        "job_id": a.job_id,
        "reason": a.reason.value,
        "cell": cell_to_dict(a.cell) if a.cell else None,
        "plan": plan_to_dict(a.plan),
        "nodes": list(a.nodes),
        "gpus_per_node": a.gpus_per_node,
        "throughput": a.throughput,
        "priority": a.priority,
        "share": a.share,
        "detail": a.detail,
    }


def assignment_from_dict(d: dict[str, Any]) -> Assignment:
    return Assignment(
        job_id=int(d["job_id"]),
        reason=Reason(d["reason"]),
        cell=cell_from_dict(d["cell"]) if d.get("cell") else None,
        plan=plan_from_dict(d.get("plan")),
        nodes=tuple(d.get("nodes", ())),
        gpus_per_node=int(d.get("gpus_per_node", 0)),
        throughput=float(d.get("throughput", 0.0)),
        priority=float(d.get("priority", 0.0)),
        share=float(d.get("share", 0.0)),
        detail=d.get("detail", ""),
    )


def job_state_to_dict(s: JobState) -> dict[str, Any]:
    """Every field of a ``JobState`` (fields the tick module adds later are stored too, see ``_plain``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        if f.name.endswith("_by_cell"):
            value = {cell_key(c): v for c, v in value.items()}
        elif isinstance(value, Assignment):
            value = assignment_to_dict(value)
        out[f.name] = _plain(value)
    return out


def job_state_from_dict(d: dict[str, Any]) -> JobState:
    names = {f.name: f for f in dataclasses.fields(JobState)}
    values: dict[str, Any] = {}
    for key, value in d.items():
        if key not in names:
            continue  # written by a newer/older version: ignore rather than refuse to start
        if key.endswith("_by_cell"):
            value = {cell_from_key(k): float(v) for k, v in (value or {}).items()}
        elif isinstance(value, dict) and "reason" in value and "job_id" in value:
            value = assignment_from_dict(value)
        elif key == "ran_on":
            value = tuple(value or ())
        values[key] = value
    return JobState(**values)


def _plain(value: Any) -> Any:
    """A JSON-ready form of simple values; refuses what it cannot store so a new field is noticed in tests."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise TypeError(f"cannot journal {type(value).__name__} value {value!r}")


def allocation_to_dict(a: Allocation | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "job_ids": list(a.job_ids),
        "cells": [cell_to_dict(c) for c in a.cells],
        "x": np.asarray(a.x, dtype=float).tolist(),
        "policy": a.policy,
        "objective": None if not np.isfinite(a.objective) else float(a.objective),
        "status": a.status,
        "notes": None if a.notes is None else list(a.notes),
    }


def allocation_from_dict(d: dict[str, Any] | None) -> Allocation | None:
    if d is None:
        return None
    cells = tuple(cell_from_dict(c) for c in d["cells"])
    x = np.asarray(d["x"], dtype=float).reshape(len(d["job_ids"]), len(cells))
    objective = d.get("objective")
    return Allocation(
        job_ids=tuple(int(j) for j in d["job_ids"]),
        cells=cells,
        x=x,
        policy=d.get("policy", ""),
        objective=float("nan") if objective is None else float(objective),
        status=d.get("status", "optimal"),
        notes=None if d.get("notes") is None else tuple(str(n) for n in d["notes"]),
    )


def hints_to_dict(h: Hints) -> dict[str, Any]:
    d = dataclasses.asdict(h)
    d["job_class"] = h.job_class.value
    d["gpu_types"] = list(h.gpu_types)
    return d


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    return {
        "cell": cell_to_dict(c.cell),
        "throughput": c.throughput,
        "plan": plan_to_dict(c.plan),
        "source": c.source.value,
        "nodes": c.nodes,
    }
