"""The daemon: ``slurmplan.pipeline.run_tick`` with the Slurm backend, the SQLite journal and the wall clock.

The tick itself is written once, in ``slurmplan/pipeline.py`` (the simulator runs the same function).

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
from collections.abc import Callable
from pathlib import Path

from slurmplan.control.calibration import calibrate, restart_samples
from slurmplan.control.config import DaemonConfig
from slurmplan.control.heartbeat import write_heartbeat
from slurmplan.control.journal import Journal
from slurmplan.control.lock import TickLock
from slurmplan.control.observe import CandidateFn, SlurmJobSource, default_candidates
from slurmplan.control.reports import load_measurements
from slurmplan.control.site_accounting import SiteAccounting, build_site_accounting, journal_notes, with_account_weights
from slurmplan.control.tick_journal import SqliteTickJournal
from slurmplan.control.trust import journal_ignored_hints
from slurmplan.domain import ClusterBackend, Policy
from slurmplan.pipeline import DecideFn, TickReport, default_decide, run_tick

log = logging.getLogger(__name__)

PRUNE_BUDGET_S = 0.05
"""Seconds of journal pruning after a tick (whole batches: one may run past it, see bench_journal_retention)."""


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
        decide_fn: DecideFn = default_decide,
    ) -> None:
        self.config = config
        self._backend = backend
        self._policy = policy
        self.candidates_fn = candidates_fn
        self.decide_fn = decide_fn
        self._costs: tuple[float, dict[int, float]] | None = None  # (monotonic time computed, size -> seconds)
        self._site: SiteAccounting | None = None

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
    def site_accounting(self) -> SiteAccounting:
        """Limits, fairshare and the site's class lists (``control.site_accounting``); slurmctld's associations
        are read only from a Slurm backend and unless ``accounting: off``."""
        if self._site is None:
            self._site = build_site_accounting(self.config, self._backend)
        return self._site

    @property
    def mode(self) -> str:
        return "dry-run" if self.config.dry_run else "shadow" if self.config.shadow else "act"

    def open_journal(self) -> Journal:
        """The configured journal; a dry run on a machine without one reads an empty in-memory journal."""
        if self.config.dry_run and not Path(self.config.database).exists():
            return Journal(":memory:")
        return Journal(self.config.database)

    # ------------------------------------------------------------------------------------------------ tick

    def measured_costs(self, journal: Journal) -> dict[int, float]:
        """Reconfiguration seconds per job size measured from the journal's restarts on this cluster
        (``control.calibration``; sizes with too few restarts are left out and cost the configured constant).

        Recomputed at most once a round by a long-running daemon: restarts are rare; a cron ``slurmplan tick`` is
        a new process and computes it once, from the latest ``RECENT_RESTARTS`` signals (not the whole history)."""
        now = time.monotonic()
        if self._costs is None or now - self._costs[0] >= self.config.round_s:
            calibration = calibrate(restart_samples(journal.intents.restart_timeline()), self.config.reconfig_cost_s)
            self._costs = (now, calibration.costs())
        return self._costs[1]

    def tick(self) -> TickReport:
        """One tick under the lock (a dry run takes no lock: it changes nothing)."""
        policy = self.policy  # a bad policy file fails here, before the lock and before Slurm is touched
        if self.config.dry_run:
            with self.open_journal() as journal:
                return self._tick(journal, policy)
        with TickLock(self.config.lock_path), self.open_journal() as journal:
            report = self._tick(journal, policy)
            self.prune(journal)
            return report

    def prune(self, journal: Journal, budget_s: float = PRUNE_BUDGET_S) -> None:
        """Journal retention (``journal_keep_days``): a few small batches after each tick, never a long pause."""
        if self.config.journal_keep_days <= 0:
            return
        try:
            now = journal.retention.journal_now() or time.time()  # the snapshots' clock (virtual in the simulator)
            done = journal.retention.prune(self.config.journal_keep_days * 86_400.0, now, budget_s=budget_s)
        except Exception:  # retention must never stop the daemon: the next tick tries again
            log.exception("journal retention failed")
            return
        if done.total:
            log.info("journal retention: deleted %s in %d batches", done.deleted, done.batches)

    def _tick(self, journal: Journal, policy: Policy) -> TickReport:
        cfg = self.config
        store = SqliteTickJournal(
            journal, self.mode, policy_name=cfg.policy, round_s=cfg.round_s, report_dir=cfg.report_dir
        )
        site = self.site_accounting
        site.refresh()
        source = SlurmJobSource(
            cfg.managed_partitions,
            self.candidates_fn,
            lambda: load_measurements(journal),
            progress=journal.measurements.progress,
            adjust=site.adjust,
            trust=cfg.trust,
        )
        tick_config = with_account_weights(cfg.tick_config(self.measured_costs(journal)), site)
        report = run_tick(self.backend, time.time, store, policy, source, config=tick_config, decide=self.decide_fn)
        if not cfg.dry_run:
            journal_notes(journal, site)
            journal_ignored_hints(journal, source.ignored)
        if self.mode == "act" and not report.skipped:  # the watchdog and job_submit.lua fail open when stale
            write_heartbeat(
                cfg.heartbeat_path, tick_id=report.tick_id, round_index=report.round_index,
                stale_after_s=cfg.fail_open_limit_s,
            )  # fmt: skip
        return report

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
