"""The training emulator a replayed job runs: ``python -m slurmplan.replay.payload SPEC``.

It does no arithmetic worth a GPU, but everything around the arithmetic is the real launcher's:

* the plan it runs with comes from ``slurmplan.launch.plan_env.load_assigned_plan`` (the SPANK environment, else
  the daemon's admin comment via ``squeue``), exactly as the launcher reads it;
* its progress rate is what the performance model gives that GPU type, count and plan (the candidates the
  harness priced with the simulator's own ``build_workloads``, written into SPEC), times the speedup K: one wall
  second is K trace seconds;
* the checkpoint signal installs ``slurmplan.launch.signals.StopFlag``; on it the step count goes through
  ``slurmplan.launch.checkpoint.CheckpointStore`` and the job requeues itself through
  ``slurmplan.launch.requeue.requeue_job`` (held when managed), and a restart resumes from the latest checkpoint;
* throughput reports are ``slurmplan.launch.reports.append_report`` lines (the ``perf.measurements`` codec),
  in samples per *trace* second, so that the daemon's model is fed the figures the trace means, not K times them.

A restart pays ``restart_cost_s / K`` wall seconds before progressing (the reconfiguration cost the simulator
charges). Time counts from the moment Slurm launched the batch script (``LAUNCHED_ENV``, set by the script before
Python starts), not from when Python is ready: the interpreter and torch take 1.5-5 wall s to import on the shared
2-core machine, which K turns into 45-150 trace s per start, a cost no real job pays K times over. A restart's
start-up is part of its ``restart_cost_s`` (Rubick's 78 s include the process restart); a first start's is not
charged, as the simulator charges none. Events (start, checkpoint, done) go to one JSON-lines file per job for the
harness's summary; a start's ``t`` is the launch, ``ready`` when Python was.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from slurmplan.domain import Measurement, Plan
from slurmplan.launch.checkpoint import CheckpointStore
from slurmplan.launch.plan_env import load_assigned_plan
from slurmplan.launch.reports import append_report, report_path
from slurmplan.launch.requeue import requeue_job
from slurmplan.launch.signals import StopFlag, resolve_signal

log = logging.getLogger("slurmplan.replay.payload")

LAUNCHED_ENV = "SLURMPLAN_REPLAY_LAUNCHED"
"""Wall time (epoch seconds) at which the batch script started, before Python: written by the harness's script."""
TICK_S = 0.2
"""Wall seconds between step-counter updates (the checkpoint flag is read at each)."""
MAX_REQUEUES = 1000
REQUEUE_TRIES = 30


def rate_for(spec: dict[str, Any], gpu_type: str | None, gpus: int, stages: int) -> float:
    """The model's throughput (work units per trace second) of this configuration, as ``Workload.rate`` picks it."""
    matches = [c for c in spec["candidates"] if c["gpu_type"] == gpu_type and c["gpus"] == gpus]
    staged = [c for c in matches if c["stages"] == stages]
    return max((c["throughput"] for c in (staged or matches)), default=0.0)


def launched_at(now: float | None = None) -> float:
    """When Slurm launched this job's script (``LAUNCHED_ENV``), or now if unknown; never in the future."""
    now = time.time() if now is None else now
    try:
        return min(now, float(os.environ.get(LAUNCHED_ENV, "").replace(",", ".")))
    except ValueError:
        return now


def _event(path: Path, **fields: Any) -> None:
    line = json.dumps({"t": time.time(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _configuration(spec: dict[str, Any]) -> tuple[str | None, int, Plan, bool]:
    """GPU type, count and plan this run has: the daemon's decision when managed, else the Slurm allocation."""
    assigned = load_assigned_plan()
    node = os.environ.get("SLURMD_NODENAME", "")
    node_type = spec["node_types"].get(node)
    gpus = int(os.environ.get("SLURM_GPUS_ON_NODE") or 0) * int(os.environ.get("SLURM_JOB_NUM_NODES") or 1)
    if assigned.managed:
        return assigned.gpu_type or node_type, assigned.gpus or gpus or spec["gpus"], assigned.plan, True
    return node_type, gpus or spec["gpus"], assigned.plan, spec.get("managed", False)


def run(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    speedup = float(spec["speedup"])
    events = Path(spec["events"])
    store = CheckpointStore(spec["checkpoint_dir"], keep=1)
    flag = StopFlag(resolve_signal()).install()
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    state = store.load() or {"work": 0.0}
    work = saved = float(state["work"])
    gpu_type, gpus, plan, managed = _configuration(spec)
    rate = rate_for(spec, gpu_type, gpus, plan.pp)
    ready = time.time()
    launched = launched_at(ready)
    _event(events, t=launched, ready=ready, ev="start", job=os.environ.get("SLURM_JOB_ID"), gpu_type=gpu_type,
           gpus=gpus, work=work, rate=rate, restarts=restarts)  # fmt: skip
    if rate <= 0:
        log.error("no throughput for %s x%d in the model; this configuration cannot make progress", gpu_type, gpus)
    cost = float(spec.get("restart_cost_s", 0.0)) / speedup if state.get("work", 0.0) > 0 or restarts > 0 else 0.0
    time.sleep(max(0.0, launched + cost - time.time()))  # the start-up so far is part of the restart cost
    total = float(spec["work_total"])
    reported = time.monotonic()
    last = time.monotonic() - max(0.0, time.time() - (launched + cost))  # progress since launch (+ restart cost)
    while work < total:
        time.sleep(TICK_S)
        now = time.monotonic()
        work = min(total, work + rate * speedup * (now - last))
        last = now
        if now - reported >= float(spec.get("report_every_s", 5.0)) and rate > 0 and gpu_type:
            unit = float(spec.get("unit_per_step") or 1.0)
            step = {"step": work / unit, "checkpoint_step": saved / unit, "total_steps": total / unit}
            m = Measurement(spec["model"], gpu_type, gpus, plan, rate, job_id=os.environ.get("SLURM_JOB_ID"),
                            time=time.time(), extra=step)  # fmt: skip
            append_report(m, report_path())
            reported = now
        if flag.triggered and work < total:
            store.save({"work": work}, int(work))
            _event(events, ev="checkpoint", work=work)
            for _ in range(REQUEUE_TRIES):  # slurmctld may be restarting: try again rather than end the job
                if requeue_job(hold=managed, max_requeues=MAX_REQUEUES).requeued:
                    return 0
                time.sleep(2.0)
            _event(events, ev="lost", work=work)
            return 1
    _event(events, ev="done", work=work)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m slurmplan.replay.payload SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
