"""The daemon's :class:`~slurmplan.pipeline.TickJournal`: the pipeline's journal steps on the SQLite journal.

Mode decides what is written: ``act`` journals intents and applies them row by row (a job stops at its first
failure, the rest stay intents for the next tick's roll-forward); ``shadow`` journals the same rows as shadow
actions and applies nothing; ``dry-run`` writes nothing at all (``begin`` returns no tick id).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from slurmplan.control.act import apply_rows, confirm, roll_forward
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.reports import ingest_reports
from slurmplan.control.state_store import load_state, save_state
from slurmplan.domain import ActionResult, Job, Snapshot
from slurmplan.formats import split_admin_comment
from slurmplan.pipeline import ApplyReport, Backend, Observed, RecordedTick
from slurmplan.tick import SchedulerState


class SqliteTickJournal:
    """Adapter from the pipeline's steps to ``Journal``; times are the wall clock the pipeline passes in."""

    def __init__(self, journal: Journal, mode: str, *, policy_name: str, round_s: float, report_dir: str) -> None:
        self.journal = journal
        self.mode = mode
        self.policy_name = policy_name
        self.round_s = round_s
        self.report_dir = Path(report_dir)

    def begin(self, now: float) -> int | None:
        return self.journal.ticks.begin(self.mode, now) if self.mode != "dry-run" else None

    def roll_forward(self, backend: Backend, now: float) -> ApplyReport:
        if self.mode == "act" and self.journal.intents.rows(status=ActionStatus.INTENT, limit=1):
            return roll_forward(self.journal, backend, now, self.round_s)  # type: ignore[arg-type]
        return ApplyReport()

    def observed(self, snapshot: Snapshot, now: float) -> None:
        if self.mode == "act":
            confirm(self.journal, snapshot, self.round_s, now)
        if self.mode != "dry-run":
            jobs = {j.job_id: j for j in snapshot.jobs}
            clusters = Counter(j.cluster for j in snapshot.jobs if j.cluster)
            cluster = clusters.most_common(1)[0][0] if clusters else None
            ingest_reports(self.journal, self.report_dir, jobs, cluster)

    def load_state(self) -> SchedulerState:
        return load_state(self.journal)

    def record(self, tick_id: int, tick: RecordedTick) -> list[Any]:
        """State, decisions, candidates, job rows and intents in one transaction; returns intent ids to apply."""
        journal, out = self.journal, tick.output
        now = tick.snapshot.time
        status = ActionStatus.INTENT if self.mode == "act" else ActionStatus.SHADOW
        with journal.transaction():
            _journal_jobs(journal, tick.snapshot, tick.observed, tick.refused)
            save_state(journal, out.state)
            assignments = out.assignments if out.new_round else journal.decisions.changed(out.assignments)
            journal.decisions.record(
                tick_id, out.state.round_index, now, assignments, out.allocation, out.new_round, self.policy_name
            )
            known = journal.candidates.job_ids()
            fresh = {m.job.job_id: m.candidates for m in tick.managed if out.new_round or m.job.job_id not in known}
            journal.candidates.replace(tick_id, fresh)
            ids = journal.intents.add(tick_id, out.state.round_index, list(tick.actions), time.time())
            if status != ActionStatus.INTENT:
                journal.intents.set_status(ids, status)
        return list(ids) if status == ActionStatus.INTENT else []

    def apply(self, backend: Backend, intents: list[Any], now: float) -> tuple[ApplyReport, list[ActionResult]]:
        wanted = set(intents)
        rows = [r for r in self.journal.intents.rows(status=ActionStatus.INTENT) if r.id in wanted]
        return apply_rows(self.journal, backend, rows, now)  # type: ignore[arg-type]

    def finish(self, tick_id: int | None, error: str = "", **fields: Any) -> None:
        if tick_id is None:
            return
        if error:
            self.journal.ticks.finish(tick_id, error=error, **fields)
        else:
            self.journal.ticks.finish(tick_id, **fields)


def _hints_text(job: Job) -> str:
    """The text the job's hints came from (the admin comment's hints part, else a ``slurmplan:`` comment)."""
    return split_admin_comment(job.admin_comment).hints or split_admin_comment(job.comment).hints


def _journal_jobs(journal: Journal, snapshot: Snapshot, observed: Any, refused: tuple[Observed, ...]) -> None:
    """Job rows for every job seen; refused jobs get their error, an event when the error is new."""
    errors = {o.job.job_id: o.error for o in refused}
    previous = {r["job_id"]: r for r in journal.jobs.all(unfinished_only=True)}
    rows = []
    for o in observed:
        job: Job = o.job
        err = errors.get(job.job_id, "")
        if err and (previous.get(job.job_id) or {}).get("hint_error") != err:
            journal.events.record(job.job_id, "bad-hints", snapshot.time, err)
        rows.append(
            {
                "job_id": job.job_id,
                "name": job.name,
                "user": job.user,
                "partition": job.partition,
                "managed": int(o.managed and job.job_id not in errors),
                "hints": _hints_text(job),
                "hint_error": err,
                "state": job.state.value,
                "first_seen": snapshot.time,
                "last_seen": snapshot.time,
                "finished_at": snapshot.time if job.state.finished else None,
            }
        )
    journal.jobs.upsert(rows)
    seen = {o.job.job_id for o in observed}
    journal.jobs.mark_finished([j for j in previous if j not in seen], "gone", snapshot.time)
