"""Hints the site's trust rules drop are told to the user (review finding of session 6): the decision the daemon
writes to the admin comment carries a short note, and ``explain`` names each rule, journaled once per change.

A daemon tick over the in-memory cluster of ``tests/control/memcluster`` (the simulator's backend with Slurm's
rules); the real-Slurm side of the rules is ``test_trust.py``.
"""

from __future__ import annotations

from pathlib import Path

from slurmplan.control.config import DaemonConfig
from slurmplan.control.explain import explain_job, format_explanation
from slurmplan.control.journal import Journal
from slurmplan.control.runner import Daemon
from slurmplan.control.trust import NOTE_MAX, HintTrust, ignored_note
from slurmplan.domain import Job
from slurmplan.formats import find_hints, parse_decision, split_admin_comment
from tests.control.memcluster import MemBackend, candidates, simple_decide

HINTS = "slurmplan:model=m;gpus=2;class=guaranteed;deadline=2031-01-01T00:00"


def _tick(tmp_path: Path, trust: HintTrust, ticks: int = 1) -> tuple[MemBackend, Path]:
    backend = MemBackend([Job(5, "train", admin_comment=HINTS, account="lab")])  # the memory cluster keeps no QOS
    db = tmp_path / f"j{len(list(tmp_path.iterdir()))}.db"
    daemon = Daemon(DaemonConfig(database=db, report_dir=tmp_path / "r", trust=trust), backend=backend,
                    policy="test", candidates_fn=candidates, decide_fn=simple_decide)  # fmt: skip
    for _ in range(ticks):
        daemon.tick()
    return backend, db


def _written(backend: MemBackend) -> list[str]:
    return [a.admin_comment for a in backend.applied if a.job_id == 5 and a.admin_comment is not None]


def test_dropped_hints_are_noted_in_the_admin_comment_and_in_explain(tmp_path: Path) -> None:
    strict, _ = _tick(tmp_path, HintTrust(guaranteed_accounts=("gold",), deadline_qos=("urgent",)), ticks=2)
    opened, _ = _tick(tmp_path, HintTrust())
    (noted,) = _written(strict)
    (plain,) = _written(opened)
    note = "ignored hints: class guaranteed, deadline (not allowed for account lab / QOS (none); slurmplan explain 5)"
    assert noted == f"{plain} | {note}"  # the same decision, with the note after it; written once in two ticks
    assert parse_decision(noted) == parse_decision(plain)  # the launcher and SPANK read the same configuration
    assert split_admin_comment(noted).decision.endswith(note) and find_hints(noted) == find_hints(plain)


def test_explain_names_each_rule_once_per_change(tmp_path: Path) -> None:
    _, db = _tick(tmp_path, HintTrust(guaranteed_accounts=("gold",)), ticks=3)
    with Journal(db, readonly=True) as j:
        e = explain_job(j, 5)
        events = [ev for ev in j.events.of(5) if ev["event"] == "trust"]
    assert len(events) == 1  # three ticks, one note
    assert "class=guaranteed is not allowed for account 'lab'" in e["ignored_hints"]["detail"]
    assert "guaranteed_accounts [gold]" in format_explanation(e)
    assert "scheduled without some of its hints" in format_explanation(e)
    _, open_db = _tick(tmp_path, HintTrust())
    with Journal(open_db, readonly=True) as j:
        assert explain_job(j, 5)["ignored_hints"] is None


def test_the_note_stays_short_and_out_of_the_admin_comments_grammar() -> None:
    hostile = Job(123456789012, account="x" * 300 + "=||slurmplan: a100x8", qos="q;=" * 50)
    note = ignored_note(["guaranteed", "unmanaged", "steps", "deadline"], hostile)
    assert len(note) <= NOTE_MAX
    assert "=" not in note and "||" not in note and "slurmplan:" not in note and ";" not in note.split("(")[0]
