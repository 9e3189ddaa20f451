"""What a site's Slurm accounting says about each job: GPU limits, fairshare, QOS.

One ``scontrol show assoc_mgr flags=assoc,qos`` per refresh gives slurmctld's own view: every association
(account rows and user rows) with its shares, its usage, its limits and the current use of its group limits
(``GrpTRES=...gres/gpu=8(2)``: limit 8, 2 in use by running jobs), and every QOS with its priority, preemption
mode and limits. slurmctld enforces exactly these, so the daemon reads them instead of sacctmgr's stored
values (which omit what is in use, and cost a slurmdbd round trip).

From it the daemon takes:

* :meth:`AccountingView.gpu_cap`: the most GPUs a job may hold without passing its association's or QOS's
  MaxTRESPerJob or GrpTRES for ``gres/gpu``; a resize or grow never asks for more;
* :meth:`AccountingView.account_factors`: per account its normalised shares, effective usage and the classic
  fairshare factor ``F = 2^(-usage/shares)``; the weight the hierarchical policies give the account is
  ``shares * F``, so an account that used more than its share gets less in the next rounds;
* :meth:`AccountingView.qos_of`: a QOS's priority and preemption mode.

Parsing is tolerant: an association or QOS record that does not parse is skipped and logged, never raised.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmplan.domain import Job
from slurmplan.slurm.run import SlurmCommandError, run_slurm

log = logging.getLogger(__name__)

_ASSOC_HEAD = re.compile(r"^ClusterName=(?P<cluster>\S*) Account=(?P<account>\S+) UserName=(?P<user>\S*)")
_QOS_HEAD = re.compile(r"^QOS=(?P<name>[^(\s]+)")
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu=(?P<limit>[^(,]+)(?:\((?P<used>\d+)\))?")


@dataclass(frozen=True)
class Association:
    account: str
    user: str = ""
    """'' for an account's own row."""
    parent: str = ""
    """The parent account of an account row ('' for root and for user rows, whose parent is ``account``)."""
    shares_raw: int = 1
    shares_norm: float = 0.0
    fairshare: float = 1.0
    """slurmctld's fairshare factor of a user association (fair tree: 0..1, higher for less use)."""
    usage_efctv: float = 0.0
    max_gpus_per_job: int | None = None
    grp_gpus: int | None = None
    grp_gpus_used: int = 0
    max_jobs: int | None = None
    jobs_running: int = 0
    """Running jobs counted against ``max_jobs`` (``MaxJobs=1(1)``)."""


@dataclass(frozen=True)
class Qos:
    name: str
    priority: int = 0
    preempt_mode: str = "OFF"
    max_gpus_per_job: int | None = None
    grp_gpus: int | None = None
    grp_gpus_used: int = 0
    preempts: tuple[str, ...] = ()
    """The QOS whose jobs Slurm lets this QOS's jobs preempt (slurmdbd's ``Preempt``; not in assoc_mgr's output,
    read with ``sacctmgr show qos``)."""


@dataclass(frozen=True)
class AccountFactors:
    """The figures behind one account's weight, as ``slurmplan explain`` prints them."""

    account: str
    shares_norm: float
    usage_efctv: float
    factor: float

    @property
    def weight(self) -> float:
        return self.shares_norm * self.factor

    def describe(self) -> str:
        return (
            f"{self.account}: shares {self.shares_norm:.3f} x fairshare 2^(-{self.usage_efctv:.3f}/"
            f"{self.shares_norm:.3f}) = {self.factor:.3f} -> weight {self.weight:.4f}"
        )


