"""Issue 24 item 12: steps of the wall clock neither fail open early, nor keep a dead daemon's heartbeat fresh,
nor keep stale intents alive.

A clock step cannot be caused on the dev cluster without stepping the shared host's clock for everyone, so the
step is simulated (said plainly): the heartbeat file is written with a wall time far from the real one while its
monotonic reading is the real one, exactly what a daemon writes just before a step. Readers are the real
watchdog code and the real job_submit.lua under a lua interpreter.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from slurmplan.control.act import roll_forward
from slurmplan.control.heartbeat import boot_id, read_heartbeat, uptime, write_heartbeat
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.domain import Action, ActionKind

LUA = Path(__file__).resolve().parents[2] / "site" / "job_submit.lua"
DRIVER = """
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, log_info = function() end, log_user = function() end,
          log_debug = function() end }
dofile(arg[1])
io.write(tostring(slurmplan_hints.daemon_down(arg[2])))
"""


def _beat(path: Path, wall: float, *, up: float | None = None, boot: str | None = None) -> None:
    write_heartbeat(path, tick_id=1, round_index=1, stale_after_s=60, now=wall)
    text = path.read_text()
    if up is not None:
        text = text.replace(text.split("uptime=")[1].split("\n")[0], f"{up:.3f}")
    if boot is not None:
        text = text.replace(f"boot={boot_id()}", f"boot={boot}")
    path.write_text(text)


def _lua_down(path: Path, tmp: Path) -> bool:
    lua = shutil.which("lua5.1") or shutil.which("lua5.3") or shutil.which("lua")
    if lua is None:
        pytest.skip("no lua interpreter")
    driver = tmp / "driver.lua"
    driver.write_text(DRIVER)
    return subprocess.run([lua, str(driver), str(LUA), str(path)], capture_output=True, text=True).stdout == "true"


def test_a_forward_step_does_not_fail_open(tmp_path: Path) -> None:
    import time

    beat = tmp_path / "heartbeat"
    _beat(beat, time.time() - 3600, up=uptime())  # written just now, then the wall clock jumped an hour ahead
    assert read_heartbeat(beat).age() < 60
    assert not _lua_down(beat, tmp_path)


def test_a_backward_step_does_not_keep_a_dead_daemons_heartbeat_fresh(tmp_path: Path) -> None:
    import time

    beat = tmp_path / "heartbeat"
    _beat(beat, time.time() + 3600, up=uptime() - 600)  # 10 min ago, then the clock went back an hour
    assert read_heartbeat(beat).age() > 590
    assert _lua_down(beat, tmp_path)


def test_another_boot_falls_back_to_the_wall_clock(tmp_path: Path) -> None:
    import time

    beat = tmp_path / "heartbeat"
    _beat(beat, time.time() - 600, boot="00000000-0000-0000-0000-000000000000")
    assert read_heartbeat(beat).age() > 590
    assert _lua_down(beat, tmp_path)


def test_an_intent_from_the_future_is_stale(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        j.intents.add(1, 1, [Action(ActionKind.RELEASE, 5)], 10_000.0)  # written at 10000 s ...
        report = roll_forward(j, backend=None, now=6_400.0, max_age_s=360.0)  # ... the clock is back at 6400 s
        assert report.applied == 0
        assert [r.status for r in j.intents.rows()] == [ActionStatus.FAILED]
