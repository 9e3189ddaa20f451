"""The operator commands read the journal a real tick wrote (tick on the in-memory cluster of memcluster)."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import Journal
from slurmplan.control.runner import Daemon
from slurmplan.domain import Job
from tests.control.memcluster import MemBackend, candidates, simple_decide


@pytest.fixture
def journal_setup(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "j.db"
    cfg = tmp_path / "slurmplan.yaml"
    cfg.write_text(f"database: {db}\nreport_dir: {tmp_path}/reports\n")
    backend = MemBackend(
        [Job(11, "train", admin_comment="slurmplan:model=m;gpus=2"), Job(12, "bad", comment="slurmplan:gpus=-1")]
    )
    daemon = Daemon(
        DaemonConfig(database=db, report_dir=tmp_path / "reports"),
        backend=backend,
        policy="test",
        candidates_fn=candidates,
        decide_fn=simple_decide,
    )
    daemon.tick()
    with Journal(db) as j:
        j.events.record(11, "prolog", 1001.0, "a1")
    return cfg, db


def test_explain_shows_candidates_sources_and_decision(journal_setup: tuple[Path, Path], capsys) -> None:  # type: ignore[no-untyped-def]
    cfg, _ = journal_setup
    assert main(["explain", "11", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "scheduled a100x2" in out
    assert "a100x2" in out and "v100x2" in out and "estimated" in out
    assert "prolog" in out
    assert main(["explain", "11", "--config", str(cfg), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["cell"] for c in data["candidates"]] == ["a100x2", "v100x2"]
    assert data["candidates"][0]["throughput"] == 400.0
    assert data["decision"]["reason"] == "scheduled"


def test_explain_bad_hint_job_and_unknown_job(journal_setup: tuple[Path, Path], capsys) -> None:  # type: ignore[no-untyped-def]
    cfg, _ = journal_setup
    assert main(["explain", "12", "--config", str(cfg)]) == 0
    assert "left alone, bad hints" in capsys.readouterr().out
    assert main(["explain", "999", "--config", str(cfg)]) == 1
    assert "999" in capsys.readouterr().err


def test_history_for_one_job(journal_setup: tuple[Path, Path], capsys) -> None:  # type: ignore[no-untyped-def]
    cfg, _ = journal_setup
    assert main(["history", "--job", "11", "--config", str(cfg), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    kinds = [r["kind"] for r in rows]
    assert "decision" in kinds and "event" in kinds and kinds.count("action") == 4
    assert {r["job_id"] for r in rows} == {11}
    assert main(["history", "--config", str(cfg)]) == 0
    assert "bad-hints" in capsys.readouterr().out


def test_job_reports_reach_candidates_and_explain(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A launcher's report line becomes a journal measurement, then a MEASURED candidate that explain shows."""
    reports = tmp_path / "reports"
    reports.mkdir()
    line = {"job_id": 21, "model": "gpt2", "gpu_type": "a100", "gpus": 1, "nodes": 1,
            "plan": {"micro_batch": 4, "grad_accum": 128}, "samples_per_s": 99.0, "time": 990.0}  # fmt: skip
    (reports / "21.jsonl").write_text(json.dumps(line) + "\n")
    db = tmp_path / "j.db"
    me = pwd.getpwuid(os.geteuid()).pw_name  # the report file's owner must be the job's user (issue 24)
    backend = MemBackend([Job(21, "gpt", user=me, admin_comment="slurmplan:model=gpt2;gpus=1;min=1;max=1")])
    Daemon(DaemonConfig(database=db, report_dir=reports), backend=backend).tick()  # real perf, policy, decide
    cfg = tmp_path / "slurmplan.yaml"
    cfg.write_text(f"database: {db}\nreport_dir: {reports}\n")
    assert main(["explain", "21", "--config", str(cfg), "--json"]) == 0
    cands = {c["cell"]: c for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert cands["a100x1"]["source"] == "measured" and cands["a100x1"]["throughput"] == 99.0
    assert cands["v100x1"]["source"] != "measured"


def test_explain_text_shows_every_plan_flag() -> None:
    """Boolean plan fields (checkpointing, offload) are shown: ``True == 1`` once hid them from the listing."""
    from slurmplan.control.codec import plan_to_dict
    from slurmplan.control.explain import format_explanation
    from slurmplan.domain import Plan

    plan = Plan(dp=4, micro_batch=8, grad_accum=16, checkpointing=True, zero_stage=2, offload=True)
    cand = {"cell": "v100x4", "throughput": 11.9, "source": "estimated", "plan": plan_to_dict(plan)}
    text = format_explanation(
        {
            "job_id": 1,
            "name": "j",
            "state": "running",
            "managed": True,
            "hints": "",
            "hint_error": None,
            "decision": None,
            "share": {},
            "share_round": None,
            "candidates": [cand],
            "actions": [],
            "events": [],
        }
    )
    assert "v100x4" in text and plan.short() in text and " gc " in text and text.rstrip().endswith("off")


def test_action_lines_spell_an_untyped_request_as_slurm_does() -> None:
    from slurmplan.control.commands import _action_text
    from slurmplan.domain import Action, ActionKind

    untyped = _action_text(Action(ActionKind.UPDATE, 7, gpus_per_node=4, node_count=1, nodelist=("n1",)))
    typed = _action_text(Action(ActionKind.UPDATE, 7, gpu_type="a100", gpus_per_node=4, node_count=2))
    assert "gpu:4 x1 nodes=n1" in untyped and "None" not in untyped
    assert "gpu:a100:4 x2" in typed


def test_daemon_prints_a_tick_only_when_something_changed(tmp_path: Path) -> None:
    import dataclasses

    from slurmplan.control.commands import daemon_output

    backend = MemBackend([Job(11, "train", admin_comment="slurmplan:model=m;gpus=2")])
    daemon = Daemon(
        DaemonConfig(database=tmp_path / "j.db", report_dir=tmp_path / "reports"),
        backend=backend,
        policy="test",
        candidates_fn=candidates,
        decide_fn=simple_decide,
    )
    first = daemon.tick()
    # the test decide function opens a round every tick; the tick after the first is otherwise a quiet one
    second = dataclasses.replace(daemon.tick(), new_round=False)
    assert first.new_round and "job     11" in (daemon_output(first, verbose=False) or "")
    assert not second.actions and not second.refused and not second.skipped
    assert daemon_output(second, verbose=False) is None
    quiet_line = daemon_output(second, verbose=True)
    assert quiet_line is not None and "\n" not in quiet_line and "managed" in quiet_line


@pytest.mark.parametrize("command", [["tick", "--dry-run"], ["daemon", "--max-ticks", "1"], ["explain", "11"],
                                     ["history"]])  # fmt: skip
def test_commands_read_slurmplan_config_from_the_environment(command, tmp_path: Path, monkeypatch, capsys) -> None:
    # A config naming a policy that does not exist: any command that reads the file fails naming it, before it
    # touches Slurm or a journal. Without $SLURMPLAN_CONFIG they would read /etc/slurmplan/slurmplan.yaml.
    cfg = tmp_path / "env.yaml"
    cfg.write_text("interval_s: -5\n")
    monkeypatch.setenv("SLURMPLAN_CONFIG", str(cfg))
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "interval_s" in err and str(cfg) in err, err


def test_explain_of_a_held_job_says_held_and_why_not_a_prediction_of_zero() -> None:
    from slurmplan.control.explain import format_explanation

    why = "its a100 GPUs went to job 12 (priority 3.1); the policy gave it no share of time this round"
    decision = {"round_index": 4, "time": 1_700_000_000.0, "reason": "preempted", "cell": None, "plan": None,
                "nodes": "", "priority": 0.0, "share": 0.0, "throughput": 0.0, "rule": why}  # fmt: skip
    e = {"job_id": 7, "name": "train", "state": "PENDING", "managed": True, "hints": "", "hint_error": None,
         "candidates": [], "share": {}, "share_round": None, "decision": decision,
         "actions": [], "events": []}  # fmt: skip
    text = format_explanation(e)
    assert "held (preempted), not running this round" in text and f"why: {why}" in text
    assert "predicted 0" not in text and " on -" not in text


# ------------------------------------------------- history limits, read-only journals (issue 18 items 5-7)


def _journal_with_rows(path: Path) -> None:
    """Decisions, actions and events of jobs 1 and 2 at known times, interleaved (times 5 .. 40)."""
    from slurmplan.domain import Action, ActionKind, Assignment, Cell, Reason

    with Journal(path) as j:
        j.jobs.upsert([{"job_id": 1, "name": "train", "managed": 1, "state": "RUNNING", "first_seen": 5.0}])
        j.events.record(1, "job-start", 5.0)
        j.decisions.record(1, 1, 10.0, [Assignment(1, Reason.SCHEDULED, Cell("a100", 2))], None, True, "las")
        j.intents.add(1, 1, [Action(ActionKind.RELEASE, 1)], 15.0)
        j.decisions.record(2, 1, 20.0, [Assignment(2, Reason.WAITING)], None, False, "las")
        j.intents.add(2, 1, [Action(ActionKind.HOLD, 2)], 25.0)
        j.events.record(2, "job-end", 30.0)
        j.decisions.record(3, 2, 35.0, [Assignment(1, Reason.KEPT, Cell("a100", 2))], None, True, "las")
        j.events.record(1, "job-end", 40.0)


def _history(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(["history", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_history_limit_is_applied_after_merging_all_kinds(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "j.db"
    _journal_with_rows(db)
    code, out, err = _history(capsys, "--database", str(db), "--limit", "3", "--json")
    rows = json.loads(out)
    assert code == 0 and [(r["time"], r["kind"]) for r in rows] == [
        (30.0, "event"),
        (35.0, "decision"),
        (40.0, "event"),
    ]
    assert f"journal {db}" in err  # stdout stays JSON, the journal read is still named
    code, out, _ = _history(capsys, "--database", str(db), "--limit", "4", "--job", "1", "--json")
    assert [r["time"] for r in json.loads(out)] == [10.0, 15.0, 35.0, 40.0]


def test_history_limit_zero_means_every_row_and_negative_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "j.db"
    _journal_with_rows(db)
    code, out, _ = _history(capsys, "--database", str(db), "--limit", "0", "--json")
    assert code == 0 and len(json.loads(out)) == 8  # decisions included (limit 0 once dropped them all)
    code, out, err = _history(capsys, "--database", str(db), "--limit", "-3")
    assert code == 1 and out == ""
    assert "--limit" in err and "-3" in err and "0 for every row" in err


def test_history_names_the_journal_and_says_when_a_job_has_no_rows(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "j.db"
    _journal_with_rows(db)
    code, out, _ = _history(capsys, "--database", str(db))
    assert code == 0 and out.splitlines()[0] == f"journal {db}: 8 rows"
    code, out, _ = _history(capsys, "--database", str(db), "--job", "424242")
    assert code == 0 and out.splitlines() == [
        f"journal {db}: no rows for job 424242 (other jobs have rows: `slurmplan history`)"
    ]
    empty = tmp_path / "empty.db"
    Journal(empty).close()
    code, out, _ = _history(capsys, "--database", str(empty), "--job", "424242")
    assert out.strip() == f"journal {empty}: nothing journaled yet"


@pytest.mark.parametrize(
    "command", [["history"], ["explain", "11"], ["history", "--json"], ["explain", "11", "--json"]]
)
def test_read_only_commands_never_create_a_journal(tmp_path: Path, capsys, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    typo = tmp_path / "typo" / "jornal.db"
    assert main([*command, "--database", str(typo)]) == 1
    err = capsys.readouterr().err
    assert str(typo) in err and "existing journal" in err
    assert not typo.exists() and not typo.parent.exists()


def test_read_only_commands_leave_the_journal_unchanged(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "j.db"
    _journal_with_rows(db)
    before = db.read_bytes()
    assert main(["history", "--database", str(db)]) == 0
    assert main(["explain", "1", "--database", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"journal {db}:" in out and "job 1 " in out
    assert main(["explain", "1", "--database", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["journal"] == str(db)
    assert db.read_bytes() == before


def test_read_only_commands_refuse_a_file_that_is_not_a_journal(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    text = tmp_path / "notes.txt"
    text.write_text("hello, not sqlite at all\n" * 10)
    assert main(["history", "--database", str(other)]) == 1
    assert "tables missing" in capsys.readouterr().err
    assert main(["explain", "3", "--database", str(text)]) == 1
    assert "readable SQLite journal" in capsys.readouterr().err


def test_explain_unknown_job_names_the_journal(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "j.db"
    _journal_with_rows(db)
    assert main(["explain", "999", "--database", str(db)]) == 1
    err = capsys.readouterr().err
    assert "999" in err and str(db) in err
