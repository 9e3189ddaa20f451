"""The SQLite journal: events from the hook, intents and their life, concurrent writers."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.domain import Action, ActionKind, ValidationError


def test_record_event_and_read_back(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        j.events.record(42, "prolog", 100.0, "node a1")
        j.events.record(42, "epilog", 160.0)
        j.events.record(7, "prolog", 120.0)
        assert [e["event"] for e in j.events.of(42)] == ["prolog", "epilog"]
        assert j.events.of(42)[0]["detail"] == "node a1"
        assert len(j.events.of()) == 3
        assert j.db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_record_event_refuses_bad_job_id(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j, pytest.raises(ValidationError, match="job_id"):
        j.events.record(0, "prolog", 1.0)


def test_events_from_another_process_while_a_transaction_is_open(tmp_path: Path) -> None:
    """The hook writes while the daemon holds a write transaction: it waits, it does not fail."""
    path = tmp_path / "j.db"
    j = Journal(path)
    code = f"from slurmplan.control.journal import Journal\nJournal({str(path)!r}).events.record(5, 'epilog', 9.0)"
    with j.transaction():
        j.state.set("x", 1)
        child = subprocess.Popen([sys.executable, "-c", code])
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=1.0)
    assert child.wait(timeout=30) == 0
    assert [e["job_id"] for e in j.events.of()] == [5]
    j.close()


def test_action_life_intent_applied_confirmed(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        tick = j.ticks.begin("normal", 10.0)
        with j.transaction():
            ids = j.intents.add(
                tick,
                3,
                [
                    Action(ActionKind.UPDATE, 11, gpu_type="a100", gpus_per_node=2, node_count=1, nodelist=("n1",)),
                    Action(ActionKind.RELEASE, 11),
                ],
                10.0,
            )
        pending = j.intents.rows(status=ActionStatus.INTENT)
        assert [r.id for r in pending] == ids
        assert pending[0].action.nodelist == ("n1",)
        assert pending[0].action.kind is ActionKind.UPDATE
        j.intents.mark(ids[0], ActionStatus.APPLIED, 11.0)
        j.intents.mark(ids[1], ActionStatus.FAILED, 11.0, "slurm_update error")
        j.intents.mark(ids[0], ActionStatus.CONFIRMED, 12.0)
        rows = {r.id: r for r in j.intents.rows(job_id=11)}
        assert rows[ids[0]].status == ActionStatus.CONFIRMED and rows[ids[0]].attempts == 1
        assert rows[ids[1]].status == ActionStatus.FAILED and "slurm_update" in rows[ids[1]].message
        assert j.intents.rows(status=ActionStatus.INTENT) == []


def test_rollback_leaves_no_intent(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        with pytest.raises(RuntimeError), j.transaction():
            j.intents.add(1, 1, [Action(ActionKind.HOLD, 3)], 1.0)
            raise RuntimeError("killed before commit")
        assert j.intents.rows() == []


def test_jobs_keep_first_seen(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        j.jobs.upsert([{"job_id": 1, "state": "pending", "first_seen": 5.0, "last_seen": 5.0}])
        j.jobs.upsert([{"job_id": 1, "state": "running", "first_seen": 9.0, "last_seen": 9.0}])
        row = j.jobs.get(1)
        assert row is not None and row["first_seen"] == 5.0 and row["state"] == "running"
        j.jobs.mark_finished([1], "completed", 20.0)
        assert j.jobs.all(unfinished_only=True) == []


def test_only_changed_decisions_between_rounds(tmp_path: Path) -> None:
    from slurmplan.domain import Assignment, Cell, Reason

    a = Assignment(1, Reason.SCHEDULED, Cell("a100", 2), nodes=("a1",))
    b = Assignment(2, Reason.WAITING)
    with Journal(tmp_path / "j.db") as j:
        assert j.decisions.changed([a, b]) == [a, b]
        j.decisions.record(1, 1, 10.0, [a, b], None, True, "las")
        kept = Assignment(1, Reason.KEPT, Cell("a100", 2), nodes=("a1",))
        assert j.decisions.changed([a, b]) == []
        assert j.decisions.changed([kept, b]) == [kept]


def test_one_jobs_shares_are_read_through_an_index(tmp_path: Path) -> None:
    """``explain`` reads one job's latest shares; on a journal of many rounds that must not scan the table.

    Opening an existing journal for writing adds the index too, so a site's old journal gets it on upgrade."""
    import sqlite3

    import numpy as np

    from slurmplan.domain import Allocation, Cell

    cells = (Cell("a100", 1), Cell("v100", 2))
    with Journal(tmp_path / "j.db") as j:
        for r in (1, 2, 3):
            x = [[0.5, 0.5], [1.0, 0.0]] if r < 3 else [[0.0, 1.0], [0.25, 0.0]]
            j.decisions.record(r, r, 10.0 * r, [], Allocation((7, 8), cells, np.array(x), "las"), True, "las")
        assert [(r["round_index"], r["cell"], r["share"]) for r in j.decisions.allocation_of(7)] == [
            (3, "v100:2:1", 1.0)
        ]
        assert {r["share"] for r in j.decisions.allocation_of(7, round_index=1)} == {0.5}
        plans = [
            " ".join(str(c) for c in row)
            for sql in (
                "SELECT MAX(round_index) FROM allocations WHERE job_id = 7",
                "SELECT * FROM allocations WHERE job_id = 7 AND round_index = 3",
            )
            for row in j.decisions.db.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
        ]
        assert all("USING" in p and "INDEX" in p and "job_id" in p for p in plans), plans
    con = sqlite3.connect(tmp_path / "j.db")
    con.execute("DROP INDEX idx_allocations_job_id_round_index")
    con.commit()
    con.close()
    with Journal(tmp_path / "j.db") as j:  # an older journal opened for writing gets the index
        names = {r[0] for r in j.decisions.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "idx_allocations_job_id_round_index" in names


# --------------------------------------------------------------------- the stores (issue 13)


def test_stores_share_one_transaction(tmp_path: Path) -> None:
    """State, decisions, candidates and intents of one tick commit or vanish together."""
    from slurmplan.domain import Assignment, Candidate, Cell, Reason, ThroughputSource

    with Journal(tmp_path / "j.db") as j:
        j.state.set("round_index", 1)
        with pytest.raises(RuntimeError), j.transaction():
            j.state.set("round_index", 2)
            j.state.replace_jobs({7: {"attained_s": 1.0}})
            j.decisions.record(1, 2, 5.0, [Assignment(7, Reason.WAITING)], None, True, "las")
            j.candidates.replace(1, {7: [Candidate(Cell("a100", 1), 3.0, source=ThroughputSource.ESTIMATED)]})
            j.intents.add(1, 2, [Action(ActionKind.HOLD, 7)], 5.0)
            raise RuntimeError("killed before commit")
        assert j.state.get("round_index") == 1 and j.state.jobs() == {}
        assert j.decisions.of() == [] and j.decisions.rounds() == [] and j.candidates.job_ids() == set()
        assert j.intents.rows() == [] and j.is_empty()


def test_the_journal_has_no_one_class_api_left(tmp_path: Path) -> None:
    """Callers go through the stores; the old delegate methods (record_event, actions, ...) are gone."""
    with Journal(tmp_path / "j.db") as j:
        for old in ("record_event", "upsert_jobs", "add_intents", "mark_action", "actions", "get_value", "job"):
            assert not hasattr(j, old), old
        j.events.record(3, "job-start", 1.0)
        j.events.record(3, "job-end", 2.0)
        assert [e["event"] for e in j.events.of(3)] == ["job-start", "job-end"]
        ids = j.intents.add(1, 1, [Action(ActionKind.HOLD, 3)], 1.0)
        j.intents.mark(ids[0], ActionStatus.APPLIED, 2.0)
        assert [r.status for r in j.intents.rows()] == [ActionStatus.APPLIED]
        j.state.set("k", {"a": 1})
        assert j.state.get("k") == {"a": 1}
        assert j.ticks.recent() == []


def test_read_only_journal_cannot_write_and_never_creates(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "j.db"
    with pytest.raises(ValidationError, match="existing journal"):
        Journal(path, readonly=True)
    assert not path.exists()
    with Journal(path) as j:
        j.events.record(1, "job-start", 1.0)
    with Journal(path, readonly=True) as j:
        assert len(j.events.of()) == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            j.events.record(2, "job-start", 2.0)
    with Journal(path) as j:
        assert len(j.events.of()) == 1


def test_no_sql_outside_the_stores() -> None:
    """Every query lives in ``control/stores``: no ``execute(`` or ``db[...]`` table access anywhere else."""
    import ast

    root = Path(__file__).resolve().parents[2] / "slurmplan"
    found = []
    for path in root.rglob("*.py"):
        if "stores" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "db":
                found.append(f"{path.relative_to(root)}:{node.lineno} .db[...]")
    assert not found, found
