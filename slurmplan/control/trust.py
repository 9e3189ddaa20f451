"""Who may use the hints that change a job's standing: the site's allowlist, enforced by the daemon.

Hints are self-declared. Most of them only describe the job (model, GPUs, batch); four change how it is treated
against everybody else's: ``class=guaranteed`` earns an SLA floor, ``steps=`` and ``deadline=`` move it earlier,
and ``managed=no`` opts it out of a managed partition. A site says who may use each by Slurm account or QOS
(daemon config keys ``guaranteed_accounts``/``guaranteed_qos``, ``unmanaged_accounts``/``unmanaged_qos``,
``steps_accounts``/``steps_qos``, ``deadline_accounts``/``deadline_qos``; `site install` copies them into
job_submit.lua, which refuses such a submission naming the rule). A rule whose two lists are both unset allows
everybody (today's behaviour, and a plain Slurm site's); a set rule allows a job whose account or QOS is listed.

The daemon enforces the same rules on every tick, since a job's account or QOS can change after submission
and a site may run without job_submit.lua: a hint the job may not use is dropped (the job is scheduled as if
it had not given it) and logged once per job, naming the rule.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmplan.domain import Hints, Job, JobClass, ValidationError

if TYPE_CHECKING:
    from slurmplan.control.journal import Journal

log = logging.getLogger(__name__)

RULES = ("guaranteed", "unmanaged", "steps", "deadline")
"""The trust rules; each is configured by ``<rule>_accounts`` and ``<rule>_qos``."""
TRUST_KEYS = ("hints_from_comment", *(f"{r}_{k}" for r in RULES for k in ("accounts", "qos")))
"""The daemon config's keys read by :func:`trust_from_mapping` (flat YAML keys, one per ``HintTrust`` field)."""


@dataclass(frozen=True)
class HintTrust:
    """The allowlist (``None``: the rule allows everybody) and where hints may come from."""

    hints_from_comment: bool = True
    """Read hints from the user's ``--comment`` when the admin comment has none. A site with job_submit.lua
    should say false: users can rewrite their comment after submission (``scontrol update comment=``), and
    only the admin comment, which job_submit.lua writes and users cannot, reflects what was checked."""
    guaranteed_accounts: tuple[str, ...] | None = None
    guaranteed_qos: tuple[str, ...] | None = None
    unmanaged_accounts: tuple[str, ...] | None = None
    unmanaged_qos: tuple[str, ...] | None = None
    steps_accounts: tuple[str, ...] | None = None
    steps_qos: tuple[str, ...] | None = None
    deadline_accounts: tuple[str, ...] | None = None
    deadline_qos: tuple[str, ...] | None = None

    def rules(self) -> tuple[tuple[str, tuple[str, ...] | None, tuple[str, ...] | None], ...]:
        """``(rule, accounts, qos)`` for each rule: what `site install` renders into job_submit.lua (``slurm/``
        may not import this module, so it takes plain tuples)."""
        return tuple((r, getattr(self, f"{r}_accounts"), getattr(self, f"{r}_qos")) for r in RULES)

    def allows(self, rule: str, account: str, qos: str) -> bool:
        accounts, qoses = getattr(self, f"{rule}_accounts"), getattr(self, f"{rule}_qos")
        if accounts is None and qoses is None:
            return True
        return account in (accounts or ()) or qos in (qoses or ())

    def refusal(self, rule: str, account: str, qos: str) -> str:
        """The message naming the rule (the same text job_submit.lua gives the user)."""
        accounts, qoses = getattr(self, f"{rule}_accounts") or (), getattr(self, f"{rule}_qos") or ()
        return (
            f"hints: {_HINT[rule]} is not allowed for account {account or '(none)'!r} / QOS {qos or '(none)'!r}: "
            f"the site allows it for {rule}_accounts [{', '.join(accounts)}] or {rule}_qos [{', '.join(qoses)}]"
        )

    def violations(self, hints: Hints, job: Job) -> list[str]:
        """The rules ``hints`` break for this job (empty: all allowed)."""
        used = {
            "guaranteed": hints.job_class is JobClass.GUARANTEED,
            "unmanaged": not hints.managed,
            "steps": hints.steps is not None,
            "deadline": hints.deadline is not None,
        }
        return [r for r in RULES if used[r] and not self.allows(r, job.account, job.qos)]

    def enforce(self, hints: Hints, job: Job, broken: list[str] | None = None) -> Hints:
        """``hints`` without what this job may not use (logged once per job and rule); ``broken``: the rules
        :meth:`violations` gave, when the caller has them already."""
        broken = self.violations(hints, job) if broken is None else broken
        if not broken:
            return hints
        for rule in broken:
            _log_once(job.job_id, rule, self.refusal(rule, job.account, job.qos))
        changes: dict[str, object] = {}
        if "guaranteed" in broken:
            changes["job_class"] = JobClass.BEST_EFFORT
        if "unmanaged" in broken:
            changes["managed"] = True
        if "steps" in broken:
            changes["steps"] = None
        if "deadline" in broken:
            changes["deadline"] = None
        return dataclasses.replace(hints, **changes)  # type: ignore[arg-type]


