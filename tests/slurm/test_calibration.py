"""Restart cost calibration from journal rows (pure) and through a real journal and ``explain``."""

from __future__ import annotations

import json

from slurmplan.control.calibration import DEFAULT_COST_S, calibrate, restart_samples
from slurmplan.control.explain import explain_job, format_explanation
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.domain import Action, ActionKind


def _row(job_id, t, what, detail=""):
    return {"job_id": job_id, "time": t, "what": what, "detail": detail}


def _update(gpus, nodes=1):
    return json.dumps({"gpus_per_node": gpus, "node_count": nodes})


def test_samples_follow_signal_end_start_and_take_the_new_size():
    rows = [
        _row(1, 0.0, "job-start", json.dumps({"gpus": "0,1"})),
        _row(1, 100.0, "signal"),
        _row(1, 103.0, "job-end"),
        _row(1, 104.0, "update", _update(2, 2)),
        _row(1, 110.0, "job-start"),
        _row(2, 50.0, "signal"),  # never requeued: no sample
        _row(2, 60.0, "job-start"),
        _row(3, 10.0, "signal"),
        _row(3, 12.0, "job-end"),
        _row(3, 20.0, "job-start", json.dumps({"gpus": "0"})),
    ]
    samples = restart_samples(rows)
    assert [(s.job_id, s.gpus, s.total_s, s.requeued_at - s.signal_at) for s in samples] == [
        (1, 4, 10.0, 3.0),
        (3, 1, 10.0, 2.0),
    ]


def test_calibration_is_per_size_with_the_default_until_enough_restarts():
    rows = []
    for job, (gpus, seconds) in enumerate([(1, 2.0), (1, 4.0), (1, 30.0), (8, 60.0)], start=1):
        rows += [_row(job, 0.0, "signal"), _row(job, 1.0, "job-end"), _row(job, 1.5, "update", _update(gpus))]
        rows += [_row(job, seconds, "job-start")]
    cal = calibrate(restart_samples(rows))
    assert cal.cost_for(1) == (4.0, "median of 3 restarts of 1-GPU jobs")
    assert cal.cost_for(8) == (DEFAULT_COST_S, "configured default: 1 restart of 8-GPU jobs measured, 3 needed")
    assert calibrate(restart_samples(rows), min_samples=1).cost_for(8) == (60.0, "median of 1 restarts of 8-GPU jobs")
    assert cal.cost_for(6)[0] == DEFAULT_COST_S  # no nearest-size guess: what explain shows is what is decided
    assert calibrate([]).cost_for(4) == (DEFAULT_COST_S, "configured default (no restart of a 4-GPU job measured yet)")


