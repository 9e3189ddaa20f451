"""The replay loop: submit the trace's jobs at arrival / K, run the real daemon, inject faults, wait, summarise.

Time: the harness runs in wall seconds; every figure it reports is in trace seconds, ``(wall - start) * K``.
The daemon runs with every duration of its config divided by K (round, tick interval, grace, reconfiguration
cost, priority reset), so its decisions happen at the trace's times. Slurm's own delays are not scaled (a
requeued job waits ``cred_expire + 1`` wall seconds); the prediction charges exactly that, times K.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from slurmplan.domain import ValidationError
from slurmplan.replay.faults import FaultPlan
from slurmplan.replay.measure import measured_result
from slurmplan.replay.schedule import PLAIN_SLURM, Submission, build_submissions, cluster_spec_of
from slurmplan.sim.engine import SimOptions
from slurmplan.sim.metrics import summarize
from slurmplan.sim.result import SimResult
from slurmplan.sim.runner import RunSpec, simulate
from slurmplan.sim.trace import TraceJob, read_trace
from slurmplan.slurm import replay_ops
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.reader import JobRecord
from slurmplan.tick_types import DAEMON_INTERVAL_S, TickConfig

log = logging.getLogger(__name__)


START_LATENCY_WALL_S = 3.5
"""Release -> training on the local dev cluster (i15r, slurmctld.log and the payload's events): Slurm marks the
job started 0.7 s after the release, the site's PrologSlurmctld takes ~2 s, slurmd's launch ~1 s. A wall-clock
constant, so at speedup K it costs K times as much trace time; the simulator charges it at every start."""


@dataclass(frozen=True)
class ReplayConfig:
    trace: Path
    policy: str
    out_dir: Path
    speedup: float = 30.0
    faults: FaultPlan = field(default_factory=FaultPlan)
    round_s: float = TickConfig.round_s
    tick_s: float = DAEMON_INTERVAL_S
    reconfig_cost_s: float = TickConfig.reconfig_cost_s
    grace_s: float = TickConfig.grace_s
    priority_reset_s: float = TickConfig.priority_reset_s
    max_wall_s: float = 3600.0
    start_latency_wall_s: float = START_LATENCY_WALL_S
    """Slurm's launch latency in wall seconds, which the prediction charges K times at every start."""
    partition: str | None = None
    progress: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ValidationError("speedup", self.speedup, "a number > 0", "replay")
        if not self.start_latency_wall_s >= 0:
            raise ValidationError("start_latency", self.start_latency_wall_s, "a number of seconds >= 0", "replay")


@dataclass
class ReplayOutcome:
    summary: dict[str, object]
    measured: SimResult
    predicted: SimResult


def predict(cfg: ReplayConfig, cluster: str, requeue_delay_s: float, lead_s: float = 0.0) -> SimResult:
    """The simulator on the same trace, cluster and settings, through the shared tick, with Slurm's requeue delay.

    Plain Slurm has no rounds: its main scheduler runs at every submission and completion (and backfill every
    ``bf_interval``), so its prediction makes every tick a round (``sim.runner.on_events``, as every simulation
    of ``slurm_fifo`` does); with the daemon's 360 s rounds a job arriving on an idle cluster waited up to a
    round that Slurm does not make it wait.

    ``lead_s``: the daemon started this many trace seconds before the first arrival (``SimOptions.lead_s``; the
    rounds' phase, which a real replay does not fix: ``benchmarks/phase_spread.py``).
    """
    options = SimOptions(
        lead_s=lead_s,
        reconfig_cost_s=cfg.reconfig_cost_s,
        round_s=cfg.round_s,
        tick_s=cfg.tick_s,
        requeue_delay_s=requeue_delay_s,
        start_latency_s=cfg.start_latency_wall_s * cfg.speedup,
    )
    return simulate(RunSpec(str(cfg.trace), cluster, cfg.policy, options))


def scaled_policy(policy: str, k: float, out: Path) -> Path:
    """The policy file the replay's daemon runs: ``policy`` with every duration parameter (a name ending in
    ``_s``, its class's defaults included: the flagship's ``hold_s``, ``prior_floor_s``, ``guard_ahead_s`` ...)
    divided by K, as the daemon's own times are. The prediction runs the unscaled policy in trace seconds, so
    both backends see the same times (unscaled, a 1 h hold was 30 h of trace at K = 30)."""
    from slurmplan.policy.registry import build_policy, load_config

    config = load_config(policy)
    params = dict(build_policy(config).params)
    for name, value in params.items():
        if name.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool):
            params[name] = float(value) / k
    data = {"name": config.name, "objective": config.objective, "solver": config.solver, "params": params}
    path = out / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    build_policy(load_config(str(path)))  # a scaled value the class refuses fails here, before the replay starts
    return path