_HINT = {"guaranteed": "class=guaranteed", "unmanaged": "managed=no", "steps": "steps=", "deadline": "deadline="}
_NOTE_HINT = {"guaranteed": "class guaranteed", "unmanaged": "managed no", "steps": "steps", "deadline": "deadline"}
NOTE_PREFIX = "ignored hints:"


def ignored_note(broken: list[str] | tuple[str, ...], job: Job) -> str:
    """The short note the job's admin comment carries after its decision, so the user learns that (and why) the
    daemon dropped hints: ``ignored hints: class guaranteed, deadline (not allowed for account lab / QOS normal;
    slurmplan explain 42)``. It has no ``=``, ``||`` or ``slurmplan:`` (the admin comment's grammar reads those as
    hints or a decision), and is at most :data:`NOTE_MAX` characters (account and QOS names are cut)."""
    names = ", ".join(_NOTE_HINT[r] for r in RULES if r in broken)
    who = f"account {_short(job.account)} / QOS {_short(job.qos)}"
    return f"{NOTE_PREFIX} {names} (not allowed for {who}; slurmplan explain {job.job_id})"


NOTE_MAX = 180
"""Longest :func:`ignored_note` (4 rules, 2 names of 24 characters, a 12-digit job id), well within what Slurm
and the SPANK plugin read of an admin comment."""


def _short(name: str) -> str:
    if not name:
        return "(none)"
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-.") else "?" for c in name[:24])


_LOGGED: set[tuple[int, str]] = set()


def _log_once(job_id: int, rule: str, message: str) -> None:
    if (job_id, rule) in _LOGGED:
        return
    if len(_LOGGED) > 100_000:
        _LOGGED.clear()
    _LOGGED.add((job_id, rule))
    log.warning("job %d: %s; the hint is ignored", job_id, message)


EVENT = "trust"
"""The journal event naming the hints the trust rules dropped for a job (``explain`` shows the newest)."""


def journal_ignored_hints(journal: Journal, ignored: Mapping[int, tuple[str, list[str]]]) -> None:
    """Journal, for each job of this tick whose hints were dropped, each rule's refusal, when it differs from the
    last one journaled (a job is told once, not on every tick)."""
    now = time.time()
    for job_id, (_, refusals) in ignored.items():
        detail = "; ".join(refusals)
        last = [e for e in journal.events.of(job_id, newest=20) if e["event"] == EVENT]
        if not (last and last[-1]["detail"] == detail):
            journal.events.record(job_id, EVENT, now, detail)


def trust_from_mapping(data: Mapping[str, object], where: str) -> HintTrust:
    """The :class:`HintTrust` given by a daemon config's trust keys (``TRUST_KEYS``; other keys are the caller's
    and ignored here), each validated with an error naming it."""
    values: dict[str, object] = {}
    for key in TRUST_KEYS:
        if key not in data:
            continue
        raw = data[key]
        if key == "hints_from_comment":
            if not isinstance(raw, bool):
                raise ValidationError(key, raw, "true or false", where)
            values[key] = raw
        else:
            values[key] = trust_lists(raw, key, where)
    return HintTrust(**values)  # type: ignore[arg-type]


def trust_lists(value: object, field: str, where: str) -> tuple[str, ...]:
    """A config list of account or QOS names (a comma-separated string or a YAML list)."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError(field, value, "a list of Slurm account or QOS names", where)
    return tuple(value)
