"""``compare --executor slurm`` on the dev cluster: every policy's simulation runs as a Slurm job (submitit),
and the table, the per-job CSVs and the results are those of ``--executor local``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.sim.trace import write_trace

from .simkit import hours_job

pytestmark = pytest.mark.slurm

TIMING = ("wall_s", "decide_s")


def _compare(trace: Path, out: Path, capsys, *extra: str) -> list[dict]:
    args = ["compare", "--trace", str(trace), "--cluster", "v100:1,k80:2", "--policies", "las,slurm_fifo,fifo"]
    assert main([*args, "--json", "--no-progress", "--out", str(out), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_slurm_executor_gives_the_local_results(devcluster, tmp_path: Path, capsys, monkeypatch, table):
    for key, value in devcluster.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(devcluster.jobs_dir)
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, i, 0.5 + 0.25 * i, arrival=300.0 * i) for i in range(5)], trace)
    local = _compare(trace, tmp_path / "local", capsys, "--workers", "1")
    sweep = tmp_path / "sweep"
    remote = _compare(trace, tmp_path / "slurm", capsys, "--executor", "slurm", "--partition", "debug",
                      "--sweep-dir", str(sweep))  # fmt: skip
    assert [s["policy"] for s in remote] == ["las", "slurm_fifo", "fifo"]
    for a, b in zip(local, remote, strict=True):
        assert {k: v for k, v in a.items() if k not in TIMING} == {k: v for k, v in b.items() if k not in TIMING}
    for policy in ("las", "slurm_fifo", "fifo"):
        rows = [list(csv.reader((tmp_path / d / f"jobs_{policy}.csv").open())) for d in ("local", "slurm")]
        assert rows[0] == rows[1]
    # the simulations ran as Slurm jobs of the debug partition: submitit left one log per task
    logs = list(sweep.glob("*/*_log.out"))
    assert len(logs) == 3
    accounting = devcluster.run("squeue", "--states=all", "--json").stdout
    assert "slurmplan-sim" in accounting and '"partition": "debug"' in accounting


def test_an_unknown_executor_is_refused_naming_the_choices(tmp_path: Path, capsys, table):
    trace = tmp_path / "t.jsonl"
    write_trace([hours_job(table, 0, 1.0)], trace)
    args = ["compare", "--trace", str(trace), "--cluster", "v100:1", "--policies", "las", "--executor", "k8s"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "--executor" in err and "local" in err and "slurm" in err
