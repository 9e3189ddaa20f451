"""Builders for mechanism and tick tests, and small real policies that implement the Policy protocol.

The policies are not mocks: they compute an X from the problem like any policy, only by simple rules, so a
test controls exactly what the mechanism receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

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
from slurmplan.policy.registry import load_policy, policy_dirs
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads
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


class _JobsView(dict):
    """``MiniCluster.jobs``: Slurm's jobs now; an assignment keeps the new hints, candidates and progress."""

    def __init__(self, managed: dict[int, ManagedJob]) -> None:
        super().__init__()
        self._managed = managed

    def __setitem__(self, job_id: int, mj: ManagedJob) -> None:
        assert job_id in self._managed, f"job {job_id} was never submitted: use MiniCluster.submit"
        self._managed[job_id] = mj
        super().__setitem__(job_id, mj)


class MiniCluster:
    """Slurm's reaction to the tick's actions, by the simulator's backend (``SimBackend``), so several ticks can
    run in a row under the rules production uses (``slurmplan.rules``; the requeue begin-time delay is set to 0
    so a tick test need not wait for it).

    A thin view over it keeps the tests' vocabulary: ``jobs[id].job`` is Slurm's view of a job now (with the
    test's hints and candidates), ``snapshot_cluster()`` the nodes, ``apply(actions, now)`` what scontrol does.
    With ``exit_on_signal=False`` the jobs ignore the checkpoint signal (a launcher that never checkpoints). The
    backend starts released jobs wherever they fit and asserts no node is ever overcommitted.
    """

    def __init__(self, base: Cluster, jobs: list[ManagedJob], *, exit_on_signal: bool = True) -> None:
        from dataclasses import replace

        from slurmplan.rules import SLURM_22_05
        from slurmplan.sim.backend import SimBackend

        self.base = base
        self.exit_on_signal = exit_on_signal
        rules = replace(SLURM_22_05, requeue_start_delay_s=0.0)
        self.backend = SimBackend(nodes=base.nodes, rate_fn=lambda *a: 1.0, reconfig_cost_s=0.0, rules=rules)
        self.backend.start_at(min((mj.job.submit_time for mj in jobs), default=0.0))
        self._managed: dict[int, ManagedJob] = {}
        for mj in sorted(jobs, key=lambda m: m.job.job_id):
            self.submit(mj)

    def submit(self, mj: ManagedJob) -> None:
        """Put a job in the backend exactly as the test describes it (a pending job not yet started by Slurm)."""
        from slurmplan.sim.backend import SimJob

        job = mj.job
        running = job.state is JobState.RUNNING
        self._managed[job.job_id] = mj
        self.backend.submit_held = not running
        sim = SimJob.like(job, 1e12, req_nodes=job.nodes)
        self.backend.submit(sim)
        self.backend.submit_held = True
        assert sim.state is job.state, f"job {job.job_id} could not be placed as the test said"
        if running:
            sim.start_time = job.start_time
            sim.req_nodes = ()
        sim.held = job.held and not running
        sim.cached = None

    @property
    def jobs(self) -> dict[int, ManagedJob]:
        """Every active job now; assigning ``jobs[id] = mj`` changes its hints and candidates (a refit model)."""
        out = _JobsView(self._managed)
        for job in self.backend.snapshot().jobs:
            mj = self._managed[job.job_id]
            dict.__setitem__(out, job.job_id, ManagedJob(job, mj.hints, mj.candidates, mj.steps_done))
        return out

    def snapshot_cluster(self) -> Cluster:
        snap = self.backend.snapshot().cluster
        for n in snap.nodes:
            assert n.gpus_used <= n.gpus, f"node {n.name} overcommitted: {n.gpus_used} > {n.gpus}"
        return snap

    def apply(self, actions: tuple, now: float) -> None:
        from slurmplan.domain import ActionKind

        if now > self.backend.now:
            self.backend.advance(now)
        kept = [a for a in actions if self.exit_on_signal or a.kind is not ActionKind.SIGNAL]
        for result in self.backend.apply(kept):
            assert result.ok, f"Slurm refused {result.action}: {result.message}"
        self.snapshot_cluster()

    def finish(self, job_id: int) -> None:
        from slurmplan.domain import Action, ActionKind

        (result,) = self.backend.apply([Action(ActionKind.CANCEL, job_id)])
        assert result.ok

    def managed(self) -> tuple[ManagedJob, ...]:
        jobs = self.jobs
        return tuple(jobs[j] for j in sorted(jobs))


def crius_llm_simulation(
    policy: str, num_jobs: int = 150, rate_per_h: float = 60.0, seed: int = 5, hours: float = 3.0
) -> Simulation:
    """A real simulation to watch a tick stage on (not yet run): an LLM trace on the Crius cluster, 300 s rounds and
    30 s ticks, so a test that patches a stage compares it with the plain code on many real ticks."""
    config = LlmTraceConfig(num_jobs=num_jobs, rate_per_h=rate_per_h, seed=seed)
    jobs = llm_trace(config, perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0, max_time_s=hours * 3600.0)
    return Simulation(build_workloads(jobs, spec, None), spec, load_policy(policy), options)


def overwrite_comments_every(monkeypatch, sim: Simulation, every: int) -> None:
    """Every ``every``-th advance of ``sim``'s cluster an admin overwrites the even-numbered running jobs'
    comments: the tick's shortcuts for kept jobs must notice and annotate them again."""
    advance, calls = sim.backend.advance, [0]

    def advance_then_overwrite(t: float):
        done = advance(t)
        calls[0] += 1
        if calls[0] % every == 0:
            for job in sim.backend.running.values():
                if job.job_id % 2 == 0:
                    job.admin_comment, job.cached = "overwritten by an admin", None
        return done

    monkeypatch.setattr(sim.backend, "advance", advance_then_overwrite)


def preset_with(folder: Path, **params: object) -> str:
    """A policy file: the shipped flagship preset with ``params`` set on top (every other value as shipped), for
    tests that need a rule on or off whatever the preset says."""
    text = next(d / "slurmplan.yaml" for d in policy_dirs() if (d / "slurmplan.yaml").is_file()).read_text()
    preset = yaml.safe_load(text)
    preset["params"] = {**preset["params"], **params}
    path = folder / f"slurmplan-{'-'.join(f'{k}-{v}' for k, v in sorted(params.items())) or 'preset'}.yaml"
    path.write_text(yaml.safe_dump(preset))
    return str(path)
