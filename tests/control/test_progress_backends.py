"""Progress on both backends (issue 23): the daemon learns a job's steps from the launcher's reports, so a
step-aware policy decides on real Slurm as it does in the simulator.

The real side is the daemon as shipped (``Daemon.tick``) with the flagship, acting; the job's report line is
written with the launcher's own ``append_report`` into the daemon's report folder (what a running job does). The
simulated side is ``pipeline.run_tick`` over a ``SimBackend`` mirroring the same jobs at the same instant, with the
progress the simulator itself holds (``SimJob.work_done``). Both must emit the same actions, job by job: the long
job that is 95 % done keeps its GPUs, the shorter newcomer waits. Without the reported progress (the daemon's
``progress`` returned 0 before issue 23) the flagship stops the long job instead, which the test also checks.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmplan.control.observe import SlurmJobSource, default_candidates
from slurmplan.domain import ActionKind, Hints, JobState, Measurement, Plan, Reason
from slurmplan.launch.reports import append_report
from slurmplan.pipeline import MemJournal, run_tick
from slurmplan.policy.registry import load_policy
from slurmplan.slurm.backend import SlurmBackend
from tests.control.conftest import SIGNAL_AWARE, Rig
from tests.control.test_two_backends import _by_job, _mirror

pytestmark = pytest.mark.slurm

HINT = "slurmplan:model=gpt2;gpus=2;min=2;max=2;types=t4;steps={steps}"


class _SimProgress(SlurmJobSource):
    """The simulator's own progress for each job (steps done), with hints and prices read as the daemon reads them."""

    def __init__(self, partitions, sim) -> None:
        super().__init__(partitions)
        self.sim = sim

    def progress(self, job) -> float:
        return self.sim.jobs[job.job_id].work_done


def _t4x2_steps_per_s(rig: Rig) -> float:
    cluster = SlurmBackend(env=rig.handle.env).snapshot().cluster
    cands = default_candidates(Hints(managed=True, model="gpt2", gpus=2, gpu_types=("t4",)), cluster, ())
    best = max(c.throughput for c in cands if c.cell.gpu_type == "t4" and c.cell.gpus == 2)
    batch = next(c.plan.global_batch for c in cands if c.plan is not None)
    return best / batch


def test_a_step_aware_policy_decides_the_same_on_slurm_and_in_the_simulator(rig: Rig) -> None:
    rig.config = replace(rig.config, policy="slurmplan", round_s=1.0)  # every tick a round: the policy decides
    filler = rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:2", seconds=300)  # unmanaged: one T4 node left
    rig.handle.wait_state(filler, "RUNNING")
    rate = _t4x2_steps_per_s(rig)
    total = int(rate * 8 * 3600)  # 8 h of work on t4x2
    long = rig.submit(SIGNAL_AWARE, "--gres=gpu:2", "--comment", HINT.format(steps=total))
    rig.until(lambda: rig.job(long)["job_state"] == "RUNNING", what="the long job running", tick=True)
    done = int(total * 0.95)  # 24 min left; the newcomer needs 1 h
    plan = Plan(dp=2)
    report = Measurement(
        "gpt2",
        "t4",
        2,
        plan,
        rate * 8,
        job_id=long,
        time=None,
        extra={"step": float(done), "checkpoint_step": float(done), "total_steps": float(total)},
    )
    assert append_report(report, rig.config.report_dir / f"{long}.jsonl")
    newcomer = rig.submit(SIGNAL_AWARE, "--gres=gpu:2", "--comment", HINT.format(steps=int(rate * 3600)))
    rig.until(lambda: rig.job(newcomer)["job_state"] == "PENDING", what="the newcomer pending")

    sim = _mirror(rig)
    sim.jobs[long].work_done = float(done)
    real = rig.tick()
    assert real.tick_input is not None and not real.skipped
    (seen,) = [m for m in real.tick_input.jobs if m.job.job_id == long]
    assert seen.steps_done == done  # SlurmJobSource.progress: the reported step reached the tick
    sim.now = real.tick_input.now
    config = rig.config.tick_config()
    simulated = run_tick(sim, lambda: sim.now, MemJournal(), load_policy("slurmplan"),
                         _SimProgress(rig.config.managed_partitions, sim), config=config)  # fmt: skip
    mine = {long, newcomer}
    real_actions = {j: a for j, a in _by_job(real.actions).items() if j in mine}
    sim_actions = {j: a for j, a in _by_job(simulated.actions).items() if j in mine}
    assert real_actions == sim_actions
    assert not any(a.kind is ActionKind.SIGNAL for a in real_actions.get(long, []))  # 95 % done: keeps its GPUs
    assert not any(a.kind is ActionKind.RELEASE for a in real_actions.get(newcomer, []))  # the newcomer waits
    decided = {a.job_id: a.reason for a in real.assignments}
    assert decided[long] is Reason.KEPT and decided[newcomer] is Reason.WAITING
    assert {a.job_id: a.reason for a in simulated.assignments}[long] is Reason.KEPT

    # the same instant without the progress (what the daemon saw before issue 23): the long job is stopped
    blind = _SimProgress(rig.config.managed_partitions, sim)
    sim.jobs[long].work_done = 0.0
    again = _mirror(rig)
    again.now = sim.now
    unaware = run_tick(again, lambda: again.now, MemJournal(), load_policy("slurmplan"), blind, config=config)
    stopped = {a.job_id: a.reason for a in unaware.assignments}
    assert stopped[long] is Reason.PREEMPTED and stopped[newcomer] is Reason.SCHEDULED
    assert rig.job(long)["job_state"] == JobState.RUNNING.name
