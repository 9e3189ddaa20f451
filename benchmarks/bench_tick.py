"""Tick wall time on the local Slurm cluster with N managed jobs, split into observe / decide / act.

Starts its own dev cluster (default layout: a100, v100, t4 nodes), submits N held managed jobs of mixed
models and sizes, then runs ticks with ``round_s`` = 1 s so that every tick is a new round (the worst case:
policy solved, mechanism run, actions diffed), then ticks between rounds (confirm, renew, refill). Prints the
median of each phase for both kinds of tick, and the Slurm commands each tick ran (``slurm_calls``: it should
grow with the jobs whose decision changed, not with the queue).

    python benchmarks/bench_tick.py [--jobs 200] [--ticks 5] [--policy las] [--json]

``--json`` prints one JSON object last: ``{"new_round": {"observe_s", "decide_s", "act_s", "total_s",
"slurm_calls", "actions", "updates", "annotates"}, "between_rounds": {...}, "jobs", "submit_s"}`` (medians over
the ticks). ``--policy fifo`` keeps every decision from round to round: then a new round should cost no Slurm
call beyond the two reads (running jobs that keep their configuration are not re-annotated).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from slurmplan.control.config import DaemonConfig
from slurmplan.control.runner import Daemon, TickReport
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devlayout import load_layout

MODELS = ("gpt2", "bert-large", "vit-b", "llama2-7b", "t5-large")


def submit(env: dict[str, str], workdir: Path, n: int) -> None:
    """N held managed jobs, submitted by one shell loop (one process per sbatch, no Python per job)."""
    script = workdir / "job.sh"
    script.write_text("#!/bin/bash\ntrap 'scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2\nsleep 900 & wait\n")
    lines = ["set -e"]
    for i in range(n):
        gpus = (1, 1, 2, 4)[i % 4]
        hint = f"slurmplan:model={MODELS[i % len(MODELS)]};gpus={gpus};min={gpus};max={gpus}"
        lines.append(f"sbatch --hold --gres=gpu:{gpus} --comment '{hint}' -o /dev/null {script} >/dev/null")
    loop = workdir / "submit.sh"
    loop.write_text("\n".join(lines) + "\n")
    subprocess.run(["bash", str(loop)], env={**os.environ, **env}, check=True, cwd=workdir)


class CountingDaemon(Daemon):
    """The daemon, recording how many Slurm commands each tick ran (the backend counts them)."""

    def tick(self) -> TickReport:
        backend = self.backend
        before = backend.calls  # type: ignore[attr-defined]
        report = super().tick()
        self.last_calls = backend.calls - before  # type: ignore[attr-defined]
        return report


def run_ticks(daemon: CountingDaemon, n: int, pause: float, new_round: bool) -> list[tuple[TickReport, int]]:
    """``n`` ticks of the wanted kind (a tick of the other kind, e.g. the first one's, is run but not kept)."""
    reports = []
    for _ in range(n + 1):
        time.sleep(pause)
        r = daemon.tick()
        print(
            f"  tick {r.tick_id}: {'new round' if r.new_round else 'between'}, {r.managed} managed, "
            f"{len(r.actions)} actions ({_kinds(r)}), {daemon.last_calls} slurm calls, observe {r.observe_s:.3f} s, "
            f"decide {r.decide_s:.3f} s, act {r.act_s:.3f} s{' SKIPPED ' + r.skipped if r.skipped else ''}",
            file=sys.stderr,
            flush=True,
        )
        if not r.skipped and r.new_round == new_round:
            reports.append((r, daemon.last_calls))
        if len(reports) == n:
            break
    return reports


def _kinds(r: TickReport) -> str:
    counts = Counter(a.kind.value for a in r.actions)
    return " ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none"


def medians(ok: list[tuple[TickReport, int]]) -> dict[str, float]:
    if not ok:
        return {}
    med = {f"{k}_s": statistics.median(getattr(r, f"{k}_s") for r, _ in ok) for k in ("observe", "decide", "act")}
    med["total_s"] = statistics.median(r.observe_s + r.decide_s + r.act_s for r, _ in ok)
    med["slurm_calls"] = statistics.median(c for _, c in ok)
    med["actions"] = statistics.median(len(r.actions) for r, _ in ok)
    for kind in ("update", "annotate"):  # a running job that keeps its configuration should cost neither
        med[f"{kind}s"] = statistics.median(sum(a.kind.value == kind for a in r.actions) for r, _ in ok)
    med["ticks"] = len(ok)
    return {k: round(v, 3) for k, v in med.items()}


def print_medians(what: str, med: dict[str, float]) -> None:
    if not med:
        print(f"{what}: no tick ran", file=sys.stderr)
        return
    print(
        f"{what}, median of {med['ticks']:g}: observe {med['observe_s']:.3f} s, decide {med['decide_s']:.3f} s, "
        f"act {med['act_s']:.3f} s, total {med['total_s']:.3f} s, {med['slurm_calls']:g} slurm calls, "
        f"{med['actions']:g} actions ({med['updates']:g} update, {med['annotates']:g} annotate)",
        file=sys.stderr,
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--policy", default="las")
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON object on stdout")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tick-"))
    cluster = DevCluster(load_layout(), root / "cluster")
    cluster.up(timeout=120)
    try:
        t0 = time.perf_counter()
        submit(cluster.env, root, args.jobs)
        submit_s = time.perf_counter() - t0
        print(f"submitted {args.jobs} held managed jobs in {submit_s:.1f} s", file=sys.stderr, flush=True)
        config = DaemonConfig(database=root / "journal.db", report_dir=root / "reports", round_s=1.0,
                              policy=args.policy)  # fmt: skip
        backend = SlurmBackend(env=cluster.env)
        rounds = medians(run_ticks(CountingDaemon(config, backend=backend), args.ticks, 1.1, new_round=True))
        print_medians("new-round ticks", rounds)
        between = CountingDaemon(replace(config, round_s=3600.0), backend=backend)
        steady = medians(run_ticks(between, args.ticks, 0.2, new_round=False))
        print_medians("between-round ticks", steady)
        if args.json:
            doc = {"new_round": rounds, "between_rounds": steady, "jobs": args.jobs, "policy": args.policy,
                   "submit_s": round(submit_s, 1)}  # fmt: skip
            print(json.dumps(doc))
        return 0 if rounds else 1
    finally:
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
