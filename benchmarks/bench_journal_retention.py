"""Journal size over a simulated year of a 2,000-job site with retention, and how long one prune batch takes.

    python benchmarks/bench_journal_retention.py            # 2,000 jobs, 365 days + 2 at full rate (minutes)
    python benchmarks/bench_journal_retention.py --quick    # 200 jobs, 40 days

The journal is the real one (``control.journal.Journal``: its schema, its retention code); the rows are written
the way the daemon writes them, at a site's rates: 2,000 managed jobs live at any time, each lives a day
(2,000 start and 2,000 finish a day), every new round journals a decision (with its assignment, 370 bytes as
measured on the dev cluster) and an allocation row per job, twelve ticks per round, three actions, two events
and nine candidates per job, one move per job. After every tick's writes the daemon's retention runs as the
daemon runs it (``Daemon.prune``: batches sized to ``TARGET_BATCH_S``, 50 ms budget per tick). The rows are
written with one ``executemany`` per table and round (the daemon's columns and row sizes, not its tick), so the
time goes to what is measured: the journal's growth and its pruning.

To fit in minutes, rounds are 6-hourly for the year (``--year-round-min``); the last two days then run at the real
round length (6 minutes, 240 rounds a day), which is what sets the steady-state size (one day of full rounds is
kept; older decisions keep only the changes, which do not depend on the round length). Goals
(issue 26): the journal stays under a stated size (printed: the size at the end of the year, and the largest
size seen), and no prune batch holds the database for more than 100 ms (the longest batch and the 99th
percentile of every batch are printed, with the last pass that found nothing, which holds the database too: a
tick, or the prolog hook, waits for at most one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmplan.control.journal import Journal  # noqa: E402
from slurmplan.control.runner import PRUNE_BUDGET_S  # noqa: E402

DAY = 86_400.0
DAEMON_INTERVAL_S = 30.0
TICKS_PER_ROUND = 12
"""A 6-minute round with ``interval_s`` 30: each tick prunes (in the hourly phase too, so pruning per round is
what a 6-minute round gives it, spread over the longer round)."""
ASSIGNMENT = json.dumps({"x": "y" * 330, "cell": "a100x4", "plan": "dp4 tp1 pp1 mb2 ga16 z1"})[:370]
DETAIL = "kept: its share of time 0.25, gain 1.02 below the threshold 1.03 "
_KINDS = ("hold", "update", "release")
PAYLOAD = json.dumps({"kind": "update", "job_id": 1, "gpu_type": "a100", "gpus_per_node": 4, "pad": "p" * 200})


class Site:
    def __init__(self, journal: Journal, jobs: int, start: float) -> None:
        self.j, self.jobs, self.now = journal, jobs, start
        self.next_id, self.round, self.tick = 1, 0, 0
        self.live: dict[int, float] = {}  # job id -> end time
        self.batch_s: list[tuple[str, float, float]] = []
        self.checkpoint_s: list[float] = []
        self.peak = 0

    def _exec(self, sql: str, rows: list[tuple]) -> None:
        if rows:
            self.j.db.conn.executemany(sql, rows)

    def churn(self) -> None:
        """Finish jobs whose time is up, start new ones to keep ``jobs`` live (jobs, actions, events, candidates)."""
        done = [jid for jid, end in self.live.items() if end <= self.now]
        new = list(range(self.next_id, self.next_id + self.jobs - len(self.live) + len(done)))
        self.next_id += len(new)
        with self.j.transaction():
            self._exec("UPDATE jobs SET state='completed', finished_at=? WHERE job_id=?", [(self.now, d) for d in done])
            self._exec("INSERT INTO events (job_id, event, time, detail) VALUES (?, 'job-end', ?, '')",
                       [(d, self.now) for d in done])  # fmt: skip
            self._exec("INSERT INTO jobs (job_id, name, state, managed, hints, first_seen, last_seen) "
                       "VALUES (?, 'train', 'pending', 1, 'slurmplan:model=gpt2;gpus=4', ?, ?)",
                       [(n, self.now, self.now) for n in new])  # fmt: skip
            self._exec("INSERT INTO actions (tick_id, round_index, job_id, kind, payload, status, created_at, attempts,"
                       " message) VALUES (?, ?, ?, ?, ?, 'confirmed', ?, 1, 'ok')",
                       [(self.tick, self.round, n, k, PAYLOAD, self.now) for n in new for k in _KINDS])  # fmt: skip
            self._exec("INSERT INTO events (job_id, event, time, detail) VALUES (?, 'job-start', ?, '')",
                       [(n, self.now) for n in new])  # fmt: skip
            self._exec("INSERT INTO candidates (job_id, tick_id, cell, throughput, source, plan, nodes) "
                       "VALUES (?, ?, 'a100x4', 100.0, 'estimated', ?, 1)",
                       [(n, self.tick, PAYLOAD) for n in new for _ in range(9)])  # fmt: skip
        for d in done:
            del self.live[d]
        for i, n in enumerate(new):  # staggered ends: about a day each
            self.live[n] = self.now + DAY * (0.5 + (i % 100) / 100)

    def new_round(self) -> None:
        self.round += 1
        with self.j.transaction():
            self._exec("INSERT INTO rounds (round_index, tick_id, started_at, policy, status, objective) "
                       "VALUES (?, ?, ?, 'las', 'optimal', 1.0)", [(self.round, self.tick, self.now)])  # fmt: skip
            rows = []
            for jid, end in self.live.items():
                cell = "a100x4" if end - self.now > DAY / 2 else "v100x4"  # one move per job, mid-life
                rows.append((self.tick, self.round, self.now, jid, "kept", cell, "dp4", "a100n1", 1.0, 0.25, 90.0,
                             DETAIL, ASSIGNMENT))  # fmt: skip
            self._exec(
                "INSERT INTO decisions (tick_id, round_index, time, job_id, reason, cell, plan, nodes, priority,"
                " share, throughput, detail, assignment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._exec("INSERT INTO allocations (round_index, job_id, cell, share) VALUES (?, ?, 'a100:4:1', 0.25)",
                       [(self.round, jid) for jid in self.live])  # fmt: skip

    def ticks(self, count: int, interval_s: float, keep_s: float, budget_s: float) -> None:
        """``count`` ticks: a tick row each, then the daemon's prune (as ``Daemon.prune`` runs it; in the
        compressed part of the year each tick gets the pruning time of the real ticks it stands for)."""
        for _ in range(count):
            self.tick += 1
            with self.j.transaction():
                self._exec("INSERT INTO ticks (id, started_at, finished_at, mode, round_index, new_round, jobs, "
                           "actions) VALUES (?, ?, ?, 'act', ?, 0, ?, 0)",
                           [(self.tick, self.now, self.now + 0.2, self.round, len(self.live))])  # fmt: skip
                self.j.db.conn.execute("UPDATE jobs SET last_seen = ? WHERE job_id = ?", (self.now, self.next_id - 1))
            report = self.j.retention.prune(keep_s, self.now, budget_s=budget_s)
            if report.batches:  # ticks with nothing to prune: one cheap empty pass, left out of the figures
                self.batch_s.extend(report.batch_s)
                self.checkpoint_s.append(report.checkpoint_s)
            self.now += interval_s

    def size(self) -> tuple[int, int]:
        """(file bytes incl. WAL, bytes in use: pages minus the free list)."""
        page = self.j.db.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.j.db.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.j.db.conn.execute("PRAGMA freelist_count").fetchone()[0]
        path = Path(self.j.path)
        wal = Path(str(path) + "-wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0), (pages - free) * page


def run(jobs: int, days: int, keep_days: float, fast_round_min: float, real_round_min: float, real_days: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    start = time.perf_counter()
    with Journal(tmp / "journal.db") as journal:
        site = Site(journal, jobs, time.time() - (days + real_days) * DAY)
        keep_s = keep_days * DAY
        for day in range(days + real_days):
            round_min = fast_round_min if day < days else real_round_min
            rounds = int(24 * 60 / round_min)
            for _ in range(rounds):
                site.churn()
                site.new_round()
                interval = round_min * 60 / TICKS_PER_ROUND
                site.ticks(TICKS_PER_ROUND, interval, keep_s, PRUNE_BUDGET_S * interval / DAEMON_INTERVAL_S)
            if day % 30 == 0 or day == days + real_days - 1:
                file_b, used_b = site.size()
                site.peak = max(site.peak, file_b)
                counts = {t: journal.db[t].count for t in ("decisions", "allocations", "actions", "events", "jobs")}
                print(f"day {day:4d}: file {file_b / 1e6:8.1f} MB, in use {used_b / 1e6:8.1f} MB  {counts}", flush=True)
        file_b, used_b = site.size()
    took = time.perf_counter() - start
    batches = sorted(t for _, t, _ in site.batch_s)
    cpu = sorted(c for _, _, c in site.batch_s) or [0.0]
    p99 = batches[int(0.99 * (len(batches) - 1))] if batches else 0.0
    worst: dict[str, float] = {}
    for step, t, _ in site.batch_s:
        worst[step or "(nothing left)"] = max(worst.get(step or "(nothing left)", 0.0), t)
    print(f"\n{jobs} jobs, {days} days at {fast_round_min:g}-min rounds + {real_days} at {real_round_min:g}-min "
          f"rounds, journal_keep_days {keep_days:g} ({took:.0f} s wall, machine shared)")  # fmt: skip
    print(f"journal at the end: file {file_b / 1e6:.1f} MB, in use {used_b / 1e6:.1f} MB; largest file seen "
          f"{max(site.peak, file_b) / 1e6:.1f} MB")  # fmt: skip
    print(f"prune batches (one transaction each) in ticks with work: {len(batches)}; median "
          f"{statistics.median(batches) * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {batches[-1] * 1e3:.1f} ms  "
          f"(goal: max < 100 ms: {'met' if batches and batches[-1] < 0.1 else 'NOT met'})")  # fmt: skip
    print(f"  the same batches' CPU time (the work, without waiting for a CPU or the disk): median "
          f"{statistics.median(cpu) * 1e3:.1f} ms, p99 {cpu[int(0.99 * (len(cpu) - 1))] * 1e3:.1f} ms, "
          f"max {cpu[-1] * 1e3:.1f} ms; batches over 100 ms wall: {sum(t > 0.1 for t in batches)}")  # fmt: skip
    ckpt = sorted(site.checkpoint_s) or [0.0]
    print(f"WAL checkpoint after the batches (no lock held): median {statistics.median(ckpt) * 1e3:.1f} ms, "
          f"p99 {ckpt[int(0.99 * (len(ckpt) - 1))] * 1e3:.1f} ms, max {ckpt[-1] * 1e3:.1f} ms")  # fmt: skip
    print("longest batch per step (ms): " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in sorted(worst.items())))
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--keep-days", type=float, default=30.0)
    parser.add_argument("--year-round-min", type=float, default=360.0, help="round length for the year (default 360)")
    parser.add_argument("--real-days", type=int, default=2, help="days at the real 6-minute rounds (default 2)")
    parser.add_argument("--quick", action="store_true", help="200 jobs, 40 days")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.days = 200, 40
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    run(args.jobs, args.days, args.keep_days, args.year_round_min, real_round_min=6.0, real_days=args.real_days)


if __name__ == "__main__":
    main()
