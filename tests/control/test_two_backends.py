"""One pipeline, two backends: the same small workload on the real dev cluster and in the simulated backend.

The real side is the daemon as shipped (``Daemon.tick``: SlurmBackend, SQLite journal, wall clock). The simulated
side is ``pipeline.run_tick`` over a ``SimBackend`` holding the same nodes and the same jobs (same ids, requests,
admin comments, submit times), with the in-memory journal and the real tick's clock. Both must emit the same
actions, job by job, and refuse the same update with the same message: Slurm's rules are declared once
(``slurmplan.rules``) and the simulator enforces them.

Also the regression test of issue 13: a type named only in ``--constraint`` is a preference the daemon may change.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest

from slurmplan.control.observe import SlurmJobSource
from slurmplan.domain import Action, ActionKind, JobState
from slurmplan.pipeline import MemJournal, run_tick
from slurmplan.policy.registry import load_policy
from slurmplan.sim.backend import SimBackend, SimJob
from slurmplan.slurm.backend import SlurmBackend
from tests.control.conftest import SIGNAL_AWARE, Rig

pytestmark = pytest.mark.slurm

HINT = "slurmplan:model=gpt2;gpus={gpus};min={gpus};max={gpus}"


def _node_type(node_list: str) -> str:
    return node_list.rstrip("0123456789[]-,").removesuffix("n")


def _mirror(rig: Rig) -> SimBackend:
    """A SimBackend with the real cluster's nodes and jobs, at the real cluster's present state."""
    slurm = SlurmBackend(env=rig.handle.env)
    snap = slurm.snapshot()
    nodes = tuple(replace(n, gpus_used=0) for n in snap.cluster.nodes)
    sim = SimBackend(nodes=nodes, rate_fn=lambda *a: 1.0, rules=slurm.rules)  # the real Slurm's version's rules
    sim.start_at(snap.time)
    for job in sorted(snap.jobs, key=lambda j: j.job_id):
        if job.state.finished:
            continue
        sim.submit_held = job.held or job.state is not JobState.RUNNING
        sim.submit(
            SimJob.like(
                job,
                1e9,
                typed=bool(job.gpu_type) and not job.gpu_type_preferred,
                req_nodes=job.nodes if job.state is JobState.RUNNING else (),
            )
        )
        assert sim.jobs[job.job_id].state is job.state or job.state is not JobState.RUNNING
    return sim


def _by_job(actions: tuple[Action, ...]) -> dict[int, list[Action]]:
    out: dict[int, list[Action]] = defaultdict(list)
    for a in actions:
        out[a.job_id].append(a)
    return dict(out)


def test_same_workload_same_actions_on_slurm_and_in_the_simulator(rig: Rig) -> None:
    # a T4 node taken by an unmanaged job; four managed jobs: constraint-typed, GRES-typed, untyped, bad hints
    plain = rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:2", seconds=300)
    rig.handle.wait_state(plain, "RUNNING")
    preferred = rig.submit(SIGNAL_AWARE, "--gres=gpu:2", "--constraint=t4", "--comment", HINT.format(gpus=2))
    # types=v100: the job needs its type, so job_submit.lua leaves the request typed (issue 14)
    typed = rig.submit(SIGNAL_AWARE, "--gres=gpu:v100:1", "--comment", HINT.format(gpus=1) + ";types=v100")
    untyped = rig.submit(SIGNAL_AWARE, "--gres=gpu:1", "--comment", HINT.format(gpus=1))
    bad = rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:1", "--hold")
    rig.scontrol("update", f"jobid={bad}", "AdminComment=slurmplan:gpus=zero")
    mine = {plain, preferred, typed, untyped, bad}

    sim = _mirror(rig)  # taken before the real tick changes anything
    slurm = SlurmBackend(env=rig.handle.env)
    if slurm.rules.typed_keeps_type:  # 22.05 (24.11 retypes: tests/slurm/test_rules.py)
        # the same refused update on both (before the tick, both pending): a typed request keeps its type
        refused = Action(ActionKind.UPDATE, typed, gpu_type="a100", gpus_per_node=1)
        (on_slurm,) = slurm.apply([refused])
        (in_sim,) = sim.apply([refused])
        assert not on_slurm.ok and not in_sim.ok
        assert on_slurm.message == in_sim.message
        assert "Slurm 22.05 cannot change the GPU type" in in_sim.message

    real = rig.tick()
    assert real.tick_input is not None and not real.skipped
    sim.now = real.tick_input.now  # same instant: same round stamp and lease in the admin comments
    source = SlurmJobSource(rig.config.managed_partitions)
    simulated = run_tick(
        sim, lambda: sim.now, MemJournal(), load_policy("las"), source, config=rig.config.tick_config()
    )

    real_actions = {j: a for j, a in _by_job(real.actions).items() if j in mine}
    sim_actions = {j: a for j, a in _by_job(simulated.actions).items() if j in mine}
    assert set(real_actions) == {preferred, typed, untyped, bad}  # the plain job is left alone on both
    for job in sorted(real_actions):
        assert sim_actions.get(job) == real_actions[job], f"job {job}"
    assert real.applied.failed == simulated.applied.failed == 0
    assert all(r.ok for r in simulated.results)
    # the typed job stays on its type; the constraint-typed one may move (the policy's fastest type for gpt2)
    typed_update = [a for a in real_actions[typed] if a.kind is ActionKind.UPDATE and a.gpu_type]
    assert all(a.gpu_type == "v100" for a in typed_update)


def test_constraint_type_is_a_preference_the_daemon_moves_when_its_type_is_full(rig: Rig) -> None:
    """Issue 13: ``--gres=gpu:2 --constraint=t4`` with the T4s full and the A100s free starts on A100."""
    fillers = [rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:2", seconds=300) for _ in range(2)]
    for f in fillers:
        rig.handle.wait_state(f, "RUNNING")
    job = rig.submit(SIGNAL_AWARE, "--gres=gpu:2", "--constraint=t4", "--comment", HINT.format(gpus=2), seconds=60)
    rec = rig.job(job)
    assert rec["features"] == "t4" and rec["tres_per_node"] == "gres:gpu:2"

    report = rig.tick()
    (managed,) = [m for m in report.tick_input.jobs if m.job.job_id == job]
    assert managed.job.gpu_type == "t4" and managed.job.gpu_type_preferred  # read as a preference ...
    assert {c.cell.gpu_type for c in managed.candidates} > {"t4"}  # ... which restricts nothing
    decided = {a.job_id: a for a in report.assignments}[job]
    assert decided.cell is not None and decided.cell.gpu_type == "a100"
    started = rig.handle.wait_state(job, "RUNNING", "COMPLETED", timeout=40)
    assert _node_type(started["nodes"]) == "a100"
    assert started["tres_per_node"] == "gres:gpu:2"  # still untyped: moved through the node feature
