"""From a trace to what a user would submit: one sbatch call per job, at its arrival time divided by K.

Each job's work and candidates come from the simulator's own ``build_workloads`` on the cluster read from Slurm,
so the payload progresses at exactly the rates the prediction uses. The request is the one the simulator submits
(``sim.engine``): an untyped GPU count per node with the requested (or fastest) type as ``--constraint``, a
preference the daemon may move. Managed jobs carry their hints in ``--comment "slurmplan:..."`` and are submitted
held, as the site's job_submit.lua holds them, so the daemon places them; in plain-Slurm mode (``slurm_fifo``)
the comment has no hints and nothing is held: Slurm schedules the jobs as submitted.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import Cluster
from slurmplan.formats import format_hints
from slurmplan.sim.cluster import ClusterSpec, parse_cluster
from slurmplan.sim.trace import TraceJob
from slurmplan.sim.workload import Workload, build_workloads

PLAIN_SLURM = "slurm_fifo"
LAUNCHED_ENV = "SLURMPLAN_REPLAY_LAUNCHED"
"""The batch script's launch time, read by ``replay.payload`` (the same name, kept here so this module does not
import the payload's dependencies)."""
SIGNAL = "USR2"
"""The daemon's checkpoint signal in the default config the replay writes (``checkpoint_signal``)."""


def cluster_spec_of(cluster: Cluster) -> str:
    """The simulator's ``TYPE:NODESxGPUS`` string for a Slurm cluster (the most common GPU count per type)."""
    groups: dict[str, list[int]] = {}
    for node in cluster.nodes:
        if node.gpu_type and node.gpus > 0:
            groups.setdefault(node.gpu_type, []).append(node.gpus)
    if not groups:
        from slurmplan.domain import ValidationError

        raise ValidationError("cluster", "no GPU nodes", "a Slurm cluster with typed GPU nodes", "replay")
    return ",".join(f"{t}:{len(g)}x{max(set(g), key=g.count)}" for t, g in sorted(groups.items()))


@dataclass(frozen=True)
class Submission:
    """One job as the harness submits it."""

    trace: TraceJob
    workload: Workload
    at_wall_s: float
    """Seconds after the replay's start at which it is submitted (arrival / K)."""
    options: tuple[str, ...]
    spec_path: Path
    script_path: Path


def _request(w: Workload, node_gpus: Mapping[str, int]) -> tuple[str | None, int, int]:
    t = w.trace
    gpu_type = t.gpu_type or (w.requested.cell.gpu_type if w.requested else None)
    per_node = min(t.gpus, node_gpus.get(gpu_type, t.gpus)) if gpu_type else t.gpus
    return gpu_type, per_node, -(-t.gpus // per_node)


def build_submissions(
    jobs: Sequence[TraceJob],
    cluster: ClusterSpec,
    policy: str,
    speedup: float,
    out_dir: Path,
    node_types: Mapping[str, str],
    *,
    restart_cost_s: float,
    report_dir: Path,
    partition: str | None = None,
    hold: bool = True,
) -> list[Submission]:
    """Write each job's payload spec and batch script under ``out_dir/jobs``; return them in arrival order.

    ``hold``: submit managed jobs with ``--hold``, as job_submit.lua would hold them. False on a cluster whose
    job_submit.lua holds them itself: there ``--hold`` is the user's own hold, which the daemon never lifts."""
    workloads = build_workloads(jobs, cluster, None)
    node_gpus = {g.gpu_type: g.gpus_per_node for g in cluster.groups}
    managed = policy != PLAIN_SLURM
    jobs_dir = out_dir / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    out: list[Submission] = []
    for t in sorted(jobs, key=lambda j: (j.arrival_s, j.job_id)):
        w = workloads[t.job_id]
        gpu_type, per_node, nodes = _request(w, node_gpus)
        spec = {
            "trace_job": t.job_id,
            "model": t.model or t.job_type or "",
            "gpus": t.gpus,
            "managed": managed,
            "speedup": speedup,
            "work_total": w.work_total,
            "unit_per_step": w.unit_per_step,
            "restart_cost_s": restart_cost_s,
            "report_every_s": 5.0,
            "node_types": dict(node_types),
            "candidates": [
                {"gpu_type": c.cell.gpu_type, "gpus": c.cell.gpus, "stages": c.cell.stages, "throughput": c.throughput}
                for c in w.candidates
            ],
            "events": str(jobs_dir / f"{t.job_id}.events.jsonl"),
            "checkpoint_dir": str(jobs_dir / f"{t.job_id}.ckpt"),
        }
        spec_path = jobs_dir / f"{t.job_id}.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        script = jobs_dir / f"{t.job_id}.sh"
        # exec: the payload is the batch shell itself, so the checkpoint signal (scancel --batch) reaches it
        # the checkpoint signal may come before Python has installed its handler (the daemon can move a job that
        # started a second ago); its default action would kill the job, so it is ignored until then (SIG_IGN
        # survives exec; signal.signal in the payload replaces it)
        # the launch time before Python starts: the payload's start-up is not the job's (see replay.payload)
        script.write_text(
            f"#!/bin/bash\ntrap '' {SIGNAL}\nexport {LAUNCHED_ENV}=$EPOCHREALTIME\n"
            f"exec {shlex.quote(sys.executable)} -m slurmplan.replay.payload {spec_path}\n"
        )
        options = [
            f"--job-name=replay-{t.job_id}",
            f"--output={jobs_dir / f'{t.job_id}.%j.out'}",
            f"--gres=gpu:{per_node}",
            "--requeue",
            f"--export=ALL,SLURMPLAN_REPORT_DIR={report_dir}",
        ]
        if nodes > 1:  # never --nodes=1: Slurm then refuses the daemon's later NumNodes=2 ("Node count ... invalid")
            options.append(f"--nodes={nodes}")
        if gpu_type:
            options.append(f"--constraint={gpu_type}")
        if partition:
            options.append(f"--partition={partition}")
        if managed:
            options += (["--hold"] if hold else []) + [f"--comment={format_hints(t.hints())}"]
        out.append(Submission(t, w, t.arrival_s / speedup, tuple(options), spec_path, script))
    return out


def parse_spec_cluster(spec: str) -> ClusterSpec:
    return parse_cluster(spec)
