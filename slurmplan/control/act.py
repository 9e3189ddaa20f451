"""Act: journaled intents -> Slurm -> applied -> confirmed by the next observation.

Rules that make a killed or failing tick safe:

* actions reach Slurm only after they are in the journal as intents (the runner writes them);
* one job's actions are applied in order and stop at the first failure, so a job is never released with a
  GPU request that did not take; the rest stay intents and are retried (up to ``MAX_ATTEMPTS``) by the next
  tick's roll-forward, which runs before it observes;
* every action is idempotent or harmless when repeated (hold/release/update/annotate set a state; a repeated
  checkpoint signal only sets the launcher's flag again), so re-applying a row a killed tick may already have
  applied is safe;
* an intent older than its round is stale: the world has moved on and the next decision supersedes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from slurmplan.control.journal import ActionRow, ActionStatus, Journal
from slurmplan.domain import Action, ActionKind, ActionResult, ClusterBackend, Job, JobState, Snapshot
from slurmplan.pipeline import SKIPPED, ApplyReport, apply_in_waves

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


def apply_rows(
    journal: Journal, backend: ClusterBackend, rows: Sequence[ActionRow], now: float
) -> tuple[ApplyReport, list[ActionResult]]:
    """Apply intents in id order by the pipeline's one rule (:func:`~slurmplan.pipeline.apply_in_waves`),
    marking each row; returns the report and one result per row applied (a row not applied stays an intent)."""
    ordered = sorted(rows, key=lambda r: r.id)
    answers = apply_in_waves(backend, [row.action for row in ordered])
    applied = failed = retry = 0
    results: list[ActionResult] = []
    given_up: set[int] = set()  # jobs with an action failed for good: their later actions must never run
    for row, answer in zip(ordered, answers, strict=True):
        if answer is None:
            if row.action.job_id in given_up:  # else it waits, as an intent, for its job's retry
                journal.intents.mark(row.id, ActionStatus.FAILED, now, SKIPPED)
                failed += 1
            continue
        results.append(answer)
        if answer.ok:
            journal.intents.mark(row.id, ActionStatus.APPLIED, now, answer.message)
            applied += 1
            continue
        if row.attempts + 1 < MAX_ATTEMPTS:
            _count_attempt(journal, row.id, answer.message)
            retry += 1
        else:
            journal.intents.mark(row.id, ActionStatus.FAILED, now, answer.message)
            given_up.add(row.action.job_id)
            failed += 1
        log.warning("job %d: %s failed: %s", row.action.job_id, row.action.kind.value, answer.message)
    return ApplyReport(applied=applied, failed=failed, retry=retry), results


def _count_attempt(journal: Journal, action_id: int, message: str) -> None:
    with journal.transaction():
        journal.intents.count_attempt(action_id, message)


def roll_forward(journal: Journal, backend: ClusterBackend, now: float, max_age_s: float) -> ApplyReport:
    """Finish the work a killed or failing earlier tick left as intents; drop the stale ones."""
    rows = journal.intents.rows(status=ActionStatus.INTENT)
    fresh = [r for r in rows if _fresh(now - r.created_at, max_age_s)]
    for r in rows:
        if not _fresh(now - r.created_at, max_age_s):
            journal.intents.mark(r.id, ActionStatus.FAILED, now, "stale: superseded by a later decision")
    if fresh:
        log.info("rolling forward %d pending intents", len(fresh))
    report = apply_rows(journal, backend, fresh, now)[0] if fresh else ApplyReport()
    return ApplyReport(report.applied, report.failed, report.retry, len(rows) - len(fresh))


_CLOCK_SLACK_S = 5.0


def _fresh(age: float, max_age_s: float) -> bool:
    """An intent younger than its round is fresh. One from the future means the wall clock stepped back since it
    was written (the journal spans processes: a cron tick cannot use a monotonic clock), so how old it is is
    unknown: stale, as the next decision supersedes it anyway (issue 24 item 12)."""
    return -_CLOCK_SLACK_S <= age <= max_age_s


# ------------------------------------------------------------------------------------------- confirmation


def confirm(journal: Journal, snapshot: Snapshot, max_age_s: float, now: float) -> tuple[int, int]:
    """Compare applied actions with what Slurm shows now: ``(confirmed, diverged)``.

    An action whose effect cannot be seen yet (a requeue still in progress) stays ``applied`` until it is
    ``max_age_s`` old; then it is marked diverged, and the decision, which reads the real state, corrects it.
    ``now`` is the daemon's wall clock (the journal's times), not the snapshot's.
    """
    jobs = {j.job_id: j for j in snapshot.jobs}
    confirmed = diverged = 0
    for row in journal.intents.rows(status=ActionStatus.APPLIED):
        verdict = _verdict(row.action, jobs.get(row.action.job_id))
        if verdict is True:
            journal.intents.mark(row.id, ActionStatus.CONFIRMED, now)
            confirmed += 1
        elif verdict is False or now - (row.applied_at or row.created_at) > max_age_s:
            journal.intents.mark(row.id, ActionStatus.DIVERGED, now, "not visible in Slurm")
            diverged += 1
    return confirmed, diverged


def _verdict(action: Action, job: Job | None) -> bool | None:
    """True: Slurm shows the effect; False: it contradicts it; None: cannot tell yet."""
    if job is None or job.state.finished:
        return True  # the job is gone: nothing left to confirm
    pending = job.state in (JobState.PENDING, JobState.REQUEUED)
    kind = action.kind
    if kind is ActionKind.HOLD:
        return job.held or not pending
    if kind is ActionKind.RELEASE:
        return not job.held
    if kind is ActionKind.UPDATE:
        if not pending:
            return True
        return (action.gpu_type is None or job.gpu_type == action.gpu_type) and (
            action.gpus_per_node is None or job.gpus_per_node == action.gpus_per_node
        )
    if kind is ActionKind.ANNOTATE:
        return action.admin_comment is None or job.admin_comment.strip() == action.admin_comment.strip()
    if kind is ActionKind.REQUEUE_HOLD:
        return (pending and job.held) or None
    if kind is ActionKind.REQUEUE:
        return pending or None
    if kind is ActionKind.CANCEL:
        return None
    return True  # SIGNAL: delivered is all Slurm can tell us
