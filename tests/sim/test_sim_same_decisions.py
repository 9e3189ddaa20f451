"""The simulator is a second backend for the daemon's tick, never a second scheduler."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from slurmplan.policy.registry import load_policy
from slurmplan.tick import ManagedJob, TickInput, decide

from .simkit import hours_job, make_sim


def test_sim_imports_nothing_from_the_slurm_backend():
    code = textwrap.dedent(
        """
        import json, sys
        import slurmplan.sim.commands, slurmplan.sim.runner, slurmplan.sim.engine, slurmplan.sim.report
        from slurmplan.sim.runner import RunSpec, simulate
        from slurmplan.sim.trace import TraceJob
        job = TraceJob(0, 0.0, 1, job_type="A3C", total_steps=100.0)
        result = simulate(RunSpec((job,), "v100:1", "las"))
        print(json.dumps([result.jobs[0].state, sorted(m for m in sys.modules if m.startswith("slurmplan.slurm"))]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    state, slurm_modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert state == "completed"
    assert slurm_modules == []


def test_each_tick_equals_decide_called_directly_on_the_same_snapshot(table):
    jobs = [hours_job(table, i, 0.3 + 0.2 * (i % 3), arrival=200.0 * i, gpus=1 + (i % 2)) for i in range(8)]
    sim = make_sim(table, jobs, "v100:2x2,k80:2x2", "las", cost=78.0)
    policy = load_policy("las")
    compared = 0
    for _ in range(40):
        before = sim.state
        out = sim.step()
        # what the daemon would build from the same snapshot: the backend's view plus hints and candidates
        snap = sim.last_input
        managed = tuple(
            ManagedJob(
                mj.job, sim.workloads[mj.job.job_id].hints, sim.workloads[mj.job.job_id].candidates, mj.steps_done
            )
            for mj in snap.jobs
        )
        again = decide(TickInput(snap.now, snap.cluster, managed, snap.config), policy, before)
        assert again.actions == out.actions
        assert again.assignments == out.assignments
        compared += len(out.actions)
        if not sim.backend.jobs and not sim.arrivals_left:
            break
        sim.backend.advance(sim.next_event())
    assert compared > 0


def test_snapshot_is_what_the_backend_holds(table):
    jobs = [hours_job(table, 0, 1.0), hours_job(table, 1, 1.0)]
    sim = make_sim(table, jobs, "v100:1", "las")
    sim.step()
    snap = sim.backend.snapshot()
    running = [j for j in snap.jobs if j.state.active]
    assert len(running) == 1
    assert snap.cluster.node(running[0].nodes[0]).gpus_used == 1
    assert sum(j.held for j in snap.jobs) == 1


def test_the_daemons_own_tick_over_the_sim_backend_decides_exactly_as_the_simulator(table, tmp_path):
    """The real daemon (control/, shadow mode, SQLite journal for its state) observes the simulated cluster
    before each simulator tick; both must emit the same actions on every tick of the run."""
    from dataclasses import replace

    from slurmplan.control.config import DaemonConfig
    from slurmplan.control.runner import Daemon
    from slurmplan.domain import Hints

    jobs = [hours_job(table, i, 0.3 + 0.2 * (i % 4), arrival=150.0 * i) for i in range(8)]
    sim = make_sim(table, jobs, "v100:2,p100:2,k80:2", "las", cost=78.0)
    # what the daemon knows of these jobs: managed by their partition, the request from Slurm, no model hints
    for w in list(sim.workloads.values()):
        sim.workloads[w.job_id] = replace(w, hints=Hints(gpus=w.trace.gpus))
    candidates = sim.workloads[0].candidates  # every job is the same job type
    config = DaemonConfig(
        managed_partitions=("gpu",), shadow=True, database=tmp_path / "journal.db", report_dir=tmp_path
    )
    daemon = Daemon(config, backend=sim.backend, policy=load_policy("las"), candidates_fn=lambda h, c, m: candidates)
    ticks = actions = 0
    while sim.backend.jobs or sim.arrivals_left:
        sim.submit_arrivals()
        report = daemon.tick()
        out = sim.step()
        assert tuple(report.actions) == out.actions, f"tick {ticks} at t={sim.backend.now}"
        ticks += 1
        actions += len(out.actions)
        sim.backend.advance(sim.next_event())
        assert ticks < 500
    assert actions > 10
    assert sorted(sim.backend.finished) == list(range(8))


def _decisions(sim) -> list:
    """Every tick's actions and (job, reason, cell, nodes, priority, share) until the trace is done."""
    seen = []
    while True:
        out = sim.step()
        seen.append((sim.backend.now, out.actions, [(a.job_id, a.reason, a.cell, a.nodes) for a in out.assignments]))
        seen.append([(a.priority, a.share) for a in out.assignments])
        if not sim.backend.jobs and not sim.arrivals_left:
            return seen
        sim.backend.advance(sim.next_event())
        assert len(seen) < 2000


def test_speed_paths_do_not_move_a_decision(table, monkeypatch):
    """The simulator's speed paths (LAS without an LP when every job fits on its best column, and the
    mechanism's per-tick memos) change no action, reason, configuration or node on any tick: the same run with
    the LP always solved and every memo emptied before each tick decides the same. Priorities and shares agree
    to round-off (the LP's vertex may carry 1e-15 where the fast path has exact zeros and ones)."""
    import numpy as np

    from slurmplan.mechanism import actions as mech_actions
    from slurmplan.mechanism import columns as mech_columns
    from slurmplan.mechanism import engine as mech_engine
    from slurmplan.mechanism import layout as mech_layout
    from slurmplan.mechanism import placement as mech_placement
    from slurmplan.mechanism import problem as mech_problem
    from slurmplan.policy import las as las_module
    from slurmplan.policy import lp as lp_module

    jobs = [hours_job(table, i, 0.2 + 0.3 * (i % 3), arrival=400.0 * i, gpus=1 + (i % 2)) for i in range(10)]
    answered: list[bool] = []  # per round: did the fast path answer (else the LP ran)
    real = las_module.uncontended

    def counted(idx, score):
        x = real(idx, score)
        answered.append(x is not None)
        return x

    monkeypatch.setattr(las_module, "uncontended", counted)
    fast = _decisions(make_sim(table, jobs, "v100:1x4,p100:1x2,k80:1x2", "las", cost=78.0))
    assert answered.count(True) >= 3 and answered.count(False) >= 3, answered  # both paths ran

    def forget_everything(step):
        def step_without_memos():
            mech_problem._last_nodes.value = None
            mech_problem._last_layout.value = None
            mech_problem._last_usage.value = None
            mech_problem._last_pool.value = None
            mech_problem._last_cols.value = None
            mech_problem._last_shapes.value = None
            mech_problem._fixed_rows.clear()
            mech_columns._dense.value = None
            mech_columns._last_matrix.value = None
            mech_columns._last_columns.value = ({}, {}, ())
            mech_engine._last_aligned.value = None
            mech_engine._last_columns.value = None
            mech_actions._kept_as_written.clear()
            mech_actions._held_as_written.clear()
            lp_module._host_rows.clear()
            mech_placement._kept_rows.clear()
            mech_placement._kept_plans.clear()
            mech_layout._kept_requests.clear()
            return step()

        return step_without_memos

    monkeypatch.setattr(las_module, "uncontended", lambda idx, score: None)
    sim = make_sim(table, jobs, "v100:1x4,p100:1x2,k80:1x2", "las", cost=78.0)
    sim.step = forget_everything(sim.step)
    slow = _decisions(sim)
    assert len(fast) == len(slow)
    for a, b in zip(fast[0::2], slow[0::2], strict=True):
        assert a == b
    for a, b in zip(fast[1::2], slow[1::2], strict=True):
        np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float), atol=1e-9)


