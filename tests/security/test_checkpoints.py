"""Issue 24 item 5: a checkpoint folder is loaded weights-only, and only when it is the job owner's own.

The attacker is a real second user (``tests/unixusers.py``) who plants files; the loader is this process (the
job's owner). Real files, real ``torch.save``/``torch.load``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import unixusers

from slurmplan.launch.checkpoint import STATE_FILE, CheckpointError, CheckpointStore
from slurmplan.launch.determinism import RngContext


class _Payload:
    """Pickled, it runs ``touch`` when unpickled: what a planted checkpoint would do with weights_only=False."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.call, (["touch", str(self.marker)],))


@pytest.fixture
def shared() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="slurmplan-ckpt-"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_pickled_payload_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "ckpt")
    good = store.save({"model": {"w": torch.ones(2)}, "step": 1}, step=1)
    marker = tmp_path / "pwned"
    torch.save({"model": _Payload(marker)}, good / STATE_FILE)  # the newest checkpoint now carries code
    with pytest.raises(CheckpointError, match="cannot be read"):
        store.load_newest_intact()
    assert not marker.exists(), "pickled code ran"


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    ctx = RngContext.seeded(7)
    store = CheckpointStore(tmp_path / "ckpt")
    store.save({"rng": ctx.to_state()}, step=3)
    _, state = store.load_newest_intact()
    back = RngContext.from_state(state["rng"])
    back.restore()
    import numpy as np

    first = np.random.rand()
    ctx.restore()
    assert np.random.rand() == first


def test_a_folder_another_user_owns_or_others_can_write_is_not_loaded(shared: Path) -> None:
    reason = unixusers.unusable_reason()
    if reason:
        pytest.skip(reason)
    other = unixusers.ensure_user()
    store = CheckpointStore(shared / "ckpt")
    store.save({"model": {"w": torch.ones(2)}}, step=1)
    os.chmod(shared / "ckpt", 0o777)  # others can write the folder: refused
    with pytest.raises(CheckpointError, match="written by other users"):
        store.load_newest_intact()
    os.chmod(shared / "ckpt", 0o755)
    assert store.load_newest_intact() is not None
    planted = shared / "planted"  # the other user's own folder, with a newer checkpoint the job might be pointed at
    planted.mkdir()
    os.chown(planted, other.uid, other.gid)
    theirs = CheckpointStore(planted)
    unixusers.run_as(other, ["mkdir", str(planted / "step-00000009")])
    torch.save({"model": {"w": torch.zeros(2)}}, planted / "step-00000009" / STATE_FILE)
    (planted / "step-00000009" / "complete.json").write_text("{}")
    with pytest.raises(CheckpointError, match="owned by uid"):
        theirs.load_newest_intact()
