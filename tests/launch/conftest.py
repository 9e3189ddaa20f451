"""Every launcher test writes only inside its temporary directory: throughput reports go there (the launcher's
default inside a job is a system folder), and so does anything a run writes relative to the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _writes_stay_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMPLAN_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.chdir(tmp_path)
