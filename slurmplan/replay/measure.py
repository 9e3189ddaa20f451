"""What the replay measured, as a ``SimResult``: so the simulator's metrics, CSVs and plots apply unchanged.

Times come from the payload's own event lines (start, checkpoint, done; wall clock), converted to trace time as
``(t - start) * K``. A run interval ends at the job's next event; one cut without an event (killed, requeued by
the daemon after its grace) ends at the next start, or at the end of the replay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from slurmplan.replay.schedule import Submission
from slurmplan.sim.result import JobRecord, SimResult


def read_events(path: Path) -> list[dict[str, object]]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill: the job's next event says what happened
    return sorted(out, key=lambda e: float(e["t"]))


def events_path(s: Submission) -> Path:
    return s.spec_path.with_name(f"{s.trace.job_id}.events.jsonl")


def measured_result(
    policy: str,
    cluster: str,
    subs: Sequence[Submission],
    submitted: Mapping[int, Submission],
    t0: float,
    speedup: float,
    wall_s: float,
    reconfig_cost_s: float = 0.0,
    round_s: float = 0.0,
) -> SimResult:
    end = wall_s * speedup
    records: list[JobRecord] = []
    deltas: list[tuple[float, int]] = []
    from slurmplan.sim.cluster import parse_cluster

    total = parse_cluster(cluster).total_gpus
    for s in subs:
        events = read_events(events_path(s))
        starts = [e for e in events if e["ev"] == "start"]
        done = next((e for e in events if e["ev"] == "done"), None)
        configs: list[tuple[float, str | None, int]] = []
        run_s = gpu_s = 0.0
        for i, e in enumerate(events):
            if e["ev"] != "start":
                continue
            begin = (float(e["t"]) - t0) * speedup
            stop = (float(events[i + 1]["t"]) - t0) * speedup if i + 1 < len(events) else end
            gpus = int(e.get("gpus") or s.trace.gpus)
            configs.append((begin, e.get("gpu_type"), gpus))  # type: ignore[arg-type]
            run_s += stop - begin
            gpu_s += (stop - begin) * gpus
            deltas += [(begin, gpus), (stop, -gpus)]
        changes = sum(1 for a, b in zip(configs, configs[1:], strict=False) if a[1:] != b[1:])
        records.append(
            JobRecord(
                job_id=s.trace.job_id,
                arrival_s=s.trace.arrival_s,
                gpus=s.trace.gpus,
                account=s.trace.account,
                job_class=s.trace.job_class.value,
                in_window=s.trace.in_window,
                dedicated_s=s.workload.dedicated_s,
                first_start_s=configs[0][0] if configs else None,
                finish_s=(float(done["t"]) - t0) * speedup if done else None,
                state="completed" if done else ("running" if starts else "pending"),
                restarts=max(0, len(starts) - 1),
                reconfigurations=changes,
                run_s=run_s,
                gpu_s=gpu_s,
                configs=tuple(configs),
            )
        )
    times, busy = [0.0], [0]
    level = 0
    for t, d in sorted(deltas):
        level += d
        times.append(t)
        busy.append(level)
    spans = [(r.arrival_s, r.finish_s if r.finish_s is not None else end) for r in records]
    active = [sum(1 for a, f in spans if a <= t < f) for t in times]
    return SimResult(
        policy, cluster, total, reconfig_cost_s, round_s, tuple(records), tuple(times), tuple(busy), tuple(active), end
    )
