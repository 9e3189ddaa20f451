"""The fail-open parts without a cluster: the heartbeat file, and job_submit.lua reading it in a real lua.

The lua side runs site/job_submit.lua in the lua5.3/lua5.1 interpreter with a stub ``slurm`` table (as
tests/integration/hint_driver.lua does), calling ``slurm_job_submit`` on a heartbeat the Python side wrote.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from slurmplan.control.heartbeat import read_heartbeat, write_heartbeat
from slurmplan.slurm.site import render_heartbeat

ROOT = Path(__file__).resolve().parents[2]
LUAS = [path for name in ("lua5.1", "lua5.3") if (path := shutil.which(name))]

DRIVER = """
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_user = function() end,
          log_debug = function() end }
dofile(arg[1])
local job = { comment = "slurmplan:model=gpt2;gpus=1", spank_job_env = {} }
local rc = slurm_job_submit(job, {}, 1000)
local H = slurmplan_hints
io.write(tostring(rc), " ", tostring(job.priority), " ", tostring(H.daemon_down(H.HEARTBEAT_FILE)))
"""


def test_heartbeat_round_trip_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "state" / "heartbeat"
    assert read_heartbeat(path) is None
    write_heartbeat(path, tick_id=7, round_index=3, stale_after_s=90, now=1000.0)
    write_heartbeat(path, tick_id=8, round_index=3, stale_after_s=90, now=1010.0)
    beat = read_heartbeat(path)
    assert beat is not None and (beat.tick_id, beat.round_index, beat.time) == (8, 3, 1010.0)
    assert beat.age(1050.0) == 40.0 and not beat.stale(1100.0) and beat.stale(1100.5)
    assert [p.name for p in path.parent.iterdir()] == ["heartbeat"]  # no temporary file left behind
    path.write_text("time=garbage\n")
    assert read_heartbeat(path) is None


@pytest.mark.skipif(not LUAS, reason="needs the lua5.1 (or lua5.3) interpreter")
@pytest.mark.parametrize("lua", LUAS)
@pytest.mark.parametrize(("age_s", "held"), [(5, True), (200, False), (None, False), ("garbled", False)], ids=str)
def test_job_submit_lua_holds_only_while_the_daemon_ticks(tmp_path: Path, lua: str, age_s: object, held: bool) -> None:
    beat = tmp_path / "heartbeat"
    if isinstance(age_s, int):
        write_heartbeat(beat, tick_id=1, round_index=1, stale_after_s=60, now=time.time() - age_s)
        assert read_heartbeat(beat) is not None and read_heartbeat(beat).stale() is not held  # type: ignore[union-attr]
    elif age_s == "garbled":
        beat.write_text("nonsense\n")
    script = tmp_path / "job_submit.lua"
    script.write_text(render_heartbeat((ROOT / "site/job_submit.lua").read_text(), beat))
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    out = subprocess.run([lua, str(driver), str(script)], capture_output=True, text=True, check=True, timeout=30)
    rc, priority, down = out.stdout.split()
    assert rc == "0"
    assert (priority == "0") is held and (down == "true") is not held


@pytest.mark.skipif(not LUAS, reason="needs the lua5.1 (or lua5.3) interpreter")
def test_unrendered_job_submit_lua_always_holds(tmp_path: Path) -> None:
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    out = subprocess.run(
        [LUAS[0], str(driver), str(ROOT / "site/job_submit.lua")], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", "0", "false"]


MODIFY_DRIVER = """
slurm = { SUCCESS = 0, ERROR = -1, log_info = function() end, log_user = function() end,
          log_debug = function() end }
dofile(arg[1])
local rec = { job_id = 5, priority = 0, admin_comment = "slurmplan:model=gpt2;gpus=1" }
for _, uid in ipairs({ 0, 4242, 1000 }) do
  io.write(tostring(slurm_job_modify({ priority = 4294967294 }, rec, {}, uid)), " ")
end
"""


@pytest.mark.skipif(not LUAS, reason="needs the lua5.1 (or lua5.3) interpreter")
def test_the_daemons_service_user_may_release_a_held_job(tmp_path: Path) -> None:
    text = (ROOT / "site/job_submit.lua").read_text().replace("H.DAEMON_UID = nil", "H.DAEMON_UID = 4242", 1)
    (tmp_path / "job_submit.lua").write_text(text)
    (tmp_path / "driver.lua").write_text(MODIFY_DRIVER)
    out = subprocess.run(
        [LUAS[0], str(tmp_path / "driver.lua"), str(tmp_path / "job_submit.lua")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["0", "0", "-1"]  # root and the service user may; the job's owner may not
