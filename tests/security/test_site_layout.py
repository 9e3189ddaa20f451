"""Issue 24 items 8 and 9: the state layout the daemon and the controller hooks share, and the interpreter root's
services run. Real files below a prefix, a real unprivileged user as the owner of an unsafe interpreter copy.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import unixusers

from slurmplan.control.hook import HookEvent, record
from slurmplan.slurm.site_layout import check_state_layout, ensure_state_layout, untrusted_interpreter


@pytest.fixture
def root_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="slurmplan-layout-"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_install_lays_out_folders_both_writers_can_use_and_check_verifies_them(root_dir: Path) -> None:
    reason = unixusers.unusable_reason()
    if reason:
        pytest.skip(reason)
    service = unixusers.ensure_user("slurmplan-t2")
    hooks = unixusers.ensure_user()  # stands for SlurmUser
    assert check_state_layout(root_dir, service.name, hooks.name)  # nothing there yet: reported
    ensure_state_layout(root_dir, service.name, hooks.name)
    assert check_state_layout(root_dir, service.name, hooks.name) == []
    state = root_dir / "var/lib/slurmplan"
    st = state.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (service.uid, 0o2771)
    assert stat.S_IMODE((state / "reports").stat().st_mode) == 0o1733
    # SlurmUser's hook can write the log folder (group) ...
    log = root_dir / "var/log/slurmplan/hook.log"
    wrote = unixusers.run_as(hooks, ["sh", "-c", f"echo started >> {log}"])
    assert wrote.returncode == 0, wrote.stderr
    # ... and never creates the daemon's journal in the daemon's folder
    record(HookEvent(5, "job-start", 1.0, {}), state / "journal.db")  # as root: the folder is not root's
    assert not (state / "journal.db").exists()
    os.chmod(state / "reports", 0o777)
    assert any("reports" in p for p in check_state_layout(root_dir, service.name, hooks.name))


def test_an_interpreter_or_package_others_can_change_is_refused(root_dir: Path) -> None:
    reason = unixusers.unusable_reason()
    if reason:
        pytest.skip(reason)
    user = unixusers.ensure_user()
    assert untrusted_interpreter() == ""  # this machine's Python and package: root's
    venv = root_dir / "venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python3"
    shutil.copy2(Path(sys.executable).resolve(), python)
    os.chown(root_dir / "venv", user.uid, user.gid)  # a user's virtualenv
    assert "owned by uid" in untrusted_interpreter(str(python))
    os.chown(root_dir / "venv", 0, 0)
    os.chmod(venv, 0o777)
    assert "written by every user" in untrusted_interpreter(str(python))
    pkg = root_dir / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("")
    os.chmod(pkg / "mod.py", 0o666)
    assert "mod.py" in untrusted_interpreter(package=pkg)
