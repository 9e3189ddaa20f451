"""Journal retention: what ``journal_keep_days`` deletes, what it never deletes, and that it goes in batches."""

from __future__ import annotations

import time

import pytest

from slurmplan.control.config import DaemonConfig, config_from_mapping
from slurmplan.control.journal import Journal
from slurmplan.control.runner import Daemon
from slurmplan.domain import ValidationError

DAY = 86_400.0
NOW = time.time()


def _fill(j: Journal) -> None:
    """Job 1 finished 40 days ago; job 2 runs since 50 days with its last decision 45 days old; job 3 is new."""
    j.db["jobs"].insert_all(
        [
            {"job_id": 1, "state": "completed", "first_seen": NOW - 60 * DAY, "finished_at": NOW - 40 * DAY},
            {"job_id": 2, "state": "running", "first_seen": NOW - 50 * DAY, "finished_at": None},
            {"job_id": 3, "state": "pending", "first_seen": NOW - 1, "finished_at": None, "last_seen": NOW},
        ],
        pk="job_id",
        alter=True,
    )
    rows = [{"job_id": 1, "time": NOW - (60 - d) * DAY, "reason": "kept", "round_index": d} for d in range(20)]
    rows += [{"job_id": 2, "time": NOW - 50 * DAY, "reason": "scheduled", "round_index": 1}]
    rows += [{"job_id": 2, "time": NOW - 45 * DAY, "reason": "kept", "round_index": 2}]
    rows += [{"job_id": 3, "time": NOW - 10, "reason": "waiting", "round_index": 99}]
    j.db["decisions"].insert_all(rows, alter=True)
    j.db["candidates"].insert_all([{"job_id": 1, "cell": "a100x1"}, {"job_id": 3, "cell": "a100x1"}], alter=True)
    j.db["actions"].insert_all(
        [
            {"job_id": 1, "kind": "release", "status": "confirmed", "created_at": NOW - 59 * DAY},
            {"job_id": 2, "kind": "update", "status": "intent", "created_at": NOW - 49 * DAY},
            {"job_id": 2, "kind": "release", "status": "applied", "created_at": NOW - 49 * DAY},
            {"job_id": 3, "kind": "hold", "status": "confirmed", "created_at": NOW - 10},
        ],
        alter=True,
    )
    j.db["rounds"].insert_all(
        [{"round_index": r, "started_at": NOW - (3 - r) * DAY} for r in range(3)], pk="round_index", alter=True
    )
    j.db["allocations"].insert_all(
        [{"round_index": r, "job_id": job, "cell": "a100:1:1", "share": 1.0} for r in range(3) for job in (2, 3)],
        alter=True,
    )
    j.db["events"].insert_all([{"job_id": 1, "event": "job-end", "time": NOW - 40 * DAY}], alter=True)


def test_prunes_old_rows_but_never_an_unconfirmed_intent_or_a_live_jobs_latest_decision(tmp_path):
    with Journal(tmp_path / "j.db") as j:
        _fill(j)
        report = j.retention.prune(30 * DAY, NOW, budget_s=60, batch=3)
        assert report.done and report.batches > 5, "small batches of at most 3 rows"
        assert {r["job_id"] for r in j.db["jobs"].rows} == {2, 3}
        decisions = [(r["job_id"], r["reason"]) for r in j.db["decisions"].rows]
        assert decisions == [(2, "kept"), (3, "waiting")], "live jobs keep their latest decision, however old"
        assert sorted((r["job_id"], r["status"]) for r in j.db["actions"].rows) == [
            (2, "applied"), (2, "intent"), (3, "confirmed"),
        ]  # fmt: skip
        assert [r["job_id"] for r in j.db["candidates"].rows] == [3]
        assert j.events.count() == 0
        assert {r["round_index"] for r in j.db["allocations"].rows} == {2}, "only the last day's allocations"
        assert {r["round_index"] for r in j.db["rounds"].rows} == {0, 1, 2}
        again = j.retention.prune(30 * DAY, NOW)
        assert again.done and again.total == 0
        # the automatic WAL checkpoint is off only during the batches (one passive checkpoint follows them)
        assert j.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
        assert report.checkpoint_s > 0


def test_daemon_prunes_after_its_tick_and_keep_days_zero_keeps_everything(tmp_path):
    with Journal(tmp_path / "j.db") as j:
        _fill(j)
        Daemon(DaemonConfig(database=tmp_path / "j.db", journal_keep_days=0)).prune(j)
        assert j.decisions.count() == 23
        Daemon(DaemonConfig(database=tmp_path / "j.db", journal_keep_days=30)).prune(j, budget_s=60)
        assert j.decisions.count() == 2


