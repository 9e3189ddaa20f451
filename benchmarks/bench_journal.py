"""The journal's cost per tick and per operator read, with N managed jobs.

Writes what one tick of the daemon writes (scheduler state, decisions, candidates, intents, in one
transaction; then marks every intent applied), for ``--ticks`` ticks, and times ``history --limit 100`` and
``explain`` over the result. Only the one-class ``Journal`` methods are used (kept as delegates of the stores),
so the same script measures the journal before and after it became stores. Prints medians.

``--restarts N`` also times the daemon's per-tick calibration read (``calibrate(restart_samples(
intents.restart_timeline()))``) on a journal holding N past restarts (signal, update, job-end, job-start each):
over the whole history (``recent=None``, what every tick read before) and over the latest
``RECENT_RESTARTS`` signals (what it reads now).

    python benchmarks/bench_journal.py [--jobs 200] [--ticks 20] [--restarts 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from slurmplan.control.calibration import calibrate, restart_samples
from slurmplan.control.codec import action_to_dict
from slurmplan.control.explain import explain_job, history
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.state_store import save_state
from slurmplan.control.stores.intents import RECENT_RESTARTS
from slurmplan.domain import Action, ActionKind, Assignment, Candidate, Cell, Plan, Reason
from slurmplan.tick import JobState, SchedulerState


def one_tick(j: Journal, tick: int, jobs: int) -> None:
    now = 1000.0 + tick
    cells = [Cell("a100", 2), Cell("v100", 2), Cell("t4", 4)]
    assignments = [
        Assignment(i, Reason.SCHEDULED if (i + tick) % 3 else Reason.WAITING, cells[i % 3], Plan(dp=2), ("n1",))
        for i in range(1, jobs + 1)
    ]
    state = SchedulerState(tick, now, {i: JobState(attained_s=float(tick)) for i in range(1, jobs + 1)})
    actions = [Action(ActionKind.HOLD, i) for i in range(1, jobs + 1, 4)]
    tick_id = j.ticks.begin("act", now)
    with j.transaction():
        save_state(j, state)
        j.decisions.record(tick_id, tick, now, j.decisions.changed(assignments), None, tick % 5 == 0, "las")
        cands = {i: [Candidate(c, 100.0 * (k + 1)) for k, c in enumerate(cells)] for i in range(1, jobs + 1)}
        j.candidates.replace(tick_id, cands if tick % 5 == 0 else {})
        ids = j.intents.add(tick_id, tick, actions, now)
    for action_id in ids:
        j.intents.mark(action_id, ActionStatus.APPLIED, now)
    j.ticks.finish(tick_id, jobs=jobs, actions=len(ids))


def fill_restarts(j: Journal, restarts: int) -> None:
    """``restarts`` past restarts, 600 s apart, of 1/2/4/8-GPU jobs taking 30-90 s, as the journal records them."""
    actions, events = [], []
    for n in range(restarts):
        job, t0, gpus = 1000 + n, 600.0 * n, 2 ** (n % 4)
        for kind, act, at in (
            ("signal", Action(ActionKind.SIGNAL, job, signal="USR2"), t0),
            ("update", Action(ActionKind.UPDATE, job, "a100", gpus), t0 + 2.0),
        ):
            payload = json.dumps(action_to_dict(act))
            row = {"tick_id": 1, "round_index": n, "job_id": job, "kind": kind, "payload": payload}
            actions.append({**row, "status": ActionStatus.CONFIRMED, "created_at": at, "applied_at": at})
        events.append({"job_id": job, "event": "job-end", "time": t0 + 1.0, "detail": "{}"})
        events.append({"job_id": job, "event": "job-start", "time": t0 + 30.0 + n % 61, "detail": "{}"})
    with j.transaction():
        j.db["actions"].insert_all(actions)
        j.db["events"].insert_all(events)


def bench_calibration(path: Path, restarts: int) -> None:
    with Journal(path) as j:
        fill_restarts(j, restarts)
    for label, recent in (
        ("whole history (before)", None),
        (f"latest {RECENT_RESTARTS} signals (after)", RECENT_RESTARTS),
    ):
        times, costs = [], {}
        for _ in range(7):
            with Journal(path) as j:
                t0 = time.perf_counter()
                costs = calibrate(restart_samples(j.intents.restart_timeline(recent))).costs()
                times.append(time.perf_counter() - t0)
        print(f"calibration read, {restarts} restarts journaled, {label}: median "
              f"{statistics.median(times) * 1000:.1f} ms; costs {costs}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=0, help="also time the calibration read with N restarts")
    args = parser.parse_args()
    if args.restarts:
        with tempfile.TemporaryDirectory() as tmp:
            bench_calibration(Path(tmp) / "restarts.db", args.restarts)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.db"
        writes, reads, explains = [], [], []
        with Journal(path) as j:
            j.jobs.upsert([{"job_id": i, "name": f"j{i}", "managed": 1, "state": "PENDING"} for i in range(1, 201)])
            for tick in range(args.ticks):
                t0 = time.perf_counter()
                one_tick(j, tick, args.jobs)
                writes.append(time.perf_counter() - t0)
        for _ in range(21):
            t0 = time.perf_counter()
            with Journal(path) as j:
                rows = history(j, None, 100)
            reads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with Journal(path) as j:
                explain_job(j, 1)
            explains.append(time.perf_counter() - t0)
        size = path.stat().st_size
    ms = 1000.0
    print(f"jobs {args.jobs}, ticks {args.ticks}, journal {size / 1e6:.1f} MB, history rows {len(rows)}")
    print(f"tick write (state+decisions+candidates+intents, marks): median {statistics.median(writes) * ms:.1f} ms")
    print(f"history --limit 100 (open+read):                         median {statistics.median(reads) * ms:.1f} ms")
    print(f"explain JOBID (open+read):                               median {statistics.median(explains) * ms:.1f} ms")


if __name__ == "__main__":
    main()