@dataclass(frozen=True)
class AccountingView:
    associations: tuple[Association, ...] = ()
    qos: Mapping[str, Qos] = field(default_factory=dict)

    def _account_rows(self) -> dict[str, Association]:
        return {a.account: a for a in self.associations if not a.user}

    def _chain(self, account: str) -> list[Association]:
        """The account's row and its ancestors' up to root (a cycle or a gap ends the walk)."""
        rows, out, seen = self._account_rows(), [], set()
        while account and account in rows and account not in seen:
            seen.add(account)
            out.append(rows[account])
            account = rows[account].parent
        return out

    def user_row(self, user: str, account: str) -> Association | None:
        for a in self.associations:
            if a.user == user and a.account == account:
                return a
        return None

    def qos_of(self, name: str) -> Qos | None:
        return self.qos.get(name)

    def gpu_cap(self, job: Job, qos: str = "") -> tuple[int | None, str]:
        """The most GPUs ``job`` may hold under its limits, and which limit sets it (None, '' when none).

        Group limits count what the group's running jobs hold now; the job's own running GPUs are given back
        to it (a resize replaces them)."""
        own = job.gpus if job.state.value == "running" else 0
        caps: list[tuple[int, str]] = []
        rows = [r for r in (self.user_row(job.user, job.account),) if r is not None] + self._chain(job.account)
        for row in rows:
            who = f"{row.user}@{row.account}" if row.user else f"account {row.account}"
            if row.max_gpus_per_job is not None:
                caps.append((row.max_gpus_per_job, f"MaxTRESPerJob gres/gpu={row.max_gpus_per_job} of {who}"))
            if row.grp_gpus is not None:
                free = max(0, row.grp_gpus - row.grp_gpus_used + own)
                caps.append((free, f"GrpTRES gres/gpu={row.grp_gpus} of {who} ({row.grp_gpus_used} in use)"))
        q = self.qos.get(qos)
        if q is not None:
            if q.max_gpus_per_job is not None:
                caps.append((q.max_gpus_per_job, f"MaxTRESPerJob gres/gpu={q.max_gpus_per_job} of QOS {q.name}"))
            if q.grp_gpus is not None:
                free = max(0, q.grp_gpus - q.grp_gpus_used + own)
                caps.append((free, f"GrpTRES gres/gpu={q.grp_gpus} of QOS {q.name} ({q.grp_gpus_used} in use)"))
        if not caps:
            return None, ""
        return min(caps, key=lambda c: c[0])  # on a tie, the most specific (user, account, QOS order)

    def max_jobs_reached(self, job: Job) -> str:
        """Why a pending job cannot start now under its association's MaxJobs ('' when it can)."""
        row = self.user_row(job.user, job.account)
        if job.state.value != "pending" or row is None or row.max_jobs is None:
            return ""
        if row.jobs_running < row.max_jobs:
            return ""
        return f"MaxJobs={row.max_jobs} of {row.user}@{row.account} reached ({row.jobs_running} running)"

    def account_factors(self) -> dict[str, AccountFactors]:
        """Per account (not root): normalised shares, effective usage and ``F = 2^(-usage/shares)``."""
        out: dict[str, AccountFactors] = {}
        for acct, row in self._account_rows().items():
            if acct == "root":
                continue
            shares = row.shares_norm if row.shares_norm > 0 else 0.0
            factor = 2.0 ** (-row.usage_efctv / shares) if shares > 0 else 0.0
            out[acct] = AccountFactors(acct, shares, row.usage_efctv, factor)
        return out

    def account_weights(self) -> dict[str, float]:
        return {a: f.weight for a, f in self.account_factors().items()}

    def qos_preemption(self) -> dict[str, tuple[int, tuple[str, ...]]]:
        """Per QOS: its priority and the QOS it may preempt (``TickConfig.qos_preemption``)."""
        return {q.name: (q.priority, q.preempts) for q in self.qos.values()}


def read_accounting(env: Mapping[str, str] | None = None, timeout: float = 30.0) -> AccountingView | None:
    """slurmctld's association and QOS records, or None when it has none (no slurmdbd) or cannot be asked."""
    try:
        proc = run_slurm(["scontrol", "show", "assoc_mgr", "flags=assoc,qos"], env, timeout=timeout, check=False)
    except SlurmCommandError as exc:
        log.warning("cannot read slurmctld's associations: %s", exc)
        return None
    if proc.returncode != 0:
        log.warning("scontrol show assoc_mgr failed: %s", proc.stderr.strip())
        return None
    view = parse_assoc_mgr(proc.stdout)
    if not view.associations:
        return None
    lists = read_preempt_lists(env, timeout)
    qos = {name: dataclasses.replace(q, preempts=lists.get(name, ())) for name, q in view.qos.items()}
    return dataclasses.replace(view, qos=qos)