def test_acting_daemon_and_simulator_apply_a_refused_update_the_same_way(table, tmp_path):
    """The daemon acting (SQLite journal, ``control.act.apply_rows``) on one simulated cluster and the simulator
    (``MemJournal``) on an identical one, with every UPDATE of one job refused, emit the same actions on every
    tick and leave both clusters in the same state: the job whose UPDATE failed is never released by either
    (the simulator used to run the RELEASE after the refused UPDATE). The refusal is injected by wrapping
    ``apply`` (a fault the simulated backend cannot produce by itself: it refuses only what Slurm refuses)."""
    from dataclasses import replace

    from slurmplan.control.config import DaemonConfig
    from slurmplan.control.runner import Daemon
    from slurmplan.domain import ActionKind, ActionResult, Hints

    jobs = [hours_job(table, i, 0.3 + 0.2 * (i % 4), arrival=150.0 * i) for i in range(8)]
    sims = [make_sim(table, jobs, "v100:2,p100:2,k80:2", "las", cost=78.0) for _ in range(2)]
    refused_job: list[int] = []
    refusals = [0, 0]
    for k, sim in enumerate(sims):
        for w in list(sim.workloads.values()):
            sim.workloads[w.job_id] = replace(w, hints=Hints(gpus=w.trace.gpus))
        real_apply = sim.backend.apply

        def refusing_apply(actions, real_apply=real_apply, k=k):
            out = []
            for a in actions:
                if a.kind is ActionKind.UPDATE and not refused_job:
                    refused_job.append(a.job_id)  # the first job the run updates: all its UPDATEs fail
                if a.kind is ActionKind.UPDATE and a.job_id in refused_job:
                    refusals[k] += 1
                    out.append(ActionResult(a, False, "Requested operation not supported on this job (injected)"))
                else:
                    out.extend(real_apply([a]))
            return out

        sim.backend.apply = refusing_apply
    sim, other = sims
    candidates = other.workloads[0].candidates
    config = DaemonConfig(managed_partitions=("gpu",), database=tmp_path / "journal.db", report_dir=tmp_path)
    daemon = Daemon(config, backend=other.backend, policy=load_policy("las"), candidates_fn=lambda h, c, m: candidates)
    ticks = released_after_refusal = 0
    while set(sim.backend.jobs) - set(refused_job) or sim.arrivals_left:  # the refused job can never start
        sim.submit_arrivals()
        other.submit_arrivals()
        report = daemon.tick()
        out = sim.step()
        assert tuple(report.actions) == out.actions, f"tick {ticks} at t={sim.backend.now}"
        assert report.applied.applied == sum(r.ok for r in report.results)
        views = [{j.job_id: (j.state, j.held, j.gpu_type) for j in s.backend.snapshot().jobs} for s in sims]
        assert views[0] == views[1], f"tick {ticks}"
        if refused_job and refused_job[0] in views[0]:
            released_after_refusal += not views[0][refused_job[0]][1]
        ticks += 1
        t = sim.next_event()
        sim.backend.advance(t)
        other.backend.advance(t)
        assert ticks < 500
    assert refused_job and refusals[0] > 0 and refusals[1] >= refusals[0]  # the daemon also retries its intents
    assert released_after_refusal == 0
    for s in sims:
        assert sorted(s.backend.finished) == sorted(set(range(8)) - set(refused_job))
        assert s.backend.jobs[refused_job[0]].held


def test_simulated_slurm_enforces_the_rules_of_the_chosen_version(table):
    """``--slurm-version`` (``SimOptions.slurm_version``, default the newest) picks the rules the simulated
    Slurm enforces: 22.05 refuses to retype a typed request with Slurm's reason, 24.11 retypes it."""
    from slurmplan.domain import Action, ActionKind
    from slurmplan.rules import NEWEST
    from slurmplan.sim.engine import SimOptions

    assert SimOptions().slurm_version == NEWEST.label == "24.11"
    for version, ok in (("22.05", False), ("24.11", True)):
        sim = make_sim(table, [hours_job(table, 0, 1.0, gpus=1)], "v100:1,k80:1", "las", slurm_version=version)
        sim.submit_arrivals()
        job = sim.backend.jobs[0]
        job.typed = True
        (result,) = sim.backend.apply([Action(ActionKind.UPDATE, 0, "k80" if job.gpu_type == "v100" else "v100", 1)])
        assert result.ok is ok, (version, result)
        if not ok:
            assert "Slurm 22.05 cannot change the GPU type" in result.message
