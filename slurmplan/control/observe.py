"""Observe: from a Slurm snapshot to the managed jobs a tick decides for.

A job is managed when its hints (the job_submit.lua copy in the admin comment, or a ``slurmplan:`` prefix in
``--comment``) say so, or when its partition is managed. A hint that does not parse, or names something the
performance model cannot price, never stops the tick: the job is left alone (Slurm runs it as submitted), and
the error is returned so the caller journals it and shows it in the job's admin comment.

This is the daemon's :class:`SlurmJobSource` for ``slurmplan.pipeline`` (what reads Slurm's text formats); the
steps both edges share (``with_request``, ``with_node_gpu_type``, ``managed_jobs``) live in the pipeline.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slurmplan.control.trust import HintTrust, ignored_note
from slurmplan.domain import (
    Action,
    ActionKind,
    Candidate,
    Cluster,
    Hints,
    Job,
    JobState,
    Measurement,
    SlurmplanError,
)
from slurmplan.formats import (
    bad_hints_decision,
    compose_admin_comment,
    decision_of,
    find_hints,
    foreign_hold,
    split_admin_comment,
    with_decision,
)
from slurmplan.pipeline import Observed, one_line

log = logging.getLogger(__name__)

CandidateFn = Callable[[Hints, Cluster, Sequence[Measurement]], tuple[Candidate, ...]]
"""Per job, every configuration it may run in. Injectable so tests and the benchmark can price jobs cheaply."""

_MAX_ERROR_CHARS = 200
_OPEN = HintTrust()


def classify(job: Job, managed_partitions: Sequence[str], trust: HintTrust = _OPEN) -> Observed:
    """See :func:`classify_noting`; without the rules broken."""
    return classify_noting(job, managed_partitions, trust)[0]


def classify_noting(
    job: Job, managed_partitions: Sequence[str], trust: HintTrust = _OPEN
) -> tuple[Observed, list[str]]:
    """Decide whether a job is slurmplan's; a malformed hint yields ``error`` instead of raising.

    A job held by an administrator or by its user (:func:`~slurmplan.formats.foreign_hold`) is left alone while
    that hold lasts, so neither the daemon nor the watchdog ever releases it. Hints come from the admin comment
    (and from ``--comment`` only where ``trust.hints_from_comment``), minus those the site's allowlist does not
    grant this job (``control/trust.py``): those trust rules the job broke are returned with it.
    """
    owner = foreign_hold(job.held, job.state_reason, job.admin_comment, job.restart_count)
    if owner is not None:
        _log_foreign_hold(job.job_id, owner)
        return Observed(job, None), []
    try:
        hints = find_hints(job.admin_comment)
        if hints is None and trust.hints_from_comment:
            hints = find_hints(job.comment)
    except (SlurmplanError, ValueError) as exc:
        return Observed(job, None, one_line(str(exc))), []
    if hints is not None:
        broken = trust.violations(hints, job)
        hints = trust.enforce(hints, job, broken)
        return Observed(job, hints if hints.managed else None), broken
    partitions = [p for p in job.partition.split(",") if p]
    if any(p in managed_partitions for p in partitions):
        return Observed(job, Hints()), []
    return Observed(job, None), []


_FOREIGN_LOGGED: set[tuple[int, str]] = set()


def _log_foreign_hold(job_id: int, owner: str) -> None:
    if (job_id, owner) not in _FOREIGN_LOGGED:
        if len(_FOREIGN_LOGGED) > 100_000:
            _FOREIGN_LOGGED.clear()
        _FOREIGN_LOGGED.add((job_id, owner))
        log.info("job %d is held by its %s: left alone until that hold is lifted", job_id, owner)


def default_candidates(hints: Hints, cluster: Cluster, measurements: Sequence[Measurement]) -> tuple[Candidate, ...]:
    """The performance room's candidates for one job (imported late: ``perf`` is heavy and optional in tests)."""
    from slurmplan.perf.candidates import job_candidates

    return tuple(job_candidates(hints, cluster, measurements))


