"""Faults on the real cluster, each with nothing lost: killed daemon, slurmctld restart, failing scontrol,
two ticks at once, corrupted and missing hints.

Where a fault must strike at one exact line (between writing the intents and applying them), a subclass of
the real ``SlurmBackend`` causes it for real at that point: the process really dies by SIGKILL, slurmctld is
really stopped, scontrol really fails on a broken configuration. Nothing is mocked.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmplan.control.journal import ActionStatus
from slurmplan.control.lock import TickLock
from slurmplan.domain import Action, ActionKind, ActionResult
from slurmplan.formats import BAD_HINTS_PREFIX
from slurmplan.slurm.backend import SlurmBackend
from tests.control.conftest import SIGNAL_AWARE, Rig

pytestmark = pytest.mark.slurm

HINT = "slurmplan:model=gpt2;gpus=1;min=1;max=1"


def _held_job(rig: Rig, seconds: int = 120) -> int:
    return rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", HINT, seconds=seconds)


class _DiesOnApply(SlurmBackend):
    def apply(self, actions: list[Action]) -> list[ActionResult]:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


def _tick_and_die(rig: Rig) -> None:
    rig.tick(_DiesOnApply(env=rig.handle.env))


def test_sigkill_between_intent_and_apply_then_restart(rig: Rig) -> None:
    job = _held_job(rig)
    child = multiprocessing.get_context("fork").Process(target=_tick_and_die, args=(rig,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert rig.job(job)["job_state"] == "PENDING"  # nothing reached Slurm
    with rig.journal() as j:
        intents = j.intents.rows(job_id=job)
    assert intents and {r.status for r in intents} == {ActionStatus.INTENT}

    report = rig.tick()  # the restarted daemon
    assert report.rolled_forward.applied == len(intents) and report.actions == ()
    rec = rig.handle.wait_state(job, "RUNNING")
    update = next(r.action for r in intents if r.action.kind is ActionKind.UPDATE)
    assert update.nodelist is not None and rec["nodes"] == update.nodelist[0]
    with rig.journal() as j:
        assert [r.id for r in j.intents.rows(job_id=job)] == [r.id for r in intents]  # decided once, applied once


class _ControllerRestartsDuringApply(SlurmBackend):
    """Stops the real slurmctld right before the first action, as a crash or an admin restart would."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(env=rig.handle.env, timeout=20)
        self.rig = rig

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        ctld = next(d for d in self.rig.handle.cluster.status().daemons if d.name == "slurmctld")
        if ctld.running and ctld.pid:
            os.kill(ctld.pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _alive(ctld.pid):
                time.sleep(0.2)
        return super().apply(actions)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_slurmctld_restarted_during_a_tick(rig: Rig) -> None:
    job = _held_job(rig)
    try:
        report = rig.tick(_ControllerRestartsDuringApply(rig))
        assert report.applied.applied == 0 and report.applied.retry >= 1
        skipped = rig.tick()  # slurmctld still down: the tick observes nothing and decides nothing
        assert skipped.skipped
    finally:
        rig.handle.cluster.up(timeout=120)
    # Restarting took a while: intents younger than a round are rolled forward, older ones are superseded by
    # the new round's decision. Either way the job starts and no intent is left behind.
    report = rig.tick()
    assert report.rolled_forward.applied + report.rolled_forward.stale >= 2
    rig.until(lambda: rig.job(job)["job_state"] == "RUNNING", tick=True, what="job started after the restart")
    with rig.journal() as j:
        rows = j.intents.rows(job_id=job)
        assert ActionStatus.INTENT not in {r.status for r in rows}
        assert all(r.status != ActionStatus.FAILED or "superseded" in r.message for r in rows)
        assert any(t["error"] and "observe" in t["error"] for t in j.ticks.recent())


def test_failing_scontrol_is_journaled_and_retried(rig: Rig, tmp_path: Path) -> None:
    job = _held_job(rig)
    conf = tmp_path / "broken.conf"
    conf.write_text("ClusterName=broken\n")  # no SlurmctldHost: scontrol fails at once ("Unable to process ...")
    broken = SlurmBackend(env={**rig.handle.env, "SLURM_CONF": str(conf)})

    class SnapshotOkApplyBroken(SlurmBackend):
        def apply(self, actions: list[Action]) -> list[ActionResult]:
            return broken.apply(actions)

    report = rig.tick(SnapshotOkApplyBroken(env=rig.handle.env))
    assert report.applied.retry == 1 and rig.job(job)["job_state"] == "PENDING"
    with rig.journal() as j:
        first = j.intents.rows(job_id=job)[0]
        assert first.status == ActionStatus.INTENT and "configuration file" in first.message
    rig.tick()
    rig.handle.wait_state(job, "RUNNING")


def _cli(rig: Rig, config: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **rig.handle.env}
    return subprocess.Popen(
        [sys.executable, "-m", "slurmplan.cli", *args, "--config", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_ticks_at_once(rig: Rig, tmp_path: Path) -> None:
    config = tmp_path / "slurmplan.yaml"
    config.write_text(f"database: {rig.config.database}\nreport_dir: {tmp_path}/reports\nround_s: 20\npolicy: las\n")
    with TickLock(rig.config.lock_path):
        proc = _cli(rig, config, "tick")
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "another slurmplan tick is running" in err

    job = _held_job(rig)
    procs = [_cli(rig, config, "tick") for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 or "another slurmplan tick" in err for rc, err in results), results
    rig.handle.wait_state(job, "RUNNING")
    with rig.journal() as j:
        kinds = [r.action.kind for r in j.intents.rows(job_id=job)]
    assert kinds.count(ActionKind.UPDATE) == 1 and kinds.count(ActionKind.RELEASE) == 1


def test_corrupted_then_repaired_hint_and_missing_hint(rig: Rig) -> None:
    import dataclasses

    rig.config = dataclasses.replace(rig.config, managed_partitions=("debug",))
    job = _held_job(rig)
    rig.scontrol("update", f"jobid={job}", "AdminComment=slurmplan:model=gpt2;gpus=x")
    # managed by its partition, no hints: scheduled from its own request (issue 29: never held forever)
    bare = rig.submit(SIGNAL_AWARE, "--partition=debug", "--gres=gpu:t4:1", seconds=60)

    report = rig.tick()
    assert {o.job.job_id for o in report.refused} == {job}
    corrupted = rig.job(job)
    assert corrupted["job_state"] == "PENDING"  # left alone: still held by its user, not released
    assert corrupted["admin_comment"].startswith(f"slurmplan:model=gpt2;gpus=x || {BAD_HINTS_PREFIX}")
    assert BAD_HINTS_PREFIX not in rig.job(bare)["admin_comment"]
    with rig.journal() as j:
        assert j.jobs.get(job)["hint_error"] and [e["event"] for e in j.events.of(job)] == ["bad-hints"]

    rig.scontrol("update", f"jobid={job}", f"AdminComment={HINT}")
    report = rig.tick()
    assert job not in {o.job.job_id for o in report.refused}
    rig.until(lambda: rig.job(job)["job_state"] == "RUNNING", tick=True, what="repaired job started")
