"""The ``accounts:`` section of a dev cluster layout: QOS, accounts and users with their limits.

A site's slurmdbd holds an association tree (accounts under ``root``, users under accounts), QOS and limits;
this section describes one for the dev cluster so that tests and the demo meet fairshare, QOS and limits for
real. Parsing checks names and types and every key (an unknown key names itself and what is allowed);
whether a limit's *value* is acceptable is Slurm's to say: ``up`` passes it to ``sacctmgr`` one field at a time
and a refusal names the field and quotes sacctmgr's message.

Pure: no process is started here (``devaccounting`` applies the commands).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmplan.domain import ValidationError

_NAME_RE = re.compile(r"^[a-z_][a-z0-9_.\-]*$")
_VALUE_RE = re.compile(r"^[A-Za-z0-9_/:=,.+\-]+$")

# layout field -> sacctmgr option, per kind of entity. Values are passed as written; sacctmgr judges them.
LIMITS = {
    "fairshare": "Fairshare",
    "grp_tres": "GrpTRES",
    "grp_jobs": "GrpJobs",
    "grp_submit_jobs": "GrpSubmitJobs",
    "max_jobs": "MaxJobs",
    "max_submit_jobs": "MaxSubmitJobs",
    "max_tres_per_job": "MaxTRESPerJob",
    "max_tres_per_node": "MaxTRESPerNode",
    "max_wall": "MaxWall",
    "qos": "QOS",
    "default_qos": "DefaultQOS",
}
QOS_FIELDS = {
    "priority": "Priority",
    "preempt": "Preempt",
    "preempt_mode": "PreemptMode",
    "usage_factor": "UsageFactor",
    "grp_tres": "GrpTRES",
    "grp_jobs": "GrpJobs",
    "max_tres_per_job": "MaxTRESPerJob",
    "max_tres_per_user": "MaxTRESPerUser",
    "max_jobs_per_user": "MaxJobsPerUser",
    "max_submit_jobs_per_user": "MaxSubmitJobsPerUser",
    "max_wall": "MaxWall",
    "flags": "Flags",
}
USER_ONLY = {"admin_level": "AdminLevel"}
_SECTION_KEYS = {"qos", "accounts", "users"}


@dataclass(frozen=True)
class Entity:
    """One QOS, account or user: its name and the sacctmgr settings the layout gives it, in layout order."""

    kind: str  # "qos" | "account" | "user"
    name: str
    where: str
    settings: tuple[tuple[str, str, str], ...] = ()
    """(layout field, sacctmgr option, value) for each field the layout sets."""
    parent: str = "root"
    accounts: tuple[str, ...] = ()
    """For a user: the accounts it has an association in (the first is its default account)."""


@dataclass(frozen=True)
class AccountsSpec:
    qos: tuple[Entity, ...] = ()
    accounts: tuple[Entity, ...] = ()
    users: tuple[Entity, ...] = ()
    source: str = "<dict>"

    def account_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.accounts)

    def user_names(self) -> tuple[str, ...]:
        return tuple(u.name for u in self.users)

    def entities(self) -> tuple[Entity, ...]:
        """In the order sacctmgr needs them: QOS before the accounts that name them, accounts before users."""
        return (*self.qos, *self.accounts, *self.users)


def parse_accounts(raw: Any, where: str) -> AccountsSpec:
    """Validate the ``accounts:`` mapping of a layout; every error names the field and what is allowed."""
    where = f"{where}: accounts"
    if not isinstance(raw, Mapping):
        raise ValidationError("accounts", raw, "a mapping with keys qos, accounts, users", where)
    for key in raw:
        if key not in _SECTION_KEYS:
            raise ValidationError("accounts key", key, f"one of {', '.join(sorted(_SECTION_KEYS))}", where)
    qos = tuple(_parse_entity("qos", r, f"{where}.qos[{i}]", QOS_FIELDS) for i, r in enumerate(_list(raw, "qos")))
    accts = tuple(
        _parse_entity("account", r, f"{where}.accounts[{i}]", LIMITS, {"name", "parent"})
        for i, r in enumerate(_list(raw, "accounts"))
    )
    users = tuple(
        _parse_entity("user", r, f"{where}.users[{i}]", {**LIMITS, **USER_ONLY}, {"name", "account"})
        for i, r in enumerate(_list(raw, "users"))
    )
    _check_unique(qos, where, "qos")
    _check_unique(accts, where, "accounts")
    _check_unique(users, where, "users")
    known_accounts = {"root", *(a.name for a in accts)}
    for a in accts:
        if a.parent not in known_accounts or a.parent == a.name:
            raise ValidationError("parent", a.parent, "root or another account of this layout", a.where)
    for u in users:
        for acct in u.accounts:
            if acct not in known_accounts:
                raise ValidationError("account", acct, f"one of {', '.join(sorted(known_accounts))}", u.where)
    return AccountsSpec(qos, accts, users, where)


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise ValidationError(key, value, "a list of entries", f"accounts.{key}")
    return value


def _check_unique(items: tuple[Entity, ...], where: str, what: str) -> None:
    names = [e.name for e in items]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"{what}.name", dupes, "each name once", where)


def _parse_entity(
    kind: str, raw: Any, where: str, options: Mapping[str, str], structural: set[str] = frozenset({"name"})
) -> Entity:
    if not isinstance(raw, Mapping):
        raise ValidationError(kind, raw, "a mapping with a name", where)
    allowed = set(options) | set(structural)
    for key in raw:
        if key not in allowed:
            raise ValidationError(f"{kind} key", key, f"one of {', '.join(sorted(allowed))}", where)
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValidationError("name", name, "a lower-case Slurm name (letters, digits, _ . -)", where)
    where = f"{where} ({name})"
    settings = tuple((key, options[key], _value(key, raw[key], where)) for key in raw if key in options)
    parent = raw.get("parent", "root")
    if not isinstance(parent, str) or not _NAME_RE.match(parent):
        raise ValidationError("parent", parent, "an account name", where)
    accounts: tuple[str, ...] = ()
    if kind == "user":
        acct = raw.get("account")
        accounts = tuple(acct) if isinstance(acct, list) else (acct,)
        if not accounts or not all(isinstance(a, str) and _NAME_RE.match(a) for a in accounts):
            raise ValidationError("account", acct, "an account name or a list (the first is the default)", where)
    return Entity(kind, name, where, settings, parent, accounts)


def _value(key: str, value: Any, where: str) -> str:
    """A setting as sacctmgr's text: lists joined by commas, numbers as digits; -1 clears a limit."""
    if isinstance(value, bool):
        raise ValidationError(key, value, "a number, a Slurm value string, or a list of names", where)
    if isinstance(value, list):
        parts = [_value(key, v, where) for v in value]
        return ",".join(parts)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and _VALUE_RE.match(value):
        return value
    raise ValidationError(key, value, "a number, a Slurm value string (e.g. 'gres/gpu=4'), or a list", where)


def add_argv(entity: Entity, cluster: str) -> list[str]:
    """The ``sacctmgr add`` that creates the bare entity (its settings are applied one by one after)."""
    if entity.kind == "qos":
        return ["add", "qos", entity.name]
    if entity.kind == "account":
        return ["add", "account", entity.name, f"Cluster={cluster}", f"Parent={entity.parent}"]
    return [
        "add",
        "user",
        entity.name,
        f"Cluster={cluster}",
        f"Account={','.join(entity.accounts)}",
        f"DefaultAccount={entity.accounts[0]}",
    ]


def modify_argv(entity: Entity, cluster: str, option: str, value: str) -> list[str]:
    """The ``sacctmgr modify`` that sets one option on the entity (on each of a user's associations)."""
    if entity.kind == "qos":
        return ["modify", "qos", "where", f"name={entity.name}", "set", f"{option}={value}"]
    where = [f"name={entity.name}", f"cluster={cluster}"]
    if entity.kind == "user" and option != "AdminLevel":
        where.append(f"account={','.join(entity.accounts)}")
    return ["modify", entity.kind, "where", *where, "set", f"{option}={value}"]
