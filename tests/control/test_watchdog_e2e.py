"""Fail-open on the real cluster: a real ``slurmplan daemon`` killed by SIGKILL, the watchdog and job_submit.lua
let Slurm run every managed job, and the restarted daemon manages again; no job is lost or started twice.

The cluster runs the site's job_submit.lua rendered the way ``slurmplan site install`` renders it, with the
heartbeat path of this test's daemon; ``cred_expire=10`` keeps requeued jobs' begin time short (see
tests/control/conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmplan.control.heartbeat import read_heartbeat
from slurmplan.control.journal import Journal
from slurmplan.control.state_store import load_state
from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.site import render_heartbeat, render_job_submit
from tests.conftest import ClusterHandle, _require_slurm
from tests.control.conftest import REPO, SIGNAL_AWARE

pytestmark = pytest.mark.slurm

LIMIT_S = 12
HINT = "slurmplan:model=gpt2;gpus=1;min=1;max=1"


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterHandle, Path]]:
    """A cluster whose job_submit.lua reads ``<state>/heartbeat``, and the daemon config beside it."""
    _require_slurm()
    from slurmplan.slurm.devcluster import DevCluster
    from slurmplan.slurm.devconf import ClusterPaths
    from slurmplan.slurm.devlayout import load_layout

    state = tmp_path_factory.mktemp("ops-state").resolve()
    config = state / "slurmplan.yaml"
    config.write_text(
        f"database: {state}/journal.db\nreport_dir: {state}/reports\nround_s: 10\ngrace_s: 3\ninterval_s: 1\n"
        f"fail_open_after_s: {LIMIT_S}\npolicy: las\n"
    )
    lua = state / "job_submit.lua"
    text = render_job_submit((REPO / "site/job_submit.lua").read_text(), ())
    lua.write_text(render_heartbeat(text, state / "heartbeat"))
    root = tmp_path_factory.mktemp("ops-cluster").resolve()
    sock = ClusterPaths(root).munge_socket
    overrides = {
        "slurm_conf_extra": [f"AuthInfo=socket={sock},cred_expire=10", "JobSubmitPlugins=lua"],
        "conf_files": {"job_submit.lua": str(lua)},
    }
    cluster = DevCluster(load_layout(None, overrides), root)
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        yield handle, config
        handle.cancel_all()
    finally:
        cluster.down()


def _cli(handle: ClusterHandle, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **handle.env}
    return subprocess.run([sys.executable, "-m", "slurmplan.cli", *args], env=env, capture_output=True, text=True)


def _start_daemon(handle: ClusterHandle, config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **handle.env}
    out = log.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "slurmplan.cli", "daemon", "--config", str(config), "--quiet"],
        env=env,
        stdout=out,
        stderr=out,
    )


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s")
        time.sleep(0.5)


def _held(rec: dict[str, Any]) -> bool:
    return rec["job_state"] == "PENDING" and rec.get("state_reason") in ("JobHeldUser", "JobHeldAdmin")


def test_sigkilled_daemon_fails_open_then_manages_again(ops: tuple[ClusterHandle, Path]) -> None:
    handle, config = ops
    state = config.parent
    heartbeat = state / "heartbeat"
    out = str(state / "%j.out")

    def submit(*opts: str) -> int:
        return handle.sbatch(SIGNAL_AWARE.format(seconds=300), "-o", out, "--open-mode=append", *opts)

    daemon = _start_daemon(handle, config, state / "daemon1.log")
    try:
        _wait(lambda: read_heartbeat(heartbeat) is not None, 120, "first heartbeat")
        a = submit("--gres=gpu:1", "--comment", HINT)
        d = submit("--gres=gpu:1", "--comment", HINT)
        handle.wait_state(a, "RUNNING", timeout=90)  # held at submit, released by the daemon
        handle.wait_state(d, "RUNNING", timeout=90)
    finally:
        daemon.send_signal(signal.SIGKILL)  # mid-operation: it ticks every second
        daemon.wait(30)
    assert daemon.returncode == -signal.SIGKILL

    # The daemon is dead but its heartbeat is still fresh: a new job is held, and the watchdog does nothing yet.
    c = submit("--gres=gpu:1", "--comment", HINT)
    assert _held(handle.wait_state(c, "PENDING"))
    # A move interrupted: the daemon had requeue-held d and decided 2 GPUs for it, but died before applying that.
    handle.run("scontrol", "requeuehold", str(d), check=True)
    handle.wait_for(d, _held, 30, "requeue-held")
    with Journal(state / "journal.db") as j:
        move = Action(ActionKind.UPDATE, d, gpus_per_node=2, node_count=1, reason="test: decided move")
        j.intents.add(0, 0, [move], time.time())
    early = json.loads(_cli(handle, "watchdog", "--config", str(config), "--json").stdout)
    assert early["fail_open"] is False and early["released"] == []
    assert _held(handle.wait_state(c, "PENDING"))

    beat = read_heartbeat(heartbeat)
    assert beat is not None
    time.sleep(max(0.0, beat.time + LIMIT_S + 2 - time.time()))
    e = submit("--gres=gpu:1", "--comment", HINT)  # job_submit.lua: stale heartbeat, so not held
    handle.wait_state(e, "RUNNING", timeout=60)

    proc = _cli(handle, "watchdog", "--config", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["fail_open"] is True and sorted(report["released"]) == sorted([c, d])
    assert report["restored"] == [d]
    handle.wait_state(c, "RUNNING", timeout=60)
    rec = handle.wait_state(d, "RUNNING", timeout=90)  # after its requeue begin time
    assert "gpu:2" in str(rec.get("tres_per_node")), rec.get("tres_per_node")
    again = json.loads(_cli(handle, "watchdog", "--config", str(config), "--json").stdout)
    assert again["fail_open"] is True and again["released"] == []  # idempotent
    health = _cli(handle, "health", "--config", str(config), "--json")
    assert health.returncode == 2 and json.loads(health.stdout)["fail_open"]["released"] == sorted([c, d])
    with Journal(state / "journal.db") as j:
        assert [ev["event"] for ev in j.events.of(d)][-1:] == ["fail-open-release"]
        memory = load_state(j).jobs[a]  # a ran under the daemon: its in-flight memory is dropped, its time kept
        assert memory.sent == "" and memory.signalled_at is None and memory.first_seen is not None

    daemon = _start_daemon(handle, config, state / "daemon2.log")
    try:
        _wait(lambda: (b := read_heartbeat(heartbeat)) is not None and b.age() < 5, 120, "fresh heartbeat")
        f = submit("--gres=gpu:1", "--comment", HINT)
        handle.wait_for(f, lambda r: r["job_state"] == "RUNNING" or _held(r), 30, "submitted")
        handle.wait_state(f, "RUNNING", timeout=90)  # held again at submit, released by the daemon
        back = json.loads(_cli(handle, "watchdog", "--config", str(config), "--json").stdout)
        assert back["fail_open"] is False and back["cleared"] is True
        with Journal(state / "journal.db") as j:
            assert j.jobs.get(f) is not None and j.jobs.get(f)["managed"] == 1
            assert {a, c, d, e} <= {r["job_id"] for r in j.jobs.all() if r["managed"]}
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)

    for job in (a, c, d, e, f):  # none lost; each start is one Slurm (re)start, never a duplicate launch
        rec = handle.squeue_job(job)
        assert rec is not None and rec["job_state"] in ("RUNNING", "PENDING", "COMPLETED"), (job, rec)
        starts = [ln for ln in Path(out.replace("%j", str(job))).read_text().splitlines() if ln.startswith("start")]
        assert len(starts) == rec["restart_cnt"] + 1 or (rec["job_state"] == "PENDING" and starts), (job, starts)
