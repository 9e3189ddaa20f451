"""Builders for mechanism and tick tests, and small real policies that implement the Policy protocol.

The policies are not mocks: they compute an X from the problem like any policy, only by simple rules, so a
test controls exactly what the mechanism receives.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from slurmplan.domain import (
    Allocation,
    AllocationProblem,
    Candidate,
    Cell,
    Cluster,
    Hints,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
)
from slurmplan.tick import ManagedJob

T0 = 1_700_000_000.0


def node(name: str, gpu_type: str, gpus: int = 8, *, used: int = 0, cpus: int = 64, mem: int = 512_000) -> Node:
    return Node(name, NodeState.MIXED if used else NodeState.IDLE, gpu_type, gpus, used, cpus, 0, mem, 0)


def cluster(**types: tuple[int, int]) -> Cluster:
    """``cluster(a100=(2, 8))``: two a100 nodes of 8 GPUs, named a100-0, a100-1."""
    return Cluster(tuple(node(f"{t}-{i}", t, g) for t, (count, g) in sorted(types.items()) for i in range(count)))


def cands(table: Mapping[str, Mapping[int, float]], *, cpus: int = 0, mem: int = 0) -> tuple[Candidate, ...]:
    """``cands({"a100": {1: 10, 2: 19}})``: one candidate per (type, GPU count) with that throughput."""
    return tuple(
        Candidate(Cell(t, g), thr, Plan(dp=g), cpus=cpus * g, host_memory_mb=mem * g)
        for t, row in sorted(table.items())
        for g, thr in sorted(row.items())
    )


def mjob(
    job_id: int,
    table: Mapping[str, Mapping[int, float]],
    *,
    gpus: int = 1,
    gpu_type: str | None = None,
    state: JobState = JobState.PENDING,
    nodes: tuple[str, ...] = (),
    held: bool = True,
    submit: float = T0,
    cpus: int = 0,
    mem: int = 0,
    steps: int | None = None,
    account: str = "",
    admin_comment: str = "",
) -> ManagedJob:
    gpu_type = gpu_type or sorted(table)[0]
    running = state is JobState.RUNNING
    job = Job(
        job_id,
        name=f"j{job_id}",
        account=account,
        state=state,
        gpu_type=gpu_type,
        gpus_per_node=gpus // max(1, len(nodes)) if nodes else gpus,
        node_count=max(1, len(nodes)),
        nodes=nodes,
        submit_time=submit,
        start_time=submit if running else None,
        held=held and not running,
        admin_comment=admin_comment,
    )
    hints = Hints(gpu_types=(gpu_type,), gpus=gpus, steps=steps)
    return ManagedJob(job, hints, cands(table, cpus=cpus, mem=mem))


class RequestedPolicy:
    """Each job gets its requested column in full (what plain Slurm would run)."""

    name = "requested"

    def allocate(self, problem: AllocationProblem) -> Allocation:
        x = np.zeros(problem.throughput.shape)
        req = np.asarray(problem.requested)
        rows = np.flatnonzero(req >= 0)
        x[rows, req[rows]] = 1.0
        return Allocation(problem.job_ids, problem.cells, x, self.name)


class EqualSharePolicy:
    """Every job gets the same share of its fastest column, scaled so no GPU type is overcommitted."""

    name = "equal-share"

    def allocate(self, problem: AllocationProblem) -> Allocation:
        x = np.zeros(problem.throughput.shape)
        if problem.num_jobs == 0:
            return Allocation(problem.job_ids, problem.cells, x, self.name)
        best = problem.throughput.argmax(axis=1)
        x[np.arange(problem.num_jobs), best] = 1.0
        demand: dict[str, float] = {}
        for c, cell in enumerate(problem.cells):
            demand[cell.gpu_type] = demand.get(cell.gpu_type, 0.0) + x[:, c].sum() * cell.gpus
        scale = min([1.0] + [problem.capacity.get(t, 0) / d for t, d in demand.items() if d > 0])
        return Allocation(problem.job_ids, problem.cells, x * scale, self.name)


class FixedPolicy:
    """X given by the test as ``{job_id: {Cell: share}}``."""

    name = "fixed"

    def __init__(self, shares: Mapping[int, Mapping[Cell, float]]) -> None:
        self.shares = shares

    def allocate(self, problem: AllocationProblem) -> Allocation:
        x = np.zeros(problem.throughput.shape)
        col = {c: i for i, c in enumerate(problem.cells)}
        for j, job_id in enumerate(problem.job_ids):
            for cell, share in self.shares.get(job_id, {}).items():
                if cell in col:
                    x[j, col[cell]] = share
        return Allocation(problem.job_ids, problem.cells, x, self.name)


class MiniCluster:
    """A tiny in-test stand-in for Slurm's reaction to actions, so several ticks can run in a row.

    It follows the documented behaviour of the real commands (update a pending job, release, hold, the
    launcher requeueing itself on the checkpoint signal, requeue-hold) and starts released pending jobs on
    their node list at once. The real backends are tested in their own rooms.
    """

    def __init__(self, base: Cluster, jobs: list[ManagedJob], *, exit_on_signal: bool = True) -> None:
        self.base = base
        self.jobs = {mj.job.job_id: mj for mj in jobs}
        self.exit_on_signal = exit_on_signal

    def snapshot_cluster(self) -> Cluster:
        used: dict[str, int] = {}
        for mj in self.jobs.values():
            if mj.job.state is JobState.RUNNING:
                for n in mj.job.nodes:
                    used[n] = used.get(n, 0) + mj.job.gpus_per_node
        nodes = []
        for n in self.base.nodes:
            total = n.gpus_used + used.get(n.name, 0)
            assert total <= n.gpus, f"node {n.name} overcommitted: {total} > {n.gpus}"
            nodes.append(Node(n.name, n.state, n.gpu_type, n.gpus, total, n.cpus, n.cpus_used, n.memory_mb))
        return Cluster(tuple(nodes))

    def apply(self, actions: tuple, now: float) -> None:
        from dataclasses import replace

        from slurmplan.domain import ActionKind

        for a in actions:
            mj = self.jobs[a.job_id]
            job = mj.job
            if a.kind is ActionKind.UPDATE:
                job = replace(
                    job,
                    gpu_type=a.gpu_type,
                    gpus_per_node=a.gpus_per_node,
                    node_count=a.node_count,
                    nodes=a.nodelist,
                    admin_comment=a.admin_comment,
                )
            elif a.kind is ActionKind.RELEASE:
                job = replace(job, held=False)
            elif a.kind is ActionKind.HOLD:
                job = replace(job, held=True)
            elif a.kind is ActionKind.ANNOTATE:
                job = replace(job, admin_comment=a.admin_comment)
            elif a.kind is ActionKind.SIGNAL and self.exit_on_signal:
                job = replace(job, state=JobState.PENDING, held=False, nodes=(), start_time=None)
            elif a.kind is ActionKind.REQUEUE_HOLD:
                job = replace(job, state=JobState.PENDING, held=True, nodes=(), start_time=None)
            self.jobs[a.job_id] = replace(mj, job=job)
        for job_id, mj in sorted(self.jobs.items()):
            job = mj.job
            if job.state is JobState.PENDING and not job.held and job.nodes and self._fits(job):
                self.jobs[job_id] = replace(mj, job=replace(job, state=JobState.RUNNING, start_time=now))
        self.snapshot_cluster()

    def _fits(self, job: Job) -> bool:
        """Slurm starts a job on its node list only once every node has its GPUs free."""
        free = {n.name: n.gpus - n.gpus_used for n in self.snapshot_cluster().nodes}
        return all(free.get(name, 0) >= job.gpus_per_node for name in job.nodes)

    def finish(self, job_id: int) -> None:
        del self.jobs[job_id]

    def managed(self) -> tuple[ManagedJob, ...]:
        return tuple(self.jobs[j] for j in sorted(self.jobs))