def test_journal_timeline_feeds_explain(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        tick = journal.ticks.begin("act", 0.0)
        journal.jobs.upsert([{"job_id": 7, "name": "x", "state": "running", "managed": 1, "first_seen": 0.0,
                              "last_seen": 0.0}])  # fmt: skip
        ids = journal.intents.add(tick, 1, [Action(ActionKind.SIGNAL, 7, signal="USR2")], 100.0)
        ids += journal.intents.add(tick, 1, [Action(ActionKind.UPDATE, 7, "v100", 2)], 100.0)
        journal.intents.mark(ids[0], ActionStatus.APPLIED, 100.0)
        journal.intents.mark(ids[1], ActionStatus.APPLIED, 102.0)
        journal.events.record(7, "job-end", 101.0, "{}")
        journal.events.record(7, "job-start", 103.5, "{}")
        rows = journal.intents.restart_timeline()
        assert [r["what"] for r in rows] == ["signal", "job-end", "update", "job-start"]
        e = explain_job(journal, 7)
    assert e["reconfig_cost"]["by_gpus"] == {"2": {"median_s": 3.5, "samples": 1}}
    assert "reconfiguration cost for" in format_explanation(e)


def _journal_with_restarts(path, seconds, gpus=2):
    """A journal holding one real-shaped restart per entry of ``seconds`` (signal, requeue, update, start)."""
    journal = Journal(path)
    tick = journal.ticks.begin("act", 0.0)
    for n, took in enumerate(seconds):
        job, t0 = 100 + n, 1000.0 * n
        ids = journal.intents.add(tick, 1, [Action(ActionKind.SIGNAL, job, signal="USR2")], t0)
        ids += journal.intents.add(tick, 1, [Action(ActionKind.UPDATE, job, "a100", gpus)], t0)
        journal.intents.mark(ids[0], ActionStatus.APPLIED, t0)
        journal.events.record(job, "job-end", t0 + 0.5, "{}")
        journal.intents.mark(ids[1], ActionStatus.APPLIED, t0 + 0.6)
        journal.events.record(job, "job-start", t0 + took, "{}")
    return journal


def test_restart_timeline_covers_only_the_latest_signals(tmp_path):
    """A long-running site's tick reads the last ``recent`` restarts, not its whole history: old, slow restarts
    (another era of the cluster) drop out of the median once enough newer ones exist."""
    old, new = [300.0] * 6, [3.0, 4.0, 5.0]
    with _journal_with_restarts(tmp_path / "j.db", old + new) as journal:
        everything = journal.intents.restart_timeline(recent=None)
        latest = journal.intents.restart_timeline(recent=3)
        assert len(everything) == 4 * 9 and len(latest) == 4 * 3
        assert {r["job_id"] for r in latest} == {106, 107, 108}
        assert calibrate(restart_samples(latest)).costs() == {2: 4.0}
        assert calibrate(restart_samples(everything)).costs() == {2: 300.0}
        assert journal.intents.restart_timeline(recent=50) == everything  # fewer signals than asked: all of them
        assert journal.intents.restart_timeline() == everything  # the default (500) bounds only a long history
        plan = journal.db.execute(
            "EXPLAIN QUERY PLAN SELECT job_id FROM events WHERE event IN ('job-start', 'job-end') AND time >= 5"
        ).fetchall()
        assert any("USING INDEX" in str(row) or "USING COVERING INDEX" in str(row) for row in plan), plan


def test_daemon_feeds_measured_cost_per_size_into_the_tick_config(tmp_path):
    from slurmplan.control.config import DaemonConfig
    from slurmplan.control.runner import Daemon
    from tests.control.memcluster import MemBackend, candidates, simple_decide

    seen = []

    def decide(inp, policy, state):
        seen.append(inp.config)
        return simple_decide(inp, policy, state)

    config = DaemonConfig(database=tmp_path / "j.db", report_dir=tmp_path / "r", round_s=60)
    daemon = Daemon(config, backend=MemBackend([]), policy="test", candidates_fn=candidates, decide_fn=decide)
    with Journal(config.database) as journal:  # two restarts: too few to trust, the constant stays
        _journal_with_restarts(config.database, [3.0, 4.0]).close()
        assert daemon.measured_costs(journal) == {}
    daemon.tick()
    assert seen[-1].reconfig_cost_by_gpus == {} and seen[-1].reconfig_cost_for(2) == 78.0

    _journal_with_restarts(tmp_path / "k.db", [3.0, 4.0, 5.0]).close()
    fresh = Daemon(  # a new daemon (a cron tick) computes it from the journal at once
        DaemonConfig(database=tmp_path / "k.db", report_dir=tmp_path / "r", round_s=60),
        backend=MemBackend([]), policy="test", candidates_fn=candidates, decide_fn=decide,
    )  # fmt: skip
    fresh.tick()
    cfg = seen[-1]
    assert cfg.reconfig_cost_by_gpus == {2: 4.0}
    assert cfg.reconfig_cost_for(2) == 4.0 and cfg.reconfig_cost_for(8) == 78.0  # other sizes: the constant


def test_measured_delta_flips_the_reconfiguration_rule_for_that_size():
    import numpy as np

    from slurmplan.domain import AllocationProblem, Cell, Reason
    from slurmplan.mechanism.priorities import priorities
    from slurmplan.mechanism.reconfig import judge_move
    from slurmplan.mechanism.round import RunningInfo, plan_round
    from slurmplan.tick import TickConfig

    constant, measured = TickConfig(), TickConfig(reconfig_cost_by_gpus={2: 4.0})
    # +20 % does not pay 78 s of a 360 s round, but pays 4 s: the job's own delta decides
    assert not judge_move(10.0, 12.0, 360.0, constant, gpus=2).move
    assert judge_move(10.0, 12.0, 360.0, measured, gpus=2).move
    assert not judge_move(10.0, 12.0, 360.0, measured, gpus=4).move  # another size keeps the constant

    p = AllocationProblem((1,), (Cell("a100", 2), Cell("v100", 2)), np.array([[12.0, 10.0]]), {"a100": 2, "v100": 2})
    x = np.array([[1.0, 0.0]])
    info = RunningInfo(np.array([True]), np.array([1]), np.array([False]), np.array([360.0]))
    stays = plan_round(p, x, priorities(x, np.zeros((1, 2))), info, constant)
    moves = plan_round(p, x, priorities(x, np.zeros((1, 2))), info, measured)
    assert stays.col.tolist() == [1] and stays.reason == (Reason.KEPT,)
    assert moves.col.tolist() == [0] and moves.reason == (Reason.MOVED,) and "costs 4 s of restart" in moves.detail[0]


def test_calibration_costs_need_enough_samples_and_bad_mappings_are_refused():
    import pytest

    from slurmplan.domain import ValidationError
    from slurmplan.tick import TickConfig

    rows = []
    for job, (gpus, seconds) in enumerate([(1, 2.0), (1, 4.0), (1, 30.0), (8, 60.0)], start=1):
        rows += [_row(job, 0.0, "signal"), _row(job, 1.0, "job-end"), _row(job, 1.5, "update", _update(gpus))]
        rows += [_row(job, seconds, "job-start")]
    assert calibrate(restart_samples(rows)).costs() == {1: 4.0}
    assert calibrate(restart_samples(rows), min_samples=1).costs() == {1: 4.0, 8: 60.0}
    with pytest.raises(ValidationError, match="reconfig_cost_by_gpus"):
        TickConfig(reconfig_cost_by_gpus={0: 3.0})
    with pytest.raises(ValidationError, match="reconfig_cost_by_gpus"):
        TickConfig(reconfig_cost_by_gpus={2: -1.0})


def test_explain_of_a_held_job_prices_its_own_size_not_one_gpu(tmp_path):
    """A held job's last decision has no Cell: its size comes from its candidates (it said "1 GPUs" before)."""
    from slurmplan.domain import Candidate, Cell

    with Journal(tmp_path / "j.db") as journal:
        tick = journal.ticks.begin("act", 0.0)
        journal.jobs.upsert([{"job_id": 9, "name": "x", "state": "pending", "managed": 1, "first_seen": 0.0,
                              "last_seen": 0.0}])  # fmt: skip
        journal.candidates.replace(tick, {9: [Candidate(Cell("a100", 4, 2), 40.0), Candidate(Cell("v100", 2), 9.0)]})
        e = explain_job(journal, 9)
    assert e["reconfig_cost"]["gpus"] == 4
    assert "reconfiguration cost for 4 GPUs:" in format_explanation(e)


def test_the_cost_runs_to_the_first_throughput_report_after_the_restart():
    """Issue 23: a move costs until the job trains again (its first report), not until Slurm shows it running."""
    rows = [
        _row(5, 100.0, "report"),  # before the signal: ignored
        _row(5, 200.0, "signal"),
        _row(5, 201.0, "job-end"),
        _row(5, 204.0, "job-start", '{"gpus": "0,1"}'),
        _row(5, 211.5, "report"),
        _row(5, 240.0, "report"),
        _row(6, 300.0, "signal"),
        _row(6, 301.0, "job-end"),
        _row(6, 303.0, "job-start", '{"gpus": "0"}'),  # no report yet: counts to running
    ]
    samples = restart_samples(rows)
    assert [(s.job_id, s.gpus, s.total_s) for s in samples] == [(5, 2, 11.5), (6, 1, 3.0)]


def test_journal_timeline_ends_a_restart_at_the_jobs_first_report(tmp_path):
    with _journal_with_restarts(tmp_path / "j.db", [3.0, 4.0, 5.0]) as journal:
        rows = [{"job_id": 100 + n, "model": "gpt2", "gpu_type": "a100", "gpus": 2, "nodes": 1, "plan": "{}",
                 "samples_per_s": 10.0, "memory_gb": 1.0, "time": 1000.0 * n + 10.0} for n in range(3)]  # fmt: skip
        journal.measurements.add(rows, "r.jsonl", 1)
        timeline = journal.intents.restart_timeline()
        assert [r["what"] for r in timeline if r["job_id"] == 100] == ["signal", "job-end", "update", "job-start",
                                                                        "report"]  # fmt: skip
        assert calibrate(restart_samples(timeline)).costs() == {2: 10.0}
