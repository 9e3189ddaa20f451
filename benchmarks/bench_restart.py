"""A move's restart on the local Slurm cluster: checkpoint signal -> running again in the new configuration.

Starts its own dev cluster with Slurm's default ``cred_expire`` (120 s), submits one job that requeue-holds
itself on the checkpoint signal (as the launcher does), then moves it between the a100 and v100 nodes the way
a tick does: SIGNAL; once it is requeue-held, UPDATE to the other type and its node, RELEASE. Each move is
timed from the signal to ``RUNNING`` on the target node, split at the requeue. Two modes:

* ``before``: the release leaves Slurm's begin time in place (a requeued batch job may start only
  ``cred_expire + 1`` s later: 121 s);
* ``after``: slurmplan's backend as it is, which resets ``StartTime=now`` for a restart onto other nodes.

Every release goes through a new backend (a cron tick's), which knows where the job ran only from the
``previous_nodes`` the RELEASE carries. Prints the median of each mode (``--json``: one object last).

    python benchmarks/bench_restart.py [--moves 3] [--mode both|before|after] [--json]

``before`` costs about two minutes per move.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmplan.domain import Action, ActionKind
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devlayout import load_layout

TRAP = "#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 3600 & wait\n"
NODES = {"before": ("a100n1", "v100n1"), "after": ("a100n2", "v100n2")}
"""Each mode's job moves between its own a100 and v100 node (never onto nodes the other mode's cancelled job may
still be leaving), and never onto the node it just left, where the old launch credential is revoked (there
Slurm's wait is kept by design)."""


class SlurmWaitBackend(SlurmBackend):
    """The backend without the begin-time reset: what a release cost before (``--mode before``)."""

    def _start_now(self, releases: Sequence[Action]) -> None:
        return None


def job_record(env: dict[str, str], job_id: int) -> dict[str, Any]:
    """The job's ``squeue --json`` record (22.05's ``--json`` ignores ``--jobs``: every job comes back)."""
    out = subprocess.run(["squeue", "--json", "--states=all"], env=env, capture_output=True, text=True)
    jobs = json.loads(out.stdout or "{}").get("jobs", []) if out.returncode == 0 else []
    return next((j for j in jobs if j.get("job_id") == job_id), {})


def wait_for(env: dict[str, str], job_id: int, pred: Any, timeout: float, what: str) -> float:
    """Poll every 0.2 s until ``pred(record)``; returns the monotonic time it held."""
    end = time.monotonic() + timeout
    record: dict[str, Any] = {}
    while time.monotonic() < end:
        record = job_record(env, job_id)
        if pred(record):
            return time.monotonic()
        time.sleep(0.2)
    state = f"{record.get('job_state')} ({record.get('state_reason')}) on {record.get('nodes') or '-'}"
    raise TimeoutError(f"job {job_id}: {what} not reached in {timeout:.0f} s; it is {state}")


def move(env: dict[str, str], job_id: int, ran_on: str, target: tuple[str, str], mode: str) -> tuple[float, float]:
    """One move; returns (signal -> requeue-held, signal -> running on the target) seconds."""
    gpu_type, node = target
    tick = SlurmBackend(env)
    tick.snapshot()
    started = time.monotonic()
    assert tick.apply([Action(ActionKind.SIGNAL, job_id, signal="USR2")])[0].ok
    held = wait_for(
        env, job_id, lambda j: j.get("job_state") == "PENDING" and j.get("priority") == 0, 60, "requeue-held"
    )
    cron = (SlurmWaitBackend if mode == "before" else SlurmBackend)(env)  # the next tick: a new process
    cron.snapshot()
    update = Action(ActionKind.UPDATE, job_id, gpu_type, 1, 1, (node,))
    release = Action(ActionKind.RELEASE, job_id, previous_nodes=(ran_on,))
    results = cron.apply([update, release])
    assert all(r.ok for r in results), results
    running = wait_for(
        env, job_id, lambda j: j.get("job_state") == "RUNNING" and j.get("nodes") == node, 300, f"running on {node}"
    )
    time.sleep(1.0)  # the restarted script sets its trap before the next signal
    return held - started, running - started


def run_mode(env: dict[str, str], workdir: Path, mode: str, moves: int) -> list[tuple[float, float]]:
    script = workdir / f"trap-{mode}.sh"
    script.write_text(TRAP)
    out = subprocess.run(
        ["sbatch", "--parsable", "--gres=gpu:1", "--constraint=a100", f"--nodelist={NODES[mode][0]}", "--time=60",
         f"--output={workdir}/%j.out", str(script)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    job_id = int(out.stdout.strip().split(";")[0])
    wait_for(env, job_id, lambda j: j.get("job_state") == "RUNNING", 120, "first start")
    time.sleep(1.0)
    samples = []
    ran_on = NODES[mode][0]
    try:
        for i in range(moves):
            target = ("v100", NODES[mode][1]) if i % 2 == 0 else ("a100", NODES[mode][0])
            requeue_s, total_s = move(env, job_id, ran_on, target, mode)
            ran_on = target[1]
            samples.append((requeue_s, total_s))
            print(f"  {mode} move {i + 1}: requeued {requeue_s:.2f} s, running {total_s:.2f} s", file=sys.stderr)
    finally:
        subprocess.run(["scancel", str(job_id)], env=env, capture_output=True)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=3, help="moves per mode (default 3)")
    parser.add_argument("--mode", choices=("both", "before", "after"), default="both")
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON object on stdout")
    args = parser.parse_args()
    if args.moves < 1:
        parser.error(f"--moves {args.moves}: a number >= 1")
    root = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    cluster = DevCluster(load_layout(None, {"cred_expire": None}), root / "cluster")  # Slurm's default: 120 s
    cluster.up(timeout=120)
    doc: dict[str, Any] = {"moves": args.moves, "cred_expire": "default (120 s)"}
    try:
        for mode in ("before", "after") if args.mode == "both" else (args.mode,):
            samples = run_mode(cluster.env, root, mode, args.moves)
            requeue = statistics.median(s[0] for s in samples)
            total = statistics.median(s[1] for s in samples)
            doc[mode] = {"requeue_s": round(requeue, 2), "restart_s": round(total, 2)}
            print(
                f"{mode}: median signal -> requeued {requeue:.2f} s, signal -> running in the new configuration "
                f"{total:.2f} s ({args.moves} moves)",
                flush=True,
            )
    finally:
        cluster.down()
    if args.json:
        print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
