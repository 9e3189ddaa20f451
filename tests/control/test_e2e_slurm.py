"""End to end on the local Slurm cluster: real sbatch, real SlurmBackend, real policy, mechanism and perf.

The cluster runs site/job_submit.lua, which holds a hinted job at submit (priority 0) until the daemon decides.
Most tests also pass ``--hold`` so that they do not depend on it; the first one relies on the plugin alone.
"""

from __future__ import annotations

import time

import pytest

from slurmplan.control.journal import ActionStatus
from slurmplan.domain import ActionKind
from slurmplan.formats import BAD_HINTS_PREFIX
from tests.control.conftest import GRACE_S, ROUND_S, SIGNAL_AWARE, SIGNAL_DEAF, Rig

pytestmark = pytest.mark.slurm

HINT = "slurmplan:model=gpt2;gpus={gpus};min={gpus};max={gpus}"
"""Fixed size: single-node jobs (the dev cluster's virtual nodes share one host; see the report on 2-node jobs)."""


def _signalled(rig: Rig, job: int) -> bool:
    with rig.journal() as j:
        return any(r.action.kind is ActionKind.SIGNAL for r in j.intents.rows(job_id=job))


def _node_type(node_list: str) -> str:
    return node_list.rstrip("0123456789[]-,").removesuffix("n")


def test_held_jobs_start_on_the_preferred_type_others_untouched_journal_matches(rig: Rig) -> None:
    plain = rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:1", seconds=60)
    with pytest.raises(RuntimeError, match="gpus"):  # job_submit.lua refuses a bad hint at submit time
        rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:1", "--comment", "slurmplan:gpus=zero", seconds=60)
    bad = rig.submit(SIGNAL_AWARE, "--gres=gpu:t4:1", seconds=60)
    rig.scontrol("update", f"jobid={bad}", "AdminComment=slurmplan:gpus=zero")  # corrupted after submit
    managed = rig.submit(SIGNAL_AWARE, "--gres=gpu:2", "--comment", HINT.format(gpus=2), seconds=6)
    held = rig.job(managed)
    assert held["job_state"] == "PENDING" and held["priority"] == 0  # held by job_submit.lua
    assert held["admin_comment"] == HINT.format(gpus=2)  # the canonical hints, copied by job_submit.lua
    rig.handle.wait_state(plain, "RUNNING")

    report = rig.tick()
    assert report.managed == 1 and [o.job.job_id for o in report.refused] == [bad]
    decided = {a.job_id: a for a in report.assignments}[managed]
    assert decided.cell is not None and decided.cell.gpu_type == "a100"  # the fastest type for gpt2, all free
    rec = rig.handle.wait_state(managed, "RUNNING", "COMPLETED")
    assert _node_type(rec["nodes"]) == "a100" and rec["nodes"] in decided.nodes
    assert rec["admin_comment"].startswith(f"{HINT.format(gpus=2)} || slurmplan: a100x{decided.cell.gpus}")

    untouched = rig.job(plain)
    assert untouched["admin_comment"] == "" and untouched["tres_per_node"] == "gres:gpu:t4:1"
    left_alone = rig.job(bad)
    assert left_alone["admin_comment"].startswith(f"slurmplan:gpus=zero || {BAD_HINTS_PREFIX}")
    assert left_alone["tres_per_node"] == "gres:gpu:t4:1"

    rig.handle.wait_state(managed, "COMPLETED", timeout=40)
    rig.tick()
    with rig.journal() as j:
        assert all(r.job_id != plain for r in (row.action for row in j.intents.rows()))
        assert j.jobs.get(managed)["state"] == "completed" and j.jobs.get(managed)["finished_at"] is not None
        for row in j.jobs.all():
            rec = rig.handle.squeue_job(row["job_id"])
            assert rec is not None and row["state"] == rec["job_state"].lower(), row
        assert {r.status for r in j.intents.rows(job_id=managed)} == {ActionStatus.CONFIRMED}
        assert [e["event"] for e in j.events.of(bad)] == ["bad-hints"]