def test_keep_days_is_validated():
    assert config_from_mapping({"journal_keep_days": 7}).journal_keep_days == 7.0
    with pytest.raises(ValidationError, match="journal_keep_days"):
        config_from_mapping({"journal_keep_days": -1})


def test_decisions_older_than_a_day_keep_only_the_changes(tmp_path):
    with Journal(tmp_path / "j.db") as j:
        j.db["jobs"].insert({"job_id": 7, "state": "running", "finished_at": None, "last_seen": NOW}, pk="job_id")
        rows = []
        for r in range(30):  # 30 rounds 3 days ago: the same decision, then a move, then the same again
            cell = "a100x2" if r < 20 else "v100x4"
            rows.append({"job_id": 7, "time": NOW - 3 * DAY + r, "reason": "kept", "cell": cell, "round_index": r})
        rows += [{"job_id": 7, "time": NOW - 60 + r, "reason": "kept", "cell": "v100x4", "round_index": 40 + r}
                 for r in range(3)]  # fmt: skip
        j.db["decisions"].insert_all(rows, alter=True)
        report = j.retention.prune(30 * DAY, NOW, budget_s=60, batch=4)
        assert report.done
        kept = [(r["round_index"], r["cell"]) for r in j.db["decisions"].rows]
        assert kept == [(0, "a100x2"), (20, "v100x4"), (40, "v100x4"), (41, "v100x4"), (42, "v100x4")]


def test_candidates_of_jobs_finished_at_the_same_instant_are_all_pruned_in_small_batches(tmp_path):
    """The candidates step walks finished jobs from a (finished_at, job_id) watermark: 50 jobs that finished in
    the same snapshot (more than a batch) all lose theirs; a job finished an hour ago and a live job keep theirs."""
    with Journal(tmp_path / "j.db") as j:
        jobs = [{"job_id": i, "state": "completed", "finished_at": NOW - 2 * DAY} for i in range(1, 51)]
        jobs += [{"job_id": 60, "state": "completed", "finished_at": NOW - 3600}, {"job_id": 61, "state": "running"}]
        j.db["jobs"].insert_all(jobs, pk="job_id", alter=True)
        j.db["candidates"].insert_all([{"job_id": r["job_id"], "cell": f"c{k}"} for r in jobs for k in range(3)])
        report = j.retention.prune(30 * DAY, NOW, budget_s=60, batch=4)
        assert report.done and report.deleted == {"candidates": 150}
        assert sorted({r["job_id"] for r in j.db["candidates"].rows}) == [60, 61]
        plan = " ".join(r[-1] for r in j.db.execute(
            "EXPLAIN QUERY PLAN SELECT job_id FROM jobs WHERE (finished_at, job_id) > (?, ?) AND finished_at < ? "
            "ORDER BY finished_at, job_id LIMIT 4", [0, 0, NOW]))  # fmt: skip
        assert "USING COVERING INDEX" in plan and "SCAN" not in plan, plan


def test_batch_sizes_adapt_to_the_time_target_and_survive_reopening(tmp_path):
    from slurmplan.control.stores.retention import DEFAULT_BATCH, MIN_BATCH, TARGET_BATCH_S

    with Journal(tmp_path / "j.db") as j:
        r = j.retention
        r._adapt("decisions", 1000, 1000, 5 * TARGET_BATCH_S)  # ran 5x too long: a fifth next time
        assert r.sizes["decisions"] == 200
        r._adapt("events", 100, 100, TARGET_BATCH_S / 10)  # short and full: doubles
        r._adapt("ticks", 100, 40, TARGET_BATCH_S / 10)  # short but not full (nothing more to take): stays
        r._adapt("rounds", 100, 100, 1000.0)
        assert (r.sizes["events"], r.sizes["ticks"], r.sizes["rounds"]) == (200, 100, MIN_BATCH)
        _fill(j)
        j.retention.sizes = {}
        j.retention.prune(30 * DAY, NOW, budget_s=60)  # adapts from DEFAULT_BATCH and saves what it learnt
        learnt = dict(j.retention.sizes)
        assert learnt and all(MIN_BATCH <= v <= 2 * DEFAULT_BATCH for v in learnt.values())
    with Journal(tmp_path / "j.db") as j:
        j.retention.prune(30 * DAY, NOW)
        assert j.retention.sizes == learnt
        j.db["state"].upsert({"key": "retention.batch_rows", "value": "not json"}, pk="key")
        assert j.retention.prune(30 * DAY, NOW).done, "a spoiled state row: back to the default sizes"
