"""``trace import --sacct`` on real sacct output of the later Slurm versions: captured from a dev cluster with
MariaDB and slurmdbd in the Debian 13 root (Slurm 24.11) and the Debian forky root (Slurm 26.05) with
``[SLURMPLAN_DEBIAN_SUITE=forky] bash site/quickstart/debian13.sh run bash tests/history/data/capture.sh``.
Until these captures the later shapes were only made from 22.05's records (``test_sacct_import.py``); the real
output showed one they had missed: a job that never started has ``time.start`` 4294967294 (Slurm's NO_VAL), not 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.history.convert import ImportReport, to_trace
from slurmplan.history.sacct import parse_sacct
from slurmplan.history.speeds import default_speeds
from slurmplan.sim.trace import read_trace

DATA = Path(__file__).parent / "data"
VERSIONS = ("24.11", "26.05")
pytestmark = pytest.mark.parametrize("version", VERSIONS)


def _ids(version: str) -> dict[str, int]:
    """Each captured job's role -> its id (``capture.sh``)."""
    return json.loads((DATA / f"ids_{version}.json").read_text())


def _started(version: str) -> list[int]:
    return sorted(v for k, v in _ids(version).items() if k not in ("begin", "held"))


def _parsed(name: str):
    return parse_sacct((DATA / name).read_text())


def _by_id(name: str) -> dict:
    parsed = _parsed(name)
    assert not parsed.skipped, parsed.skipped
    return {j.job_id: j for j in parsed.jobs}


def test_json_golden_records(version):
    IDS, STARTED = _ids(version), _started(version)  # noqa: N806
    jobs = _by_id(f"all_{version}.json")
    assert sorted(jobs) == STARTED
    typed, multi = jobs[IDS["typed"]], jobs[IDS["multi"]]
    assert (typed.gpus, typed.gpu_type, typed.nodes, typed.state) == (2, "a100", 1, "COMPLETED")
    assert (multi.gpus, multi.gpu_type, multi.nodes) == (8, "a100", 2)
    assert multi.start >= typed.end  # it waited for the a100 node the typed job held
    assert jobs[IDS["cpu_only"]].gpus == 0
    assert jobs[IDS["failed"]].state == "FAILED"
    assert jobs[IDS["untyped"]].gpu_type == "v100"  # asked for an untyped GPU: the type comes from the allocation
    timeout = jobs[IDS["timeout"]]
    assert (timeout.state, timeout.time_limit_s) == ("TIMEOUT", 60.0) and timeout.end - timeout.start >= 60
    account = jobs[IDS["account"]]
    assert (account.account, account.partition, account.time_limit_s) == ("beta", "debug", 3600.0)
    assert jobs[IDS["weird"]].name == "weird|name"
    assert jobs[IDS["model"]].admin_comment.startswith("slurmplan:model=bert-large;gpus=2;batch=64;class=guaranteed ||")
    assert jobs[IDS["typed"]].time_limit_s == 7 * 86400  # the partition's limit


def test_a_job_that_never_started_has_no_start_time(version):
    IDS = _ids(version)  # noqa: N806
    never = _parsed(f"never_{version}.json")
    assert sorted(j.job_id for j in never.jobs) == sorted([IDS["begin"], IDS["held"]])
    assert all(j.start is None and not j.started for j in never.jobs)  # not 4294967294: NO_VAL is no time
    report = ImportReport()
    assert to_trace(never.jobs, default_speeds(), report) == []
    assert report.never_started == sorted([IDS["begin"], IDS["held"]])


def test_parsable2_reads_the_same_jobs_as_json(version):
    js = _by_id(f"all_{version}.json")
    parsed = _parsed(f"site_{version}.txt")
    assert parsed.fmt == "parsable2" and not parsed.skipped
    assert sorted(j.job_id for j in parsed.jobs) == _started(version)
    for job in parsed.jobs:
        other = js[job.job_id]
        for field in ("state", "submit", "start", "end", "gpus", "gpu_type", "nodes", "account", "user"):
            assert getattr(job, field) == getattr(other, field), (job.job_id, field)
        assert job.admin_comment == other.admin_comment  # the decision's own '|' joined back


def test_conversion_counts_every_record_somewhere(version):
    IDS, STARTED = _ids(version), _started(version)  # noqa: N806
    report = ImportReport()
    jobs = to_trace(_parsed(f"all_{version}.json").jobs, default_speeds(), report)
    assert report.records == len(STARTED) and report.cpu_only == [IDS["cpu_only"]]
    assert report.kept == len(STARTED) - 1 == len(jobs)
    model = {j.job_id: j for j in jobs}[IDS["model"]]
    assert model.model == "bert-large" and model.job_class.value == "guaranteed"
    assert (model.gpu_type, model.gpus) == ("v100", 2)


def test_cli_imports_and_the_trace_simulates_on_the_cluster_it_came_from(version, tmp_path: Path, capsys):
    STARTED = _started(version)  # noqa: N806
    out = tmp_path / "site.jsonl"
    assert main(["trace", "import", "--sacct", "--from", str(DATA / f"all_{version}.json"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert len(read_trace(out)) == len(STARTED) - 1
    args = ["simulate", "--trace", str(out), "--cluster", "a100:2x4,v100:2x4,t4:2x2", "--policy", "slurm_fifo"]
    assert main([*args, "--json", "--tick", "0"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == summary["finished"] == len(STARTED) - 1
