"""A tiny in-memory ClusterBackend and decision function for the daemon's control-flow unit tests.

These are test doubles, said plainly: they stand in for Slurm and for the mechanism only where a test is
about the daemon's own bookkeeping (journal, roll-forward, lock, confirmation). The end-to-end tests in
``test_e2e_slurm.py`` run the real ``SlurmBackend`` and the real ``slurmplan.tick.decide`` on the dev cluster.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from slurmplan.domain import (
    Action,
    ActionKind,
    ActionResult,
    Assignment,
    Candidate,
    Cell,
    Cluster,
    Hints,
    Job,
    JobState,
    Measurement,
    Node,
    NodeState,
    Plan,
    Reason,
    Snapshot,
)
from slurmplan.tick import JobState as SchedJobState
from slurmplan.tick import SchedulerState, TickInput, TickOutput


class MemBackend:
    """Jobs and nodes in a dict; ``apply`` changes them the way scontrol would. ``fail`` makes kinds fail."""

    def __init__(self, jobs: list[Job], now: float = 1000.0) -> None:
        self.jobs = {j.job_id: j for j in jobs}
        self.now = now
        self.fail: set[ActionKind] = set()
        self.down = False
        self.applied: list[Action] = []
        self.cluster = Cluster(
            (
                Node("a1", NodeState.IDLE, "a100", 4, partitions=("gpu",)),
                Node("v1", NodeState.IDLE, "v100", 4, partitions=("gpu",)),
            )
        )

    def snapshot(self) -> Snapshot:
        if self.down:
            raise ConnectionError("Unable to contact slurm controller (connect failure)")
        return Snapshot(self.now, self.cluster, tuple(self.jobs.values()))

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        out = []
        for a in actions:
            if a.kind in self.fail:
                out.append(ActionResult(a, False, "slurm_update error: Requested operation not supported"))
                continue
            job = self.jobs[a.job_id]
            self.jobs[a.job_id] = _effect(a, job)
            self.applied.append(a)
            out.append(ActionResult(a, True))
        return out


def _effect(a: Action, job: Job) -> Job:
    k = a.kind
    if k is ActionKind.HOLD:
        return replace(job, held=True)
    if k is ActionKind.RELEASE:
        return replace(job, held=False, state=JobState.RUNNING)
    if k is ActionKind.UPDATE:
        return replace(job, gpu_type=a.gpu_type, gpus_per_node=a.gpus_per_node or 0, nodes=a.nodelist or ())
    if k is ActionKind.ANNOTATE:
        return replace(job, admin_comment=a.admin_comment or "")
    if k is ActionKind.REQUEUE_HOLD:
        return replace(job, held=True, state=JobState.PENDING)
    return job


def candidates(hints: Hints, cluster: Cluster, measurements: list[Measurement]) -> tuple[Candidate, ...]:
    """a100 twice as fast as v100, for the requested GPU count."""
    if hints.model == "unknown-model":
        raise KeyError(f"model {hints.model!r} not in the catalog")
    n = hints.gpus or 1
    return (
        Candidate(Cell("a100", n), 200.0 * n, Plan(dp=n)),
        Candidate(Cell("v100", n), 100.0 * n, Plan(dp=n)),
    )


def simple_decide(inp: TickInput, policy: object, state: SchedulerState) -> TickOutput:
    """Start every new pending job on its best candidate: HOLD, UPDATE, ANNOTATE, RELEASE (first tick only)."""
    actions: list[Action] = []
    assignments = []
    jobs = dict(state.jobs)
    for mj in inp.jobs:
        js = jobs.get(mj.job.job_id, SchedJobState(first_seen=inp.now))
        if js.current is None and mj.job.state is JobState.PENDING:
            best = max(mj.candidates, key=lambda c: c.throughput)
            a = Assignment(mj.job.job_id, Reason.SCHEDULED, best.cell, best.plan, ("a1",), best.cell.gpus, 1.0)
            text = f"slurmplan: {best.cell.short()} {best.plan.short() if best.plan else ''}".strip()
            actions += [
                Action(ActionKind.HOLD, mj.job.job_id),
                Action(ActionKind.UPDATE, mj.job.job_id, best.cell.gpu_type, best.cell.gpus, 1, ("a1",)),
                Action(ActionKind.ANNOTATE, mj.job.job_id, admin_comment=text),
                Action(ActionKind.RELEASE, mj.job.job_id),
            ]
            js = dataclasses.replace(js, current=a, rounds_scheduled=js.rounds_scheduled + 1)
            assignments.append(a)
        jobs[mj.job.job_id] = js
    new_state = SchedulerState(round_index=state.round_index + 1, last_round_start=inp.now, jobs=jobs)
    return TickOutput(tuple(actions), tuple(assignments), None, new_state, True)