def bad_hint_annotation(ob: Observed) -> Action | None:
    """The ANNOTATE that shows a refused job's error in its admin comment, or None if it already shows it.

    The user's part (hints that do not parse included) is kept verbatim; only the decision is replaced.
    """
    decision = bad_hints_decision(ob.error or "")
    if decision_of(ob.job.admin_comment) == decision:
        return None
    text = with_decision(ob.job.admin_comment, decision)
    return Action(ActionKind.ANNOTATE, ob.job.job_id, admin_comment=text, reason="bad hints: job left alone")


def keep_user_hints(action: Action, job: Job | None) -> Action:
    """Put the user's hints back in front of a decision written to the admin comment.

    The mechanism writes only the decision; the admin comment also carries the hints job_submit.lua copied
    there, which must survive every annotation or the job would stop being managed.
    """
    if action.admin_comment is None or job is None or "||" in action.admin_comment:
        return action
    hints = split_admin_comment(job.admin_comment).hints
    if not hints:
        return action
    return dataclasses.replace(action, admin_comment=compose_admin_comment(hints, action.admin_comment))


def with_note(action: Action, note: str) -> Action:
    """A decision written to the admin comment with ``note`` after it (``... | since round 3 | <note>``): only the
    decision's head names the configuration, so the note changes no decision and adds no ``scontrol update``."""
    text = action.admin_comment
    if text is None or not decision_of(text) or note in text:
        return action
    return dataclasses.replace(action, admin_comment=f"{text} | {note}")


class SlurmJobSource:
    """The daemon's :class:`~slurmplan.pipeline.JobSource`: hints from Slurm's comments, candidates from ``perf``.

    ``measurements`` is called at most once per source (once per tick): the journal is read only if a job
    needs pricing.
    """

    def __init__(
        self,
        managed_partitions: Sequence[str],
        candidates_fn: CandidateFn = default_candidates,
        measurements: Callable[[], Sequence[Measurement]] = tuple,
        progress: Callable[[], Mapping[int, Mapping[str, Any]]] = dict,
        adjust: Callable[[Observed], Observed] | None = None,
        trust: HintTrust = _OPEN,
    ) -> None:
        self.managed_partitions = tuple(managed_partitions)
        self.adjust = adjust
        """The site's accounting applied to each classified job (``control.site_accounting``): limits, classes."""
        self.trust = trust
        self.ignored: dict[int, tuple[str, list[str]]] = {}
        """This tick's jobs whose hints the trust rules dropped: the admin comment's note, and each rule's refusal
        (journaled for ``explain`` by the runner)."""
        self.candidates_fn = candidates_fn
        self._load = measurements
        self._measurements: Sequence[Measurement] | None = None
        self._load_progress = progress
        self._progress: Mapping[int, Mapping[str, Any]] | None = None

    def classify(self, job: Job) -> Observed:
        observed, broken = classify_noting(job, self.managed_partitions, self.trust)
        if broken:
            self.ignored[job.job_id] = (ignored_note(broken, job), [self.trust.refusal(r, job.account, job.qos)
                                                                   for r in broken])  # fmt: skip
        return self.adjust(observed) if self.adjust is not None else observed

    def price(self, hints: Hints, job: Job, cluster: Cluster) -> tuple[Candidate, ...]:
        if self._measurements is None:
            self._measurements = self._load()
        return self.candidates_fn(hints, cluster, self._measurements)

    def progress(self, job: Job) -> float:
        """Steps the job has done, from its latest report (``step``); a job not running (requeued, held) counts
        from its newest checkpoint (``checkpoint_step``), as it will resume there. 0 without reports."""
        if self._progress is None:
            self._progress = self._load_progress()
        row = self._progress.get(job.job_id)
        if not row:
            return 0.0
        step, saved = row.get("step"), row.get("checkpoint_step")
        if job.state is not JobState.RUNNING and saved is not None:
            return float(saved)
        return float(step if step is not None else saved or 0.0)

    def keep_hints(self, action: Action, job: Job | None) -> Action:
        action = keep_user_hints(action, job)
        if job is None or job.job_id not in self.ignored:
            return action
        return with_note(action, self.ignored[job.job_id][0])

    def refusal_note(self, observed: Observed) -> Action | None:
        return bad_hint_annotation(observed)
