"""The journal's cost per tick and per operator read, with N managed jobs.

Writes what one tick of the daemon writes (scheduler state, decisions, candidates, intents, in one
transaction; then marks every intent applied), for ``--ticks`` ticks, and times ``history --limit 100`` and
``explain`` over the result. Only the one-class ``Journal`` methods are used (kept as delegates of the stores),
so the same script measures the journal before and after it became stores. Prints medians.

    python benchmarks/bench_journal.py [--jobs 200] [--ticks 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from slurmplan.control.explain import explain_job, history
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.state_store import save_state
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()
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
