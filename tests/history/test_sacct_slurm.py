"""``trace import --sacct`` running the real sacct. The session's dev cluster runs without slurmdbd: the import
must fail with sacct's own words and write nothing. (The import from a cluster with accounting is
``test_sacct_import.py`` on output captured from one, and the round trip in ``test_round_trip.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.slurm.sacct import HistoryQuery

pytestmark = pytest.mark.slurm


def test_argv_asks_for_the_range_partitions_and_accounts():
    argv = HistoryQuery("2026-01-01", "now", ("gpu", "debug"), ("alpha",)).argv()
    assert argv[:6] == ["sacct", "--allusers", "--starttime", "2026-01-01", "--endtime", "now"]
    assert argv[6:] == ["--partition", "gpu,debug", "--accounts", "alpha", "--json"]
    parsable = HistoryQuery(parsable=True).argv()
    assert "--parsable2" in parsable and parsable[-1].endswith(",AdminComment")


def test_without_slurmdbd_the_import_fails_naming_sacct_and_writes_nothing(devcluster, tmp_path: Path, capsys,
                                                                        monkeypatch):  # fmt: skip
    for key, value in devcluster.env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "site.jsonl"
    assert main(["trace", "import", "--sacct", "--start", "2026-01-01", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "sacct" in err and "failed" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
