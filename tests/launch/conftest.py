"""Every launcher test writes only inside temporary directories: throughput reports go there (the launcher's
default is a system folder inside a job, the working directory outside one), and so does anything a run writes
relative to the working directory. The session-wide fixture covers module-scoped fixtures that train (they are
set up before any function-scoped fixture); the per-test one gives each test its own folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_writes_stay_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("launch-session")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURMPLAN_REPORT_DIR", str(folder / "reports"))
        mp.chdir(folder)
        yield


@pytest.fixture(autouse=True)
def _writes_stay_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMPLAN_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.chdir(tmp_path)
