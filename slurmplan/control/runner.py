"""One tick of the daemon, and the loop: observe -> decide -> act, journaled, under the tick lock.

Order inside a tick, chosen so that a tick killed at any line loses nothing:

1. take the lock (a second tick exits with ``TickLocked``);
2. observe: one ``snapshot()``; a failed read skips the tick with a logged reason (nothing decided on a
   half-seen cluster, nothing sent to a controller that is not answering);
3. roll forward: apply the intents an earlier tick wrote but did not finish, and observe again if that
   changed anything; confirm applied actions against the snapshot; ingest the jobs' throughput reports;
4. decide: ``slurmplan.tick.decide`` on the managed jobs, the same pure function the simulator calls;
5. journal, in ONE transaction: the new scheduler state, the decisions, the candidates and the actions as
   intents. Killed before the commit, the next tick decides again from the old state; killed after, it
   rolls the intents forward;
6. act: apply the intents (unless shadow or dry-run) and mark them applied or failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from slurmplan.control.act import (
    ApplyReport,
    apply_rows,
    confirm,
    drop_no_ops,
    keep_user_hints,
    roll_forward,
    untyped_update,
)
from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.lock import TickLock
from slurmplan.control.observe import (
    CandidateFn,
    Observed,
    bad_hint_annotation,
    classify_all,
    default_candidates,
    managed_jobs,
)
from slurmplan.control.reports import ingest_reports, load_measurements
from slurmplan.control.state_store import load_state, save_state
from slurmplan.domain import Action, Assignment, ClusterBackend, Job, Policy, Snapshot
from slurmplan.formats import split_admin_comment
from slurmplan.tick import ManagedJob, SchedulerState, TickInput, TickOutput

log = logging.getLogger(__name__)

DecideFn = Callable[[TickInput, Policy, SchedulerState], TickOutput]


@dataclass(frozen=True)
class TickReport:
    """What one tick saw, decided and did; the CLI prints it, tests and the benchmark read it."""

    mode: str
    tick_id: int | None = None
    round_index: int = 0
    new_round: bool = False
    managed: int = 0
    unmanaged: int = 0
    refused: tuple[Observed, ...] = ()
    actions: tuple[Action, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    rolled_forward: ApplyReport = field(default_factory=ApplyReport)
    applied: ApplyReport = field(default_factory=ApplyReport)
    observe_s: float = 0.0
    decide_s: float = 0.0
    act_s: float = 0.0
    skipped: str = ""
    """Why the tick decided nothing (Slurm could not be read), '' when it ran."""


def _real_decide(inp: TickInput, policy: Policy, state: SchedulerState) -> TickOutput:
    from slurmplan.tick import decide

    return decide(inp, policy, state)


class Daemon:
    """The daemon's parts wired together; ``tick()`` is ``slurmplan tick``, ``run()`` is ``slurmplan daemon``.

    Every collaborator can be passed in (the simulator's backend, a cheap candidate function for the
    benchmark); by default they are the real ones: ``SlurmBackend``, the configured policy, ``perf``.
    """

    def __init__(
        self,
        config: DaemonConfig,
        *,
        backend: ClusterBackend | None = None,
        policy: Policy = None,
        candidates_fn: CandidateFn = default_candidates,
        decide_fn: DecideFn = _real_decide,
    ) -> None:
        self.config = config
        self._backend = backend
        self._policy = policy
        self.candidates_fn = candidates_fn
        self.decide_fn = decide_fn

    @property
    def backend(self) -> ClusterBackend:
        if self._backend is None:
            from slurmplan.slurm.backend import SlurmBackend

            self._backend = SlurmBackend()
        return self._backend

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            from slurmplan.policy.registry import load_policy

            self._policy = load_policy(self.config.policy)
        return self._policy

    @property
    def mode(self) -> str:
        return "dry-run" if self.config.dry_run else "shadow" if self.config.shadow else "act"

    def open_journal(self) -> Journal:
        """The configured journal; a dry run on a machine without one reads an empty in-memory journal."""
        if self.config.dry_run and not Path(self.config.database).exists():
            return Journal(":memory:")
        return Journal(self.config.database)

    # ------------------------------------------------------------------------------------------------ tick

    def tick(self) -> TickReport:
        """One tick under the lock (a dry run takes no lock: it changes nothing)."""
        policy = self.policy  # a bad policy file fails here, before the lock and before Slurm is touched
        if self.config.dry_run:
            with self.open_journal() as journal:
                return self._tick(journal, policy)
        with TickLock(self.config.lock_path), self.open_journal() as journal:
            return self._tick(journal, policy)

    def _observe(self, journal: Journal, tick_id: int | None, t0: float) -> tuple[Snapshot | None, ApplyReport, str]:
        """Steps 2-3: snapshot, roll forward pending intents (then look again); ``(None, _, why)`` on failure."""
        rolled = ApplyReport()
        try:
            snapshot = self.backend.snapshot()
            if self.mode == "act" and journal.actions(status=ActionStatus.INTENT, limit=1):
                rolled = roll_forward(journal, self.backend, time.time(), self.config.round_s)
                if rolled.applied:
                    snapshot = self.backend.snapshot()  # decide on the state the rolled-forward actions made
        except Exception as exc:  # Slurm unreachable or answering garbage: decide nothing this time
            reason = f"cannot observe the cluster: {type(exc).__name__}: {exc}"
            log.error("tick skipped: %s", reason)
            if tick_id is not None:
                journal.finish_tick(tick_id, error=reason, observe_s=time.perf_counter() - t0)
            return None, rolled, reason
        if self.mode == "act":
            confirm(journal, snapshot, self.config.round_s, time.time())
        if self.mode != "dry-run":
            ingest_reports(journal, Path(self.config.report_dir))
        return snapshot, rolled, ""

    def _tick(self, journal: Journal, policy: Policy) -> TickReport:
        mode = self.mode
        t0 = time.perf_counter()
        tick_id = journal.begin_tick(mode, time.time()) if mode != "dry-run" else None
        try:
            return self._tick_body(journal, policy, tick_id, t0)
        except Exception as exc:
            if tick_id is not None:  # the failure is on record; the next tick rolls forward what was written
                journal.finish_tick(tick_id, error=f"tick failed: {type(exc).__name__}: {exc}")
            raise

    def _tick_body(self, journal: Journal, policy: Policy, tick_id: int | None, t0: float) -> TickReport:
        mode, cfg = self.mode, self.config
        snapshot, rolled, why = self._observe(journal, tick_id, t0)
        if snapshot is None:
            return TickReport(mode=mode, tick_id=tick_id, rolled_forward=rolled, skipped=why)
        observed = classify_all(snapshot.jobs, cfg.managed_partitions)
        managed, unpriced = managed_jobs(observed, snapshot.cluster, load_measurements(journal), self.candidates_fn)
        refused = tuple(o for o in [*observed, *unpriced] if o.error and not o.job.state.finished)
        state = _prune(load_state(journal), managed)
        t1 = time.perf_counter()

        inp = TickInput(now=snapshot.time, cluster=snapshot.cluster, jobs=tuple(managed), config=cfg.tick_config())
        out = self.decide_fn(inp, policy, state)
        t2 = time.perf_counter()

        actions = _shape_actions(out.actions, refused, {j.job_id: j for j in snapshot.jobs})
        report = TickReport(
            mode=mode,
            tick_id=tick_id,
            round_index=out.state.round_index,
            new_round=out.new_round,
            managed=len(managed),
            unmanaged=sum(1 for o in observed if not o.managed and not o.error and not o.job.state.finished),
            refused=refused,
            actions=tuple(actions),
            assignments=out.assignments,
            rolled_forward=rolled,
            observe_s=t1 - t0,
            decide_s=t2 - t1,
        )
        if tick_id is None:  # dry run: print, change nothing
            return replace(report, act_s=time.perf_counter() - t2)
        ids = self._journal_decision(journal, tick_id, snapshot, observed, managed, refused, out, actions)
        applied = ApplyReport()
        if mode == "act" and ids:
            wanted = set(ids)
            rows = [r for r in journal.actions(status=ActionStatus.INTENT) if r.id in wanted]
            applied = apply_rows(journal, self.backend, rows, time.time())
        t3 = time.perf_counter()
        journal.finish_tick(
            tick_id,
            round_index=out.state.round_index,
            new_round=int(out.new_round),
            observe_s=t1 - t0,
            decide_s=t2 - t1,
            act_s=t3 - t2,
            jobs=len(managed),
            actions=len(actions),
        )
        return replace(report, applied=applied, act_s=t3 - t2)

    def _journal_decision(
        self,
        journal: Journal,
        tick_id: int,
        snapshot: Snapshot,
        observed: list[Observed],
        managed: list[ManagedJob],
        refused: tuple[Observed, ...],
        out: TickOutput,
        actions: list[Action],
    ) -> list[int]:
        """Step 5: state, decisions, candidates, job rows and intents in one transaction; returns intent ids."""
        now = snapshot.time
        status = ActionStatus.INTENT if self.mode == "act" else ActionStatus.SHADOW
        with journal.transaction():
            _journal_jobs(journal, snapshot, observed, refused)
            save_state(journal, out.state)
            assignments = out.assignments if out.new_round else journal.changed_decisions(out.assignments)
            journal.record_decision(
                tick_id, out.state.round_index, now, assignments, out.allocation, out.new_round, self.config.policy
            )
            known = journal.candidates.job_ids()
            fresh = {m.job.job_id: m.candidates for m in managed if out.new_round or m.job.job_id not in known}
            journal.record_candidates(tick_id, fresh)
            ids = journal.add_intents(tick_id, out.state.round_index, actions, time.time())
            if status != ActionStatus.INTENT:
                journal.intents.set_status(ids, status)
        return ids if status == ActionStatus.INTENT else []

    # ------------------------------------------------------------------------------------------------ loop

    def run(
        self,
        interval_s: float,
        *,
        max_ticks: int | None = None,
        stop: threading.Event | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
    ) -> int:
        """Tick every ``interval_s`` seconds until ``stop`` is set or ``max_ticks`` ran; returns ticks run.

        A tick that fails is logged and the loop goes on: a systemd unit should not flap because Slurm was
        briefly unreachable. A tick that overruns the interval is followed immediately by the next.
        """
        stop = stop or threading.Event()
        count = 0
        while not stop.is_set() and (max_ticks is None or count < max_ticks):
            started = time.monotonic()
            try:
                report = self.tick()
                if on_tick is not None:
                    on_tick(report)
                log.info(
                    "tick %s: round %d, %d managed, %d actions", report.tick_id, report.round_index,
                    report.managed, len(report.actions),
                )  # fmt: skip
            except Exception:
                log.exception("tick failed; the next one rolls its work forward")
            count += 1
            if max_ticks is not None and count >= max_ticks:
                break
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        return count


def _shape_actions(decided: Sequence[Action], refused: Sequence[Observed], jobs: dict[int, Job]) -> list[Action]:
    """The mechanism's actions made safe for Slurm 22.05, plus bad-hint annotations, minus no-ops."""
    actions = [untyped_update(keep_user_hints(a, jobs.get(a.job_id)), jobs.get(a.job_id)) for a in decided]
    actions += [a for o in refused if (a := bad_hint_annotation(o)) is not None]
    return drop_no_ops(actions, jobs)


