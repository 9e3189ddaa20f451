"""``explain`` shows the job's progress and predicted finish (from its launcher's report lines), when the next round
comes, and Slurm's state now next to the journal's (issue 29 items 9 and 11). Its progress is the journal's, which
the daemon ingests from the same report lines that ``slurmplan status`` reads the tail of (one reader each)."""

from __future__ import annotations

import json
import os
import pwd
import time
from dataclasses import asdict
from pathlib import Path

from slurmplan.cli import main
from slurmplan.control.explain import LiveView, explain_job, format_explanation
from slurmplan.control.journal import Journal
from slurmplan.control.reports import ingest_reports
from slurmplan.domain import Job
from slurmplan.progress import JobProgress, progress_text, read_progress
from tests.control.test_commands import journal_setup  # noqa: F401  # the fixture: a real tick's journal


def _report(folder: Path, job_id: int, *lines: dict | bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{job_id}.jsonl", "ab") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else (json.dumps(line) + "\n").encode())


def test_progress_rate_and_finish_from_the_newest_two_lines_bad_lines_skipped(tmp_path: Path) -> None:
    _report(tmp_path, 5, {"step": 100, "time": 1000.0, "total_steps": 1000}, b"\xff garbage\n", b"[1, 2]\n",
            {"step": 200, "time": 1050.0, "checkpoint_step": 150, "total_steps": 1000})  # fmt: skip
    p = read_progress(tmp_path / "5.jsonl")
    assert p == JobProgress(200, 1050.0, 150, 1000, 2.0)
    assert p.finish_time() == 1050.0 + 800 / 2.0
    text = progress_text(p, now=1060.0)
    assert "step 200/1000 (20.0%)" in text and "checkpoint at step 150" in text and "in 6 min" in text
    _report(tmp_path, 5, {"step": 150, "time": 1100.0, "total_steps": 1000})  # restarted from its checkpoint
    assert read_progress(tmp_path / "5.jsonl").steps_per_s is None  # no rate across a restart
    _report(tmp_path, 5, b'{"step": 999, "time": 1200')  # a line still being written is not read
    assert read_progress(tmp_path / "5.jsonl").step == 150
    assert read_progress(tmp_path / "missing.jsonl") is None


def _ingest(folder: Path, db: Path, job_id: int, *steps: dict) -> None:
    """Report lines as the launcher writes them (a measurement with progress fields), ingested as a tick does."""
    line = {"model": "m", "gpu_type": "a100", "gpus": 2, "plan": {}, "samples_per_s": 5.0}
    _report(folder, job_id, *({**line, **s} for s in steps))
    with Journal(db) as j:  # the file's owner runs the job, as the daemon checks
        ingest_reports(j, folder, {job_id: Job(job_id, user=pwd.getpwuid(os.getuid()).pw_name)})


def test_explain_shows_progress_next_round_and_the_live_state(journal_setup, tmp_path: Path, capsys) -> None:  # noqa: ANN001, F811
    cfg, db = journal_setup
    now = time.time()
    _report(tmp_path / "reports", 11, {"step": 10, "time": now - 60, "total_steps": 100})
    with Journal(db, readonly=True) as j:  # explain reads the journal: a report not ingested yet is not shown
        assert explain_job(j, 11, LiveView("RUNNING", 60.0, now))["progress"] is None
    (tmp_path / "reports" / "11.jsonl").unlink()
    _ingest(tmp_path / "reports", db, 11, {"step": 10, "time": now - 60, "total_steps": 100},
            {"step": 40, "time": now, "checkpoint_step": 30, "total_steps": 100})  # fmt: skip
    with Journal(db, readonly=True) as j:
        e = explain_job(j, 11, LiveView("RUNNING", 60.0, now))
    assert e["progress"]["step"] == 40 and abs(e["progress"]["finish_time"] - (now + 120)) < 1e-6
    assert e["next_round"] >= now and e["slurm_state"] == "RUNNING"
    text = format_explanation(e)
    assert "progress: step 40/100 (40.0%), checkpoint at step 30" in text and "predicted finish" in text
    assert "next round at" in text and "every 60 s" in text
    assert f"running now (the daemon's last tick saw {e['state']})" in text
    # the command itself (no Slurm here: the live state is left out, and said to be the last tick's)
    assert main(["explain", "11", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "(as of the daemon's last tick)" in out and "progress: step 40/100" in out and "next round at" in out


def test_the_journals_step_rate_spans_ticks_and_not_restarts(journal_setup, tmp_path: Path) -> None:  # noqa: ANN001, F811
    """One report per tick: the rate comes from the report the journal kept, as the file tail would give it; a
    restart (the step goes back to the checkpoint) has no rate until the next report of the new run."""
    _, db = journal_setup
    folder = tmp_path / "reports"
    _ingest(folder, db, 11, {"step": 100, "time": 1000.0, "total_steps": 1000})
    _ingest(folder, db, 11, {"step": 200, "time": 1050.0, "checkpoint_step": 150, "total_steps": 1000})
    with Journal(db, readonly=True) as j:
        got = explain_job(j, 11, LiveView(now=1060.0))["progress"]
    assert got["steps_per_s"] == 2.0 and got["finish_time"] == 1050.0 + 800 / 2.0
    assert got == {**asdict(read_progress(folder / "11.jsonl")), "finish_time": got["finish_time"]}  # one answer
    _ingest(folder, db, 11, {"step": 150, "time": 1100.0, "total_steps": 1000})  # restarted from its checkpoint
    with Journal(db, readonly=True) as j:
        assert explain_job(j, 11, LiveView(now=1110.0))["progress"]["steps_per_s"] is None


def test_report_file_follows_the_launchers_cluster_keyed_name(tmp_path: Path) -> None:
    """The launcher writes ``<cluster>.<job>.jsonl`` under Slurm (issue 29 item 7), ``<job>.jsonl`` without one."""
    from slurmplan.progress import report_file

    assert report_file(tmp_path, 5, "dev1") == tmp_path / "5.jsonl"  # nothing keyed there: the plain name
    assert report_file(tmp_path, 5) == tmp_path / "5.jsonl"
    (tmp_path / "dev1.5.jsonl").write_text("")
    assert report_file(tmp_path, 5, "dev1") == tmp_path / "dev1.5.jsonl"
    assert report_file(tmp_path, 5, "dev2") == tmp_path / "5.jsonl"  # never another cluster's file
    assert report_file(tmp_path, 5) == tmp_path / "dev1.5.jsonl"  # cluster unknown (explain): the one there is
    (tmp_path / "dev2.5.jsonl").write_text("")
    assert report_file(tmp_path, 5) is None and read_progress(None) is None  # two clusters' job 5: no guess


def test_a_journal_from_before_the_step_rate_column_gains_it(tmp_path: Path) -> None:
    """A daemon upgraded over an older journal: ``job_progress`` had no ``steps_per_s``; ingestion adds it."""
    db = tmp_path / "old.db"
    with Journal(db) as j:
        j.measurements.db.execute("DROP TABLE job_progress")
        j.measurements.db.execute("CREATE TABLE job_progress (job_id INTEGER PRIMARY KEY, step FLOAT, time FLOAT)")
        j.measurements.db.execute("INSERT INTO job_progress VALUES (3, 10.0, 100.0)")
    _ingest(tmp_path / "reports", db, 3, {"step": 30, "time": 110.0})
    with Journal(db, readonly=True) as j:
        assert j.measurements.progress_of(3)["steps_per_s"] == 2.0
