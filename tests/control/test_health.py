"""``slurmplan health``: graded facts from the heartbeat, the journal (read-only) and Slurm; exit 0/1/2."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmplan.control.health import CRITICAL, OK, WARNING, check_health, lock_holder
from slurmplan.control.lock import TickLock
from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.backend import SlurmBackend
from tests.control.conftest import SIGNAL_AWARE, Rig


def test_no_daemon_ever_is_critical_and_creates_nothing(tmp_path: Path) -> None:
    config = tmp_path / "slurmplan.yaml"
    config.write_text(f"database: {tmp_path}/state/journal.db\n")
    proc = subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "health", "--config", str(config), "--no-slurm", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status_name"] == "CRITICAL" and any("no heartbeat" in p for p in out["problems"])
    assert not (tmp_path / "state").exists()  # the journal is never created by a health check


def test_lock_holder_is_read_without_taking_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "j.db.lock"
    assert lock_holder(path) is None and not path.exists()
    with TickLock(path):
        assert f"pid {os.getpid()}" in (lock_holder(path) or "")
    assert lock_holder(path) is None


@pytest.mark.slurm
def test_health_after_real_ticks(rig: Rig) -> None:
    rig.config = dataclasses.replace(rig.config, interval_s=5.0)
    backend = SlurmBackend(env=rig.handle.env)
    job = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", "slurmplan:model=gpt2;gpus=1", seconds=60)
    rig.tick()
    rig.handle.wait_state(job, "RUNNING")
    db = Path(rig.config.database)
    before = db.stat().st_mtime_ns

    h = check_health(rig.config, backend)
    assert h.status == OK, h.problems
    assert h.last_tick_age_s is not None and h.last_tick_age_s < 30 and h.last_round is not None
    assert h.held_jobs == 0 and h.fail_open is None and h.lock_holder is None
    assert db.stat().st_mtime_ns == before  # read-only

    held = rig.submit(SIGNAL_AWARE, "--hold", "--gres=gpu:1", "--comment", "slurmplan:model=gpt2;gpus=1", seconds=60)
    rig.handle.wait_state(held, "PENDING")
    with rig.journal() as j:  # an intent nobody applied (a tick killed before acting)
        j.intents.add(0, 0, [Action(ActionKind.RELEASE, held)], time.time())
    later = check_health(rig.config, backend, now=time.time() + 45)  # heartbeat 45 s old, limit 3 rounds = 60 s
    assert later.status == WARNING, later.problems
    assert later.held_jobs == 1 and later.oldest_held_s is not None and later.oldest_held_s >= 45
    assert later.oldest_unconfirmed_intent_s is not None and later.oldest_unconfirmed_intent_s >= 45
    down = check_health(rig.config, backend, now=time.time() + 90)
    assert down.status == CRITICAL and any("daemon down" in p for p in down.problems)
    with TickLock(rig.config.lock_path):
        assert f"pid {os.getpid()}" in (check_health(rig.config, None).lock_holder or "")
