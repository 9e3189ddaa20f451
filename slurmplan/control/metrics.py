"""Prometheus metrics of the daemon, with the standard client library (``prometheus_client``).

Exposed either on a local HTTP port (``--metrics-port``, bound to 127.0.0.1: scrape it from the same host or
through a reverse proxy) or as a node_exporter textfile (``--metrics-textfile``), rewritten atomically after
every tick. The figures come from what the daemon already has, without touching its tick: the ``TickReport``
(phase durations, decisions, actions), a counting wrapper around the backend (Slurm calls, the last snapshot
for held-job ages), a timing wrapper around the policy (solve time), and the journal read-only (restarts,
predicted vs reported throughput).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server, write_to_textfile

from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import Journal
from slurmplan.domain import Action, ActionResult, ClusterBackend, SlurmplanError, Snapshot

log = logging.getLogger(__name__)

_PHASE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_ERROR_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)


class DaemonMetrics:
    """Every metric the daemon exports, in its own registry (no process-global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.tick_phase = Histogram(
            "slurmplan_tick_phase_seconds", "Duration of each tick phase", ["phase"], registry=r, buckets=_PHASE_BUCKETS
        )
        self.ticks = Counter("slurmplan_ticks", "Ticks run, by result (ok, skipped)", ["result"], registry=r)
        self.slurm_calls = Counter(
            "slurmplan_slurm_calls", "Calls to Slurm, by call and result", ["call", "result"], registry=r
        )
        self.decisions = Counter("slurmplan_decisions", "Per-job decisions, by reason", ["reason"], registry=r)
        self.actions = Counter("slurmplan_actions", "Actions decided, by kind", ["kind"], registry=r)
        self.starts = Gauge("slurmplan_daemon_starts", "Times the daemon started on this journal", registry=r)
        self.held_jobs = Gauge("slurmplan_held_jobs", "Managed jobs pending and held", registry=r)
        self.held_age = Gauge("slurmplan_held_job_age_max_seconds", "Longest wait of a held managed job", registry=r)
        self.solve = Histogram(
            "slurmplan_policy_solve_seconds", "Policy allocate() time", registry=r, buckets=_PHASE_BUCKETS
        )
        self.throughput_error = Histogram(
            "slurmplan_throughput_prediction_error_ratio",
            "|predicted - reported| / reported samples/s, one observation per job report",
            registry=r,
            buckets=_ERROR_BUCKETS,
        )
        self.round = Gauge("slurmplan_round", "Current round index", registry=r)
        self.last_tick = Gauge("slurmplan_last_tick_timestamp_seconds", "When the last tick completed", registry=r)
        self._seen_measurement = 0
        self.last_snapshot: Snapshot | None = None

    # ------------------------------------------------------------------------------------------ wrappers

    def wrap_backend(self, backend: ClusterBackend) -> ClusterBackend:
        return _CountingBackend(backend, self)

    def wrap_policy(self, policy: Any) -> Any:
        return _TimedPolicy(policy, self)

    # ------------------------------------------------------------------------------------------- updates

    def observe_tick(self, report: Any, config: DaemonConfig, now: float | None = None) -> None:
        """Everything one ``TickReport`` says, plus held jobs (last snapshot) and the journal's figures."""
        now = time.time() if now is None else now
        self.ticks.labels(result="skipped" if report.skipped else "ok").inc()
        if not report.skipped:
            for phase in ("observe", "decide", "act"):
                self.tick_phase.labels(phase=phase).observe(getattr(report, f"{phase}_s"))
            for a in report.assignments:
                self.decisions.labels(reason=a.reason.value).inc()
            for act in report.actions:
                self.actions.labels(kind=act.kind.value).inc()
            self.round.set(report.round_index)
            self.last_tick.set(now)
        if self.last_snapshot is not None:
            from slurmplan.control.watchdog import held_managed_jobs

            held = held_managed_jobs(list(self.last_snapshot.jobs), config)
            self.held_jobs.set(len(held))
            self.held_age.set(max((now - j.submit_time for j in held if j.submit_time), default=0.0))
        self._from_journal(Path(config.database))

    def _from_journal(self, path: Path) -> None:
        """Restarts and new throughput reports vs the last prediction for the job (journal read-only)."""
        if not path.is_file():
            return
        try:
            with Journal(path, readonly=True) as journal:
                self.starts.set(float(journal.state.get("daemon_starts", 0) or 0))
                rows = journal.measurements.with_prediction_since(self._seen_measurement)
        except (sqlite3.Error, SlurmplanError) as exc:
            log.warning("metrics: cannot read the journal %s: %s", path, exc)
            return
        for rowid, reported, predicted in rows:
            self._seen_measurement = max(self._seen_measurement, rowid)
            if predicted and reported and reported > 0:
                self.throughput_error.observe(abs(predicted - reported) / reported)

    # ------------------------------------------------------------------------------------------- outputs

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def write_textfile(self, path: Path) -> None:
        """node_exporter's textfile collector format, replaced atomically (the library writes a temp file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(path), self.registry)


def record_start(database: Path) -> int:
    """Count one daemon start in the journal (``daemon_starts``); returns the new count."""
    from slurmplan.control.journal import Journal

    with Journal(database) as j:
        count = int(j.state.get("daemon_starts", 0) or 0) + 1
        j.state.set("daemon_starts", count)
    return count


class _CountingBackend:
    """The real backend, counting each call and keeping the last snapshot."""

    def __init__(self, inner: ClusterBackend, metrics: DaemonMetrics) -> None:
        self.inner, self.metrics = inner, metrics

    def snapshot(self) -> Snapshot:
        try:
            snap = self.inner.snapshot()
        except Exception:
            self.metrics.slurm_calls.labels(call="snapshot", result="error").inc()
            raise
        self.metrics.slurm_calls.labels(call="snapshot", result="ok").inc()
        self.metrics.last_snapshot = snap
        return snap

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        try:
            results = self.inner.apply(actions)
        except Exception:
            for a in actions:
                self.metrics.slurm_calls.labels(call=a.kind.value, result="error").inc()
            raise
        for a, res in zip(actions, results, strict=False):
            self.metrics.slurm_calls.labels(call=a.kind.value, result="ok" if res.ok else "failed").inc()
        return results


class _TimedPolicy:
    """The policy, with ``allocate`` timed; every other attribute is the policy's own."""

    def __init__(self, inner: Any, metrics: DaemonMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def allocate(self, problem: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._inner.allocate(problem)
        finally:
            self._metrics.solve.observe(time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
