"""The site's Slurm accounting in each tick: GPU limits cap what a job may be given, fairshare weighs accounts,
and the site's lists of accounts and QOS decide the guaranteed class and what is never managed.

Read once per tick (or less often: ``refresh_s``) through ``slurm.accounting.read_accounting``, i.e. slurmctld's
own association and QOS records, so the daemon sees the limits Slurm enforces and the usage Slurm charged:
managed jobs run as ordinary Slurm jobs, so their GPU hours count against their account's fairshare like any
other job's, and an account that used more gets a smaller weight in the next rounds.

What was applied to a job is journaled as an ``accounting`` event when it changes, so ``slurmplan explain``
shows each factor: the account's shares, usage and fairshare factor, the weight used, the job's QOS with its
priority and preemption mode, and the limit that capped its GPUs.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import Journal
from slurmplan.domain import Hints, JobClass
from slurmplan.pipeline import Observed
from slurmplan.slurm.accounting import AccountingView
from slurmplan.tick import TickConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClassRules:
    """The site's guaranteed lists from the daemon config (``guaranteed_accounts``, ``guaranteed_qos``; who may
    use ``managed=no`` and the other self-declared hints is ``control.trust``'s)."""

    guaranteed_accounts: tuple[str, ...] = ()
    guaranteed_qos: tuple[str, ...] = ()

    def job_class(self, hints: Hints, account: str, qos: str) -> JobClass:
        """Guaranteed when the site names the job's account or QOS; a user's own ``class=guaranteed`` counts
        only while the site names none (then the hint is all there is)."""
        if account in self.guaranteed_accounts or qos in self.guaranteed_qos:
            return JobClass.GUARANTEED
        if self.guaranteed_accounts or self.guaranteed_qos:
            return JobClass.BEST_EFFORT
        return hints.job_class


def cap_hints(hints: Hints, cap: int) -> Hints:
    """``hints`` with every GPU count at most ``cap`` (at least 1: a job held at 0 GPUs by a full group limit
    simply waits in Slurm, which says why)."""
    cap = max(1, cap)
    changes = {
        name: cap
        for name in ("gpus", "min_gpus", "max_gpus")
        if getattr(hints, name) is not None and getattr(hints, name) > cap
    }
    return dataclasses.replace(hints, **changes) if changes else hints  # type: ignore[arg-type]


@dataclass
class SiteAccounting:
    """Per daemon: the latest accounting view and what each job was last told (to journal changes only)."""

    read: Callable[[], AccountingView | None]
    rules: ClassRules = field(default_factory=ClassRules)
    weight_override: Mapping[str, float] | None = None
    refresh_s: float = 0.0
    _view: AccountingView | None = None
    _read_at: float = -1e18
    _told: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)
    """This tick's accounting note per job (journaled by the runner when it differs from the last one)."""

    def refresh(self) -> AccountingView | None:
        now = time.monotonic()
        if now - self._read_at >= self.refresh_s:
            self._view = self.read()
            self._read_at = now
        self.notes = {}
        return self._view

    def account_weights(self) -> dict[str, float]:
        if self.weight_override:
            return dict(self.weight_override)
        return self._view.account_weights() if self._view is not None else {}

    def qos_preemption(self) -> dict[str, tuple[int, tuple[str, ...]]]:
        """Per QOS: priority and the QOS it may preempt (the mechanism displaces running jobs accordingly)."""
        return self._view.qos_preemption() if self._view is not None else {}

    def adjust(self, observed: Observed) -> Observed:
        """Apply the site's lists and the job's limits to one classified job."""
        job, hints = observed.job, observed.hints
        if hints is None or observed.error:
            return observed
        parts: list[str] = []
        klass = self.rules.job_class(hints, job.account, job.qos)
        if klass is not hints.job_class:
            parts.append(f"class {hints.job_class.value} -> {klass.value} (site's guaranteed lists)")
            hints = dataclasses.replace(hints, job_class=klass)
        view = self._view
        if view is not None and view.max_jobs_reached(job):  # Slurm would keep it pending: not decided this tick
            self.notes[job.job_id] = f"waits: {view.max_jobs_reached(job)}"
            return Observed(job, None)
        if view is not None:
            parts += self._factors(view, job.account, job.qos)
            cap, why = view.gpu_cap(job, job.qos)
            if cap is not None:
                before = max(hints.max_gpus or 0, hints.gpus or 0, job.gpus)
                capped = cap_hints(hints, cap)
                parts.append(f"max GPUs {cap} ({why})" + (f": hints capped from {before}" if capped != hints else ""))
                hints = capped
        if self.weight_override:
            parts.append(f"account weight {self.weight_override.get(job.account, 1.0):g} (config override)")
        if parts:
            self.notes[job.job_id] = "; ".join(parts)
        return Observed(job, hints)

    def _factors(self, view: AccountingView, account: str, qos: str) -> list[str]:
        out = []
        factors = view.account_factors().get(account)
        if factors is not None and not self.weight_override:
            out.append(factors.describe())
        q = view.qos_of(qos)
        if q is not None:
            out.append(f"QOS {q.name}: priority {q.priority}, preempt mode {q.preempt_mode}")
        return out

    def changed_notes(self) -> dict[int, str]:
        """This tick's notes that differ from the last one journaled for the job (and remember them)."""
        out = {j: n for j, n in self.notes.items() if self._told.get(j) != n}
        self._told.update(out)
        return out


def build_site_accounting(config: DaemonConfig, backend: object) -> SiteAccounting:
    """The daemon's :class:`SiteAccounting`: associations read through the Slurm backend's environment (none
    for another backend, such as the simulator's, or with ``accounting: off``)."""
    from slurmplan.slurm.accounting import read_accounting
    from slurmplan.slurm.backend import SlurmBackend

    rules = ClassRules(config.trust.guaranteed_accounts or (), config.trust.guaranteed_qos or ())
    reads = config.accounting != "off" and (backend is None or isinstance(backend, SlurmBackend))
    env = backend.env if isinstance(backend, SlurmBackend) else None

    def read() -> AccountingView | None:
        if not reads:
            return None
        view = read_accounting(env)
        if view is None and config.accounting == "on":
            log.warning("accounting: on, but slurmctld has no associations (no slurmdbd?): no limits this tick")
        return view

    return SiteAccounting(read, rules, config.account_weights)


def with_account_weights(tick_config: TickConfig, site: SiteAccounting) -> TickConfig:
    """The tick's config with the accounts' weights and the QOS preemption rules read this tick."""
    weights = site.account_weights()
    if weights:
        tick_config = dataclasses.replace(tick_config, account_weights=weights)
    qos = site.qos_preemption()
    return dataclasses.replace(tick_config, qos_preemption=qos) if qos else tick_config


def journal_notes(journal: Journal, site: SiteAccounting) -> None:
    """Journal each job's accounting note when it changed since the last one journaled (explain shows them)."""
    now = time.time()
    for job_id, note in site.changed_notes().items():
        last = [e for e in journal.events.of(job_id, newest=20) if e["event"] == "accounting"]
        if last and last[-1]["detail"] == note:
            continue
        journal.events.record(job_id, "accounting", now, note)