def read_preempt_lists(env: Mapping[str, str] | None = None, timeout: float = 30.0) -> dict[str, tuple[str, ...]]:
    """Per QOS, the QOS it may preempt (``sacctmgr show qos format=name,preempt``); {} when sacctmgr fails, which
    leaves every QOS unable to preempt another (the daemon then displaces a running job only for its own QOS)."""
    argv = ["sacctmgr", "-P", "-n", "show", "qos", "format=name,preempt"]
    try:
        proc = run_slurm(argv, env, timeout=timeout, check=False)
    except SlurmCommandError as exc:
        log.warning("cannot read the QOS preemption lists: %s", exc)
        return {}
    if proc.returncode != 0:
        log.warning("sacctmgr show qos failed: %s", proc.stderr.strip())
        return {}
    return parse_preempt_lists(proc.stdout)


def parse_preempt_lists(text: str) -> dict[str, tuple[str, ...]]:
    """``name|preempt`` lines (``high|normal,low``) as {QOS: (QOS it may preempt, ...)}; a line without a name
    is skipped."""
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        name, _, preempt = line.strip().partition("|")
        if name:
            out[name] = tuple(q for q in preempt.split(",") if q)
    return out


def parse_assoc_mgr(text: str) -> AccountingView:
    """Parse ``scontrol show assoc_mgr flags=assoc,qos`` output (Slurm 22.05's layout)."""
    assocs: list[Association] = []
    qos: dict[str, Qos] = {}
    for kind, head, body in _records(text):
        try:
            if kind == "assoc":
                assocs.append(_association(head, body))
            else:
                q = _qos(head, body)
                qos[q.name] = q
        except (ValueError, KeyError, AttributeError) as exc:
            log.warning("skipping an unreadable %s record (%s): %s", kind, exc, head[:120])
    return AccountingView(tuple(assocs), qos)


def _records(text: str) -> list[tuple[str, str, dict[str, str]]]:
    out: list[tuple[str, str, dict[str, str]]] = []
    for line in text.splitlines():
        if _ASSOC_HEAD.match(line):
            out.append(("assoc", line, {}))
        elif _QOS_HEAD.match(line):
            out.append(("qos", line, {}))
        elif out and line.startswith("    ") and not line.startswith("      "):
            for part in line.split():
                key, sep, value = part.partition("=")
                if sep and key not in out[-1][2]:
                    out[-1][2][key] = value
    return out


def _gpu_limit(tres: str) -> tuple[int | None, int]:
    m = _GPU_TRES.search(tres or "")
    if m is None:
        return None, 0
    limit = None if m["limit"] in ("N", "") else int(m["limit"])
    return limit, int(m["used"] or 0)


def _count(value: str | None) -> int | None:
    text = (value or "").split("(")[0]
    return int(text) if text and text != "N" else None


def _association(head: str, body: dict[str, str]) -> Association:
    m = _ASSOC_HEAD.match(head)
    assert m is not None
    raw, norm, _level, factor = (body.get("SharesRaw/Norm/Level/Factor") or "1/0/0/1").split("/")
    usage = (body.get("UsageRaw/Norm/Efctv") or "0/0/0").split("/")
    grp, used = _gpu_limit(body.get("GrpTRES", ""))
    per_job, _ = _gpu_limit(body.get("MaxTRESPJ", ""))
    return Association(
        account=m["account"],
        user=m["user"].split("(")[0],
        parent=(body.get("ParentAccount") or "").split("(")[0],
        shares_raw=int(raw) if raw.isdigit() else 1,
        shares_norm=_float(norm),
        fairshare=_float(factor, 1.0),
        usage_efctv=_float(usage[2] if len(usage) > 2 else "0"),
        max_gpus_per_job=per_job,
        grp_gpus=grp,
        grp_gpus_used=used,
        max_jobs=_count(body.get("MaxJobs")),
        jobs_running=_used(body.get("MaxJobs")),
    )


def _qos(head: str, body: dict[str, str]) -> Qos:
    m = _QOS_HEAD.match(head)
    assert m is not None
    grp, used = _gpu_limit(body.get("GrpTRES", ""))
    per_job, _ = _gpu_limit(body.get("MaxTRESPJ", ""))
    return Qos(
        name=m["name"],
        priority=_count(body.get("Priority")) or 0,
        preempt_mode=body.get("PreemptMode", "OFF"),
        max_gpus_per_job=per_job,
        grp_gpus=grp,
        grp_gpus_used=used,
    )


def _used(value: str | None) -> int:
    m = re.search(r"\((\d+)\)", value or "")
    return int(m.group(1)) if m else 0


def _float(text: str, default: float = 0.0) -> float:
    try:
        value = float(text)
    except ValueError:
        return default
    return value if math.isfinite(value) else default