def _daemon_config(cfg: ReplayConfig, out: Path, requeue_delay_wall_s: float) -> Path:
    k = cfg.speedup
    data = {
        "policy": str(scaled_policy(cfg.policy, k, out)),
        "round_s": cfg.round_s / k,
        "interval_s": cfg.tick_s / k,
        "grace_s": max(1.0, cfg.grace_s / k),
        "signal_min_run_s": 0.0,  # the payload takes the signal from exec (trap ''); the simulator signals at once
        "reconfig_cost_s": cfg.reconfig_cost_s / k,
        "requeue_delay_s": requeue_delay_wall_s,  # Slurm's own delay: wall seconds, not scaled
        "priority_reset_s": cfg.priority_reset_s / k,
        "database": str(out / "journal.db"),
        "report_dir": str(out / "reports"),
        "heartbeat_file": str(out / "heartbeat"),
    }
    path = out / "daemon.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


CANARY = "#!/bin/bash\nsleep 100000\n"
"""A job the daemon does not manage (no hints, no GPU), running beside the replay: it must stay untouched."""


def _watch_fields(job: JobRecord) -> tuple[object, ...]:
    return (job.admin_comment, job.tres_per_node, job.restart_cnt, job.priority, job.features, job.job_state)


def run_replay(
    cfg: ReplayConfig, env: dict[str, str], on_progress: Callable[[dict[str, int], float], None] | None = None
) -> ReplayOutcome:
    out = cfg.out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    k = cfg.speedup
    jobs = read_trace(cfg.trace)
    snap = SlurmBackend(env=env).snapshot()
    cluster = cluster_spec_of(snap.cluster)
    node_types = {n.name: n.gpu_type for n in snap.cluster.nodes if n.gpu_type}
    slurm_conf = replay_ops.running_config(env)
    requeue_delay_s = (replay_ops.auth_cred_expire_s(slurm_conf) + 1.0) * k
    from slurmplan.sim.cluster import parse_cluster

    predicted = predict(cfg, cluster, requeue_delay_s)
    subs = build_submissions(
        jobs, parse_cluster(cluster), cfg.policy, k, out, node_types, restart_cost_s=cfg.reconfig_cost_s,
        report_dir=out / "reports", partition=cfg.partition, hold=not replay_ops.site_holds_jobs(slurm_conf),
    )  # fmt: skip
    managed = cfg.policy != PLAIN_SLURM
    rng = random.Random(cfg.seed)
    finishes = [j.finish_s for j in predicted.jobs if j.finish_s is not None]
    expected_wall = max(5.0, (max(finishes) if finishes else predicted.end_s) / k)
    schedule = cfg.faults.schedule(expected_wall, rng)
    daemon = None
    wrapper = None
    if cfg.faults.fail_scontrol > 0:
        wrapper = replay_ops.write_failing_scontrol(out / "fault-bin", cfg.faults.fail_scontrol)
    if managed:
        daemon_yaml = _daemon_config(cfg, out, requeue_delay_s / k)
        daemon = replay_ops.daemon_process(daemon_yaml, env, out / "daemon.log", wrapper)
    canary_script = out / "canary.sh"
    canary_script.write_text(CANARY)
    submitted: dict[int, Submission] = {}
    canary: int | None = None
    injected = {"kill_daemon": 0, "restart_slurmctld": 0, "fail_scontrol": 0}
    t0 = time.time()
    try:
        canary = replay_ops.sbatch(canary_script, ["--job-name=replay-canary", "--output=/dev/null", "-n1"], env)
        before: dict[int, tuple[object, ...]] = {}
        if daemon is not None:
            daemon.start()
        pending = list(subs)
        finished: set[int] = set()
        gone: set[int] = set()
        last_squeue = 0.0
        counts = {"submitted": 0, "running": 0, "done": 0, "jobs": len(subs)}
        while len(finished | gone) < len(subs):
            now = time.time() - t0
            if now > cfg.max_wall_s:
                log.error(
                    "replay stopped after %.0f s (max_wall_s): %d jobs unfinished", now, len(subs) - len(finished)
                )
                break
            while pending and pending[0].at_wall_s <= now:
                s = pending.pop(0)
                job_id = replay_ops.sbatch(s.script_path, list(s.options), env)
                submitted[job_id] = s
                counts["submitted"] += 1
            for kind in schedule.due(now):
                if kind == "kill_daemon" and daemon is not None and not daemon.alive():
                    schedule.again(kind, now)  # it exited on its own and is started below: killed at the next pass
                elif kind == "kill_daemon" and daemon is not None:
                    daemon.kill()
                    injected["kill_daemon"] += 1
                    daemon.start()  # cron or systemd would start it again
                elif kind == "restart_slurmctld" and replay_ops.restart_slurmctld(env):
                    injected["restart_slurmctld"] += 1
            if daemon is not None and not daemon.alive():
                log.warning("the daemon exited; starting it again")
                daemon.start()
            for s in submitted.values():
                if s.trace.job_id not in finished and _done(s):
                    finished.add(s.trace.job_id)
            if time.time() - last_squeue > 2.0:
                last_squeue = time.time()
                records = replay_ops.squeue_all(env)
                if records is not None:
                    running = 0
                    for rec in records:
                        jid = rec.job_id
                        s = submitted.get(jid)
                        if s is None:
                            if jid not in before and jid != canary:
                                before[jid] = _watch_fields(rec)
                            continue
                        state = rec.job_state
                        running += state == "RUNNING"
                        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
                        if state in ended and not _done(s):
                            gone.add(s.trace.job_id)
                    counts["running"] = running
            counts["done"] = len(finished)
            if on_progress is not None:
                on_progress(counts, time.time() - t0)
            time.sleep(0.5)
        # before anything is cancelled: the canary must still be running, untouched
        touched = _unmanaged_touched(env, canary, before, out if managed else None, set(submitted))
    except KeyboardInterrupt:
        print("\ninterrupted: cancelling every job the replay submitted", file=sys.stderr)
        raise
    finally:
        if daemon is not None:
            daemon.stop()
        replay_ops.scancel([*submitted, *([canary] if canary else [])], env)
    wall = time.time() - t0
    if wrapper is not None:
        failed = wrapper / "failed"
        injected["fail_scontrol"] = len(failed.read_text().splitlines()) if failed.exists() else 0
    measured = measured_result(cfg.policy, cluster, subs, submitted, t0, k, wall, cfg.reconfig_cost_s, cfg.round_s)
    first_guess = predicted_h = summarize(predicted)["avg_jct_h"]
    lead_s = _daemon_lead_s(out if managed else None, t0, k, jobs)
    if lead_s is not None:  # the prediction again, with the rounds' phase the daemon ran with
        predicted = predict(cfg, cluster, requeue_delay_s, lead_s=lead_s)
        predicted_h = summarize(predicted)["avg_jct_h"]
    summary = summarize(measured)
    summary.update(
        {
            "predicted_avg_jct_h": predicted_h,
            "measured_vs_predicted": summary["avg_jct_h"] / predicted_h if predicted_h else float("nan"),
            "predicted_lead_s": lead_s,
            "predicted_at_first_arrival_avg_jct_h": first_guess,
            "unmanaged_touched": touched,
            "speedup": k,
            "replay_wall_s": wall,
            "requeue_delay_s": requeue_delay_s,
        }
    )
    if cfg.faults.any:
        summary["faults"] = dict(injected)
        summary["faults_not_reached"] = schedule.left()
        if summary["faults_not_reached"]:
            log.warning("the replay ended before these faults could be injected: %s", summary["faults_not_reached"])
    return ReplayOutcome(summary, measured, predicted)


