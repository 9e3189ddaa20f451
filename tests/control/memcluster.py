"""The simulated cluster and a simple decision function for the daemon's control-flow unit tests.

The cluster is the simulator's backend (``SimBackend``), so these tests run under the rules production uses;
only two faults are stand-ins (see ``MemBackend``). ``simple_decide`` stands in for the mechanism where a test is
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
from slurmplan.rules import SLURM_22_05
from slurmplan.sim.backend import SimBackend, SimJob
from slurmplan.tick import JobState as SchedJobState
from slurmplan.tick import SchedulerState, TickInput, TickOutput

NO_DELAY = replace(SLURM_22_05, requeue_start_delay_s=0.0)
"""Slurm 22.05's rules without the requeue begin-time delay (the bookkeeping tests do not wait for it)."""


class MemBackend(SimBackend):
    """The simulator's backend (Slurm's rules, as production declares them) holding the tests' jobs.

    Two faults cannot be caused on demand in it, so they are stand-ins, said plainly: ``fail`` makes actions of
    the given kinds refused as scontrol would refuse them, ``down`` makes ``snapshot()`` fail as an unreachable
    slurmctld does. ``applied`` lists the actions that reached the backend. ``later`` are jobs submitted with
    ``--begin`` in the future: Slurm leaves them pending whatever the GPUs (unmanaged jobs that must stay put).
    """

    def __init__(self, jobs: list[Job], now: float = 1000.0, *, later: tuple[int, ...] = ()) -> None:
        nodes = (
            Node("a1", NodeState.IDLE, "a100", 4, partitions=("gpu",)),
            Node("v1", NodeState.IDLE, "v100", 4, partitions=("gpu",)),
        )
        super().__init__(nodes=nodes, rate_fn=lambda *a: 1.0, reconfig_cost_s=0.0, rules=NO_DELAY, keep_finished_s=300)
        self.start_at(now)
        self.fail: set[ActionKind] = set()
        self.down = False
        self.applied: list[Action] = []
        for job in jobs:
            self.submit_held = True  # placed exactly as the test describes it, then left to Slurm's rules
            sim = SimJob.like(job, 1e9, partition=job.partition, user=job.user, comment=job.comment)
            self.submit(sim)
            sim.held = job.held
            sim.eligible_at = now + 86_400.0 if job.job_id in later else 0.0
            sim.cached = None

    def snapshot(self) -> Snapshot:
        if self.down:
            raise ConnectionError("Unable to contact slurm controller (connect failure)")
        return super().snapshot()

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        refused = [a for a in actions if a.kind in self.fail]
        passed = [a for a in actions if a.kind not in self.fail]
        self.applied += passed
        results = {id(r.action): r for r in super().apply(passed)}
        for a in refused:
            results[id(a)] = ActionResult(a, False, "slurm_update error: Requested operation not supported")
        return [results[id(a)] for a in actions]

    def complete(self, job_id: int) -> None:
        """The job's work is done: it completes at the backend's next ``advance``."""
        self.jobs[job_id].work_total = self.jobs[job_id].work_done


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
