"""``slurmplan replay`` end to end on the local Slurm cluster: real sbatch, the real daemon as a process, the payload
on the launcher's own signal/checkpoint/requeue code. A small trace at a high speedup keeps it to a few minutes.

The cluster is the default dev layout with ``cred_expire=10`` (a requeued job may start again 11 s later instead
of 121 s), as the daemon's end-to-end tests use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slurmplan.cli import main
from slurmplan.domain import ValidationError
from slurmplan.replay.faults import FaultPlan, FaultSchedule, parse_faults
from slurmplan.slurm.devconf import ClusterPaths

TRACE = [
    {"job_id": 1, "arrival_time_s": 0, "model": "gpt2", "gpus": 2, "gpu_type": "v100", "duration_s": 1800},
    {"job_id": 2, "arrival_time_s": 60, "model": "bert-large", "gpus": 1, "gpu_type": "t4", "duration_s": 1200},
    {"job_id": 3, "arrival_time_s": 120, "model": "gpt2", "gpus": 4, "duration_s": 1500},
]
SUMMARY_KEYS = {"jobs", "finished", "avg_jct_h", "p99_jct_h", "makespan_h", "restarts_per_job", "utilization"}


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    lines = [json.dumps({**j, "hints": {"max_gpus": 4}}) for j in TRACE]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def replay_cluster(tmp_path_factory: pytest.TempPathFactory):
    from tests.conftest import ClusterHandle, _require_slurm

    _require_slurm()
    from slurmplan.slurm.devcluster import DevCluster
    from slurmplan.slurm.devlayout import load_layout

    root = tmp_path_factory.mktemp("replay-cluster").resolve()
    sock = ClusterPaths(root).munge_socket
    cluster = DevCluster(load_layout(None, {"slurm_conf_extra": [f"AuthInfo=socket={sock},cred_expire=10"]}), root)
    try:
        cluster.up(timeout=120)
        yield ClusterHandle(cluster)
    finally:
        cluster.down()


def _replay(cluster, tmp_path: Path, monkeypatch, capsys, *extra: str) -> dict:
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    out = tmp_path / "out"
    argv = ["replay", "--trace", str(_trace(tmp_path)), "--speedup", "60", "--out", str(out), "--json", *extra]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert SUMMARY_KEYS | {"predicted_avg_jct_h", "unmanaged_touched"} <= set(summary)
    assert (out / f"jobs_{summary['policy']}.csv").is_file() and (out / "summary.json").is_file()
    return summary


@pytest.mark.slurm
def test_replay_with_the_daemon_survives_daemon_kills(replay_cluster, tmp_path, monkeypatch, capsys) -> None:
    s = _replay(replay_cluster, tmp_path, monkeypatch, capsys, "--policy", "slurmplan", "--faults", "kill-daemon=2")
    assert s["jobs"] == 3 and s["finished"] == 3, s
    assert s["unmanaged_touched"] == 0
    # both kills injected, unless the jobs ran faster than predicted and the replay ended before one came due
    # (the faults are spread over 5-85 % of the predicted wall time); then the summary says so, never silently
    assert s["faults"]["kill_daemon"] + s["faults_not_reached"].get("kill_daemon", 0) == 2, s
    assert s["faults"]["kill_daemon"] >= 1, s
    assert s["avg_jct_h"] > 0 and s["predicted_avg_jct_h"] > 0
    assert (tmp_path / "out" / "journal.db").is_file()  # the real daemon ran and journaled
    # predicted with the daemon's own rounds' phase: it started after the replay's clock, so its first round came
    # after the first arrival (trace second 0), by its start-up time at K = 60
    assert -60.0 * 30 < s["predicted_lead_s"] < 0.0, s
    assert s["predicted_at_first_arrival_avg_jct_h"] > 0
    daemon = yaml.safe_load((tmp_path / "out" / "daemon.yaml").read_text())
    assert daemon["requeue_delay_s"] == 11.0  # cred_expire + 1 in wall seconds, not divided by the speedup
    # every job left only plans the daemon decided: its admin comment names a slurmplan decision
    starts = [json.loads(line) for f in (tmp_path / "out" / "jobs").glob("*.events.jsonl") for line in f.open()]
    assert {e["ev"] for e in starts} >= {"start", "done"}


@pytest.mark.slurm
def test_plain_slurm_mode_runs_without_daemon(replay_cluster, tmp_path, monkeypatch, capsys) -> None:
    s = _replay(replay_cluster, tmp_path, monkeypatch, capsys, "--policy", "slurm_fifo")
    assert s["finished"] == 3 and s["unmanaged_touched"] == 0 and s["restarts_per_job"] == 0
    assert not (tmp_path / "out" / "journal.db").exists()  # no daemon in plain-Slurm mode
    assert s["predicted_lead_s"] is None  # no rounds to take a phase from
    starts = [json.loads(line) for f in (tmp_path / "out" / "jobs").glob("*.events.jsonl") for line in f.open()]
    # jobs ran as submitted: the v100 request ran on v100, the t4 request on t4
    by_rate = {e["gpu_type"] for e in starts if e["ev"] == "start"}
    assert {"v100", "t4"} <= by_rate


def test_a_fault_due_when_it_cannot_be_injected_comes_due_again_and_one_never_due_is_counted() -> None:
    schedule = FaultSchedule([(1.0, "kill_daemon"), (2.0, "kill_daemon"), (9.0, "restart_slurmctld")])
    assert schedule.due(0.5) == []
    assert schedule.due(2.5) == ["kill_daemon", "kill_daemon"]
    schedule.again("kill_daemon", 2.5)  # the daemon was down for the second
    assert schedule.left() == {"kill_daemon": 1, "restart_slurmctld": 1}
    assert schedule.due(3.0) == ["kill_daemon"]
    assert schedule.left() == {"restart_slurmctld": 1}  # the replay ends at 3 s: one restart never came due
    assert schedule.due(10.0) == ["restart_slurmctld"] and schedule.left() == {}


def test_fault_spec_is_parsed_and_bad_specs_name_the_part() -> None:
    assert parse_faults("kill-daemon=20,restart-slurmctld=2") == FaultPlan(20, 2, 0.0)
    assert parse_faults("fail-scontrol=0.1").fail_scontrol == 0.1
    for bad in ("kill-daemon", "kill-deamon=2", "kill-daemon=-1", "fail-scontrol=1.5", "kill-daemon=1,kill-daemon=2"):
        with pytest.raises(ValidationError, match="faults"):
            parse_faults(bad)


def test_plain_slurm_prediction_decides_at_every_tick_not_in_rounds(tmp_path) -> None:
    # Slurm's main scheduler runs at every submission and completion: the prediction of plain Slurm must not make
    # a job that arrives on an idle cluster wait for the daemon's next 360 s round (it predicted 1.16 h avg JCT
    # on the shipped trace where plain Slurm measured 0.99 h).
    from slurmplan.replay.harness import ReplayConfig, predict

    cfg = ReplayConfig(_trace(tmp_path), "slurm_fifo", tmp_path / "out")
    assert cfg.tick_s == 30.0
    result = predict(cfg, "a100:2x4,t4:2x2,v100:2x4", 11.0 * 30)
    assert result.round_s == cfg.tick_s
    first = {j.job_id: j.first_start_s - j.arrival_s for j in result.jobs}
    assert max(first.values()) <= cfg.tick_s  # three jobs on an idle cluster: each starts at the next tick
    assert all(j.restarts == 0 for j in result.jobs)
    managed = predict(ReplayConfig(_trace(tmp_path), "slurmplan", tmp_path / "o2"), "a100:2x4,t4:2x2,v100:2x4", 330)
    assert managed.round_s == 360.0  # the daemon keeps its rounds


def test_prediction_charges_slurms_start_latency_k_times_at_every_start(tmp_path) -> None:
    # Slurm takes ~3.5 wall s from a release to the job's script running (PrologSlurmctld, slurmd's launch); at
    # speedup K that is 3.5 K trace s per start, which an instant start in the simulator left out of the prediction.
    from slurmplan.replay.harness import ReplayConfig, predict

    jct = {}
    for latency in (0.0, 4.0):
        cfg = ReplayConfig(_trace(tmp_path), "slurm_fifo", tmp_path / "out", speedup=30.0, start_latency_wall_s=latency)
        result = predict(cfg, "a100:2x4,t4:2x2,v100:2x4", 11.0 * 30)
        assert all(j.restarts == 0 for j in result.jobs)  # one start each, on an idle cluster
        jct[latency] = {j.job_id: j.finish_s - j.arrival_s for j in result.jobs}
    assert jct[4.0] == {job: pytest.approx(t + 4.0 * 30, abs=31) for job, t in jct[0.0].items()}
    with pytest.raises(ValidationError, match="start_latency"):
        ReplayConfig(_trace(tmp_path), "slurm_fifo", tmp_path / "out", start_latency_wall_s=-1.0)


def test_daemon_runs_the_policy_with_its_durations_divided_by_k_as_its_own_times(tmp_path) -> None:
    # The daemon's round, tick and costs are divided by K; the flagship's own durations (hold_s, prior_floor_s,
    # guard_ahead_s, ...) must be too, or at K = 30 its 1 h hold is 30 h of trace and a job that told no steps
    # counts as 3 h long, where the prediction (trace seconds, unscaled) sees 1 h and 6 min.
    from slurmplan.policy.registry import load_policy
    from slurmplan.replay.harness import ReplayConfig, _daemon_config

    out = tmp_path / "out"
    out.mkdir()
    cfg = ReplayConfig(_trace(tmp_path), "slurmplan", out, speedup=30.0)
    daemon = yaml.safe_load(_daemon_config(cfg, out, 11.0).read_text())
    assert daemon["round_s"] == pytest.approx(360.0 / 30)
    scaled = load_policy(daemon["policy"]).params
    plain = load_policy("slurmplan").params
    assert plain["hold_s"] == 3600.0 and plain["prior_floor_s"] == 360.0  # the preset, in trace seconds
    timed = [name for name in plain if name.endswith("_s")]
    assert {"hold_s", "prior_floor_s", "guard_ahead_s", "max_wait_s"} <= set(timed)
    for name in timed:
        assert scaled[name] == pytest.approx(plain[name] / 30), name
    assert {k: v for k, v in scaled.items() if k not in timed} == {k: v for k, v in plain.items() if k not in timed}


@pytest.mark.parametrize("restarts", [0, 1])
def test_payload_counts_from_its_launch_not_from_when_python_was_ready(tmp_path, restarts) -> None:
    # Python + torch take seconds to start on the shared machine, which K = 30 turns into minutes of trace time
    # per start. The payload counts from the batch script's launch (a restart's start-up is part of its
    # restart_cost_s), so 1 wall s of work launched 10 s ago is done at once after Python is ready.
    import os
    import subprocess
    import sys
    import time

    from slurmplan.replay.payload import LAUNCHED_ENV

    events = tmp_path / "ev.jsonl"
    spec = {
        "trace_job": 1, "model": "gpt2", "gpus": 1, "managed": False, "speedup": 30, "work_total": 300.0,
        "restart_cost_s": 78.0, "report_every_s": 5.0, "node_types": {}, "events": str(events),
        "candidates": [{"gpu_type": None, "gpus": 1, "stages": 1, "throughput": 10.0}],
        "checkpoint_dir": str(tmp_path / "ckpt"),
    }  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    launched = time.time() - 10.0
    env = {**os.environ, LAUNCHED_ENV: f"{launched:.6f}", "SLURM_RESTART_COUNT": str(restarts)}
    env.pop("SLURM_JOB_ID", None)
    cmd = [sys.executable, "-m", "slurmplan.replay.payload", str(tmp_path / "spec.json")]
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=60).returncode == 0
    start, done = (json.loads(line) for line in events.read_text().splitlines())
    assert start["ev"] == "start" and start["t"] == pytest.approx(launched, abs=1e-3)
    assert start["ready"] > start["t"] and done["ev"] == "done"
    assert done["t"] - start["ready"] < 0.9  # without the credit: >= 1 s of work (+ 2.6 s restart cost)


@pytest.mark.parametrize("hold", [True, False])
def test_managed_jobs_are_submitted_held_only_where_no_job_submit_lua_holds_them(tmp_path, hold) -> None:
    # With slurmplan's job_submit.lua (`devcluster up --site`, a site), `sbatch --hold` is the user's own hold,
    # which the daemon never lifts (issue 24): a replay that passed it there left every managed job held for good.
    from slurmplan.replay.schedule import build_submissions
    from slurmplan.sim.cluster import parse_cluster
    from slurmplan.sim.trace import read_trace

    jobs = read_trace(_trace(tmp_path))
    cluster = parse_cluster("a100:1x4,t4:1x2")
    kw = {"restart_cost_s": 3.0, "report_dir": tmp_path / "reports", "hold": hold}
    subs = build_submissions(jobs, cluster, "slurmplan", 30.0, tmp_path, {}, **kw)
    assert subs and all(("--hold" in s.options) == hold for s in subs)
    assert all(any(o.startswith("--comment=slurmplan:") for o in s.options) for s in subs)
    plain = build_submissions(jobs, cluster, "slurm_fifo", 30.0, tmp_path, {}, **kw)
    assert not any("--hold" in s.options for s in plain)


def test_cred_expire_and_job_submit_are_read_from_one_show_config() -> None:
    """The replay reads ``scontrol show config`` once; each question about it is then a pure read of that text."""
    from slurmplan.slurm import replay_ops
    from slurmplan.slurm.reader import show_config

    conf = show_config("AuthInfo                = socket=/run/munge.sock,cred_expire=30\nJobSubmitPlugins = (null)\n")
    assert replay_ops.auth_cred_expire_s(conf) == 30.0
    assert replay_ops.auth_cred_expire_s({"AuthInfo": "cred_expire=soon"}) == replay_ops.SLURM_CRED_EXPIRE_S
    assert replay_ops.auth_cred_expire_s(None) == replay_ops.SLURM_CRED_EXPIRE_S == 120.0
    assert not replay_ops.site_holds_jobs(conf) and not replay_ops.site_holds_jobs(None)


def test_daemon_lead_is_read_from_the_journals_first_round(tmp_path) -> None:
    """The replay predicts with the phase of the daemon's rounds: trace seconds from its first round to the first
    arrival, from the round the journal recorded first (not a later one, not the ticks)."""
    from slurmplan.control.journal import Journal
    from slurmplan.replay.harness import _daemon_lead_s
    from slurmplan.sim.trace import read_trace

    jobs = read_trace(_trace(tmp_path))  # first arrival at trace second 0
    assert _daemon_lead_s(tmp_path, 1000.0, 30.0, jobs) is None  # no journal yet
    with Journal(tmp_path / "journal.db") as journal:
        assert journal.decisions.first_round_at() is None
        journal.decisions._record_round(7, 2, 1013.5, None, "slurmplan")
        journal.decisions._record_round(1, 1, 1001.5, None, "slurmplan")
    assert _daemon_lead_s(tmp_path, 1000.0, 30.0, jobs) == -45.0  # 1.5 wall s after the start, at K = 30
    assert _daemon_lead_s(None, 1000.0, 30.0, jobs) is None  # plain Slurm: no daemon
