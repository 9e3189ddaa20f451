"""Issue 24 item 3 and issue 29 item 7: report files are hostile, and each cluster reads only its own.

Real files in a real shared folder, written by a real unprivileged user (``tests/unixusers.py``) and by root;
the daemon's ingestion (:func:`ingest_reports`) into a real journal. The end-to-end case on the cluster (a job
whose report says ``Infinity`` does not stall its model) is in ``test_hostile_reports_e2e.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import unixusers

from slurmplan.control.journal import Journal
from slurmplan.control.reports import MAX_LINE_BYTES, MAX_READ_BYTES, ingest_reports, load_measurements
from slurmplan.domain import Job

LINE = {"model": "resnet50", "gpu_type": "a100", "gpus": 2, "nodes": 1, "plan": {"dp": 2}, "samples_per_s": 900.0}


@pytest.fixture
def user() -> unixusers.UnixUser:
    reason = unixusers.unusable_reason()
    if reason:
        pytest.skip(reason)
    return unixusers.ensure_user()


@pytest.fixture
def folder() -> Iterator[Path]:
    """A shared report folder (sticky, world-writable) outside pytest's 0700 temporary directories."""
    root = Path(tempfile.mkdtemp(prefix="slurmplan-reports-"))
    os.chmod(root, 0o755)
    reports = root / "reports"
    reports.mkdir()
    os.chmod(reports, 0o1777)
    yield reports
    shutil.rmtree(root, ignore_errors=True)


def _write_as(user: unixusers.UnixUser, path: Path, data: bytes) -> None:
    proc = unixusers.run_as(user, ["sh", "-c", f"cat >> {path}"], input=data, text=False)
    assert proc.returncode == 0, proc.stderr


def _line(**changes: object) -> bytes:
    return (json.dumps({**LINE, **changes}) + "\n").encode()


def test_only_the_jobs_own_user_may_report_for_it(user, folder, tmp_path) -> None:
    jobs = {7: Job(7, user=user.name), 8: Job(8, user="root")}
    _write_as(user, folder / "c1.7.jsonl", _line())  # the user's own job: read
    _write_as(user, folder / "c1.8.jsonl", _line(samples_per_s=1.0))  # root's job, written by the user: ignored
    with Journal(tmp_path / "j.db") as j:
        assert ingest_reports(j, folder, jobs, "c1") == 1
        assert [(m.job_id, m.samples_per_s) for m in load_measurements(j)] == [(7, 900.0)]


def test_a_link_is_not_followed(user, folder, tmp_path) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(_line())
    proc = unixusers.run_as(user, ["ln", "-s", str(secret), str(folder / "c1.7.jsonl")])
    assert proc.returncode == 0, proc.stderr
    with Journal(tmp_path / "j.db") as j:
        assert ingest_reports(j, folder, {7: Job(7, user=user.name)}, "c1") == 0


@pytest.mark.parametrize(
    "bad",
    [
        b'{"model": "resnet50", "gpu_type": "a100", "gpus": 2, "plan": {"dp": 2}, "samples_per_s": Infinity}\n',
        b'{"model": "resnet50", "gpu_type": "a100", "gpus": 2, "plan": {"dp": 2}, "samples_per_s": NaN}\n',
        _line(samples_per_s=1e308),
        _line(memory_gb=1e300),
        _line(gpus=10**12, plan={"dp": 1}),
        _line(job_id=8),  # another job's number in this job's file
        b"\xff\xfe not json\n",
        _line(stack="megatron; rm -rf /"),  # not a framework the model knows
        _line(stack=["megatron"]),
        _line(stack={"megatron": 1}),
        b'{"model": "resnet50", "gpu_type": "a100", "gpus": 2, "plan": {"dp": 2}, "samples_per_s": 1.0, '
        b'"stack": "\xffmegatron"}\n',  # not UTF-8
    ],
)
def test_bad_numbers_and_foreign_job_ids_are_skipped(user, folder, tmp_path, bad) -> None:
    _write_as(user, folder / "c1.7.jsonl", bad + _line())
    with Journal(tmp_path / "j.db") as j:
        assert ingest_reports(j, folder, {7: Job(7, user=user.name)}, "c1") == 1  # the good line after it stands
        assert [m.samples_per_s for m in load_measurements(j)] == [900.0]


def test_reads_are_bounded_and_a_newline_less_file_is_not_read_again(user, folder, tmp_path) -> None:
    jobs = {7: Job(7, user=user.name)}
    _write_as(user, folder / "c1.7.jsonl", b"x" * (3 * MAX_READ_BYTES))  # no newline at all
    with Journal(tmp_path / "j.db") as j:
        for tick in range(3):
            assert ingest_reports(j, folder, jobs, "c1") == 0
            assert j.measurements.offsets()["c1.7.jsonl"] == (tick + 1) * MAX_READ_BYTES  # consumed, not re-read
        _write_as(user, folder / "c1.7.jsonl", b"\n" + _line())
        assert ingest_reports(j, folder, jobs, "c1") == 1
    short = folder / "c1.9.jsonl"
    _write_as(user, short, b"y" * (MAX_LINE_BYTES // 2))  # a half-written line: waits, offset stays
    with Journal(tmp_path / "k.db") as j:
        assert ingest_reports(j, folder, {9: Job(9, user=user.name)}, "c1") == 0
        assert "c1.9.jsonl" not in j.measurements.offsets()


def test_each_cluster_reads_only_its_own_reports(user, folder, tmp_path) -> None:
    """Issue 29 item 7: clusters c1 and c2 on one host share the folder and both have a job 7."""
    _write_as(user, folder / "c1.7.jsonl", _line(samples_per_s=100.0))
    _write_as(user, folder / "c2.7.jsonl", _line(samples_per_s=200.0))
    jobs = {7: Job(7, user=user.name)}
    with Journal(tmp_path / "c1.db") as j1, Journal(tmp_path / "c2.db") as j2:
        assert ingest_reports(j1, folder, jobs, "c1") == 1
        assert ingest_reports(j2, folder, jobs, "c2") == 1
        assert [m.samples_per_s for m in load_measurements(j1)] == [100.0]
        assert [m.samples_per_s for m in load_measurements(j2)] == [200.0]
    with Journal(tmp_path / "unknown.db") as j:  # cluster unknown (no job seen): no cluster's file is read
        assert ingest_reports(j, folder, jobs, None) == 0