def _daemon_lead_s(out: Path | None, t0: float, k: float, jobs: Sequence[TraceJob]) -> float | None:
    """Trace seconds from the daemon's first round to the first arrival (negative: the round came after it), or
    None without a daemon or a round. The daemon's rounds keep the grid of its first round
    (``mechanism.engine.on_round_grid``), and a job's size and start depend on where its arrival falls on that
    grid: on the shipped trace the prediction ranges 0.61-0.76 h over the phase alone
    (``benchmarks/phase_spread.py``). The first prediction (the phase where the first arrival opens round 1) is
    kept in the summary as ``predicted_at_first_arrival_avg_jct_h``."""
    if out is None or not (out / "journal.db").exists() or not jobs:
        return None
    from slurmplan.control.journal import Journal

    with Journal(out / "journal.db", readonly=True) as journal:
        first = journal.decisions.first_round_at()
    if first is None:
        return None
    return min(j.arrival_s for j in jobs) - (first - t0) * k


def _done(s: Submission) -> bool:
    events = Path(str(s.spec_path).replace(".json", ".events.jsonl"))
    try:
        return '"ev": "done"' in events.read_text()
    except OSError:
        return False


def _unmanaged_touched(
    env: dict[str, str], canary: int | None, before: dict[int, tuple[object, ...]], out: Path | None, ours: set[int]
) -> int:
    """Changes to jobs the daemon does not manage: journaled actions on them, and the canary's fields changed."""
    touched = 0
    if out is not None and (out / "journal.db").exists():
        from slurmplan.control.journal import Journal

        with Journal(out / "journal.db") as journal:
            touched += sum(1 for row in journal.intents.rows() if row.action.job_id not in ours)
    records = replay_ops.squeue_all(env) or []
    for rec in records:
        jid = rec.job_id
        if jid == canary:
            touched += bool(rec.admin_comment) or rec.restart_cnt > 0 or rec.job_state != "RUNNING"
        elif jid in before:
            now = _watch_fields(rec)
            touched += now[:5] != before[jid][:5]
    return touched