def test_job_moves_between_types_through_signal_requeue_release(rig: Rig) -> None:
    job = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:4", "--comment", HINT.format(gpus=4), seconds=300)
    rig.tick()
    first = rig.handle.wait_state(job, "RUNNING")
    assert _node_type(first["nodes"]) == "a100"
    # The operator drains the a100 nodes: the next round must move the job elsewhere.
    rig.scontrol("update", "nodename=a100n[1-2]", "state=drain", "reason=maintenance")
    # Between rounds the job's lease stands; at the next round (<= ROUND_S) it gets the checkpoint signal.
    rig.until(lambda: _signalled(rig, job), timeout=ROUND_S + 20, what="checkpoint signal", tick=True)
    rig.handle.wait_for(job, lambda r: r["job_state"] == "PENDING", what="requeued by its own trap")
    rig.until(lambda: rig.job(job)["job_state"] == "RUNNING", timeout=60, what="restart elsewhere", tick=True)
    moved = rig.job(job)
    assert _node_type(moved["nodes"]) in ("v100", "t4") and moved["restart_cnt"] == 1
    with rig.journal() as j:
        kinds = [r.action.kind for r in j.intents.rows(job_id=job)]
        assert kinds.count(ActionKind.SIGNAL) == 1 and kinds.count(ActionKind.REQUEUE_HOLD) == 0
        cells = [d["cell"] for d in j.decisions.of(job) if d["cell"]]
        assert cells[0].startswith("a100") and cells[-1].startswith(_node_type(moved["nodes"]))
    # RUNNING in squeue can come before the restarted script has written its first line: wait for it.
    output = rig.path / f"{job}.out"
    rig.until(lambda: output.read_text().count("start ") == 2, timeout=20, what="the restarted script's output")
    assert "checkpoint at" in output.read_text()


def test_job_ignoring_the_signal_is_requeued_held_after_grace(rig: Rig) -> None:
    job = rig.submit(SIGNAL_DEAF, "--hold", "--gres=gpu:4", "--comment", HINT.format(gpus=4), seconds=300)
    rig.tick()
    assert _node_type(rig.handle.wait_state(job, "RUNNING")["nodes"]) == "a100"
    rig.scontrol("update", "nodename=a100n[1-2]", "state=drain", "reason=maintenance")
    rig.until(lambda: _signalled(rig, job), timeout=ROUND_S + 20, what="checkpoint signal", tick=True)
    time.sleep(GRACE_S + 1)
    assert rig.job(job)["job_state"] == "RUNNING"  # it ignored the signal
    report = rig.tick()
    assert ActionKind.REQUEUE_HOLD in [a.kind for a in report.actions if a.job_id == job]
    rig.handle.wait_for(job, lambda r: r["job_state"] == "PENDING", what="forced requeue-hold")
    with rig.journal() as j:
        forced = [r for r in j.intents.rows(job_id=job) if r.action.kind is ActionKind.REQUEUE_HOLD]
        assert len(forced) == 1 and forced[0].status in (ActionStatus.APPLIED, ActionStatus.CONFIRMED)


def test_daemon_command_ticks_until_sigterm_and_explain_reads_it(rig: Rig) -> None:
    import os
    import signal
    import subprocess
    import sys

    config = rig.path / "slurmplan.yaml"
    config.write_text(f"database: {rig.config.database}\nreport_dir: {rig.path}/reports\nround_s: 20\npolicy: las\n")
    job = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", HINT.format(gpus=1), seconds=120)
    env = {**os.environ, **rig.handle.env}
    argv = [sys.executable, "-m", "slurmplan.cli", "daemon", "--interval", "1", "--config", str(config)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rig.handle.wait_state(job, "RUNNING", timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"job {job:>6}: scheduled" in out
    # issue 29 item 12: it says that it stops, and when it stopped
    assert "SIGTERM: stopping after the current tick" in err and "slurmplan daemon: stopped after" in err
    assert "s after the signal" in err
    explained = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "explain", str(job), "--config", str(config)],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "scheduled" in explained and "candidates" in explained and "estimated" in explained
    assert "share X" in explained