def _prune(state: SchedulerState, managed: list[ManagedJob]) -> SchedulerState:
    """Forget jobs that are no longer managed and unfinished (finished, gone, or turned unmanaged)."""
    alive = {m.job.job_id for m in managed}
    if all(j in alive for j in state.jobs):
        return state
    return replace(state, jobs={j: s for j, s in state.jobs.items() if j in alive})


def _hints_text(job: Job) -> str:
    """The text the job's hints came from (the admin comment's hints part, else a ``slurmplan:`` comment)."""
    return split_admin_comment(job.admin_comment).hints or split_admin_comment(job.comment).hints


def _journal_jobs(
    journal: Journal, snapshot: Snapshot, observed: list[Observed], refused: tuple[Observed, ...]
) -> None:
    """Job rows for every job seen; refused jobs get their error, an event when the error is new."""
    errors = {o.job.job_id: o.error for o in refused}
    previous = {r["job_id"]: r for r in journal.jobs(unfinished_only=True)}
    rows = []
    for o in observed:
        job: Job = o.job
        err = errors.get(job.job_id, "")
        if err and (previous.get(job.job_id) or {}).get("hint_error") != err:
            journal.record_event(job.job_id, "bad-hints", snapshot.time, err)
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
    journal.upsert_jobs(rows)
    seen = {o.job.job_id for o in observed}
    journal.mark_finished([j for j in previous if j not in seen], "gone", snapshot.time)
