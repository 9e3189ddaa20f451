"""The daemon's configuration: one YAML file, validated once at start-up.

Every field has a default so an empty file (or none, for tests and ``--dry-run`` trials) is a working setup;
an unknown or ill-typed field is refused with an error naming the file, the field and what is allowed, because
a typo in a scheduler's config silently ignored is worse than a daemon that will not start.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurmplan.control.trust import TRUST_KEYS, HintTrust, trust_from_mapping
from slurmplan.domain import ValidationError
from slurmplan.tick import TickConfig
from slurmplan.tick_types import DAEMON_INTERVAL_S

DEFAULT_CONFIG_PATH = Path("/etc/slurmplan/slurmplan.yaml")
DEFAULT_REPORT_DIR = Path("/var/lib/slurmplan/reports")
DEFAULT_DATABASE = Path("/var/lib/slurmplan/journal.db")

_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "CONT", "URG")


@dataclass(frozen=True)
class DaemonConfig:
    """What ``slurmplan tick`` / ``slurmplan daemon`` need; mirrors the YAML keys one to one."""

    managed_partitions: tuple[str, ...] = ()
    """Every job in these partitions is managed, hints or not."""
    policy: str = "las"
    """A policy name from ``policies/`` or the path of a policy YAML file."""
    round_s: float = TickConfig.round_s
    """Round settings (``round_s``, ``reconfig_threshold``, ``reconfig_cost_s``) are owned here, by the tick's
    config (``tick_config()``); the simulator takes them from its options. A policy file's copies are not read."""
    checkpoint_signal: str = TickConfig.checkpoint_signal
    grace_s: float = TickConfig.grace_s
    signal_min_run_s: float = TickConfig.signal_min_run_s
    """Least seconds a job has run before it is sent the checkpoint signal (``TickConfig.signal_min_run_s``, 10 s);
    a stop decided earlier is carried out when the job reaches this age. 0 signals at once."""
    reconfig_threshold: float = TickConfig.reconfig_threshold
    reconfig_cost_s: float = TickConfig.reconfig_cost_s
    requeue_delay_s: float = TickConfig.requeue_delay_s
    """Slurm's wait before a requeued job restarts on a node it just left (``cred_expire + 1`` wall seconds; 121 by
    default); a resize on the same GPU type is charged it (``TickConfig.requeue_delay_s``)."""
    priority_reset_s: float = TickConfig.priority_reset_s
    """Least seconds between resets of the round priorities' memory of time received (Gavel's default)."""
    database: Path = DEFAULT_DATABASE
    report_dir: Path = DEFAULT_REPORT_DIR
    lock_file: Path | None = None
    """Defaults to ``<database>.lock``."""
    dry_run: bool = False
    """Print the actions, change nothing (not even the journal)."""
    shadow: bool = False
    """Decide and journal, but never act on Slurm: what slurmplan would have done."""
    interval_s: float = DAEMON_INTERVAL_S
    """Seconds between ticks of ``slurmplan daemon`` (a tick may start a round or only confirm/renew)."""
    heartbeat_file: Path | None = None
    """Written at the end of every completed tick; defaults to ``heartbeat`` beside the database."""
    fail_open_after_s: float | None = None
    """Heartbeat age after which jobs fall back to plain Slurm (watchdog, job_submit.lua); default 3 rounds."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on 127.0.0.1:PORT (``slurmplan daemon``); none by default."""
    metrics_textfile: Path | None = None
    """Write Prometheus metrics to this node_exporter textfile after every tick; none by default."""
    accounting: str = "auto"
    """Read slurmctld's associations and QOS each tick (GPU limits cap resizes; fairshare weighs accounts):
    ``auto`` where slurmctld has them (slurmdbd), ``on`` (a tick without them is logged), ``off``."""
    account_weights: Mapping[str, float] | None = None
    """Account weights for hierarchical policies; set, they replace the ones read from fairshare (sshare)."""
    journal_keep_days: float = 30.0
    """Journal rows older than this are pruned in small batches while the daemon runs (0: keep everything)."""
    trust: HintTrust = HintTrust()
    """Where hints may come from and who may use the hints that change a job's standing (``control/trust.py``,
    which parses its flat YAML keys: ``hints_from_comment``, ``guaranteed_accounts``, ``guaranteed_qos``, ...)."""
    source: str = "<defaults>"

    @property
    def lock_path(self) -> Path:
        return self.lock_file if self.lock_file is not None else Path(str(self.database) + ".lock")

    @property
    def heartbeat_path(self) -> Path:
        return self.heartbeat_file if self.heartbeat_file is not None else Path(self.database).parent / "heartbeat"

    @property
    def fail_open_path(self) -> Path:
        """The watchdog's record that managed jobs fell back to plain Slurm (beside the heartbeat)."""
        return self.heartbeat_path.parent / "fail-open.json"

    @property
    def fail_open_limit_s(self) -> float:
        return self.fail_open_after_s if self.fail_open_after_s is not None else 3 * self.round_s

    def tick_config(self, reconfig_cost_by_gpus: Mapping[int, float] | None = None) -> TickConfig:
        """The tick's settings; ``reconfig_cost_by_gpus`` is the per-size cost measured from the journal."""
        return TickConfig(
            reconfig_cost_by_gpus=dict(reconfig_cost_by_gpus or {}),
            round_s=self.round_s,
            checkpoint_signal=self.checkpoint_signal,
            grace_s=self.grace_s,
            signal_min_run_s=self.signal_min_run_s,
            reconfig_threshold=self.reconfig_threshold,
            reconfig_cost_s=self.reconfig_cost_s,
            requeue_delay_s=self.requeue_delay_s,
            priority_reset_s=self.priority_reset_s,
        )

    def with_overrides(self, **changes: Any) -> DaemonConfig:
        """A copy with command-line overrides applied (``None`` means: keep the file's value)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def _seconds(name: str, value: Any, where: str, *, zero_ok: bool = False) -> float:
    """A number of seconds: > 0, or >= 0 where zero means something (reset at every change, free moves)."""
    number = not isinstance(value, bool) and isinstance(value, int | float)
    if not number or value < 0 or (value == 0 and not zero_ok):
        allowed = "a number of seconds >= 0" if zero_ok else "a positive number of seconds"
        raise ValidationError(name, value, allowed, where)
    return float(value)


def _bool(name: str, value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(name, value, "true or false", where)
    return value


def _path(name: str, value: Any, where: str) -> Path:
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise ValidationError(name, value, "a file system path", where)
    return Path(value).expanduser()


def _partitions(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [p for p in value.split(",") if p]
    if not isinstance(value, list | tuple) or not all(isinstance(p, str) and p for p in value):
        raise ValidationError("managed_partitions", value, "a list of partition names", where)
    return tuple(value)


def _signal(value: Any, where: str) -> str:
    name = str(value).upper().removeprefix("SIG") if isinstance(value, str) else value
    if name not in _SIGNALS:
        raise ValidationError("checkpoint_signal", value, f"one of {', '.join(_SIGNALS)}", where)
    return name


def _threshold(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValidationError("reconfig_threshold", value, "a number in (0, 1]", where)
    return float(value)


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValidationError("metrics_port", value, "a TCP port number from 1 to 65535", where)
    return value


def _days(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValidationError("journal_keep_days", value, "a number of days >= 0 (0 keeps everything)", where)
    return float(value)


def _accounting(value: Any, where: str) -> str:
    if value not in ("auto", "on", "off"):
        raise ValidationError("accounting", value, "one of auto, on, off", where)
    return str(value)


def _weights(value: Any, where: str) -> dict[str, float]:
    ok = isinstance(value, dict) and all(
        isinstance(k, str) and not isinstance(v, bool) and isinstance(v, int | float) and v > 0
        for k, v in value.items()
    )
    if not ok:
        raise ValidationError("account_weights", value, "a mapping of account name to a weight > 0", where)
    return {k: float(v) for k, v in value.items()}


def _policy(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("policy", value, "a policy name or the path of a policy YAML file", where)
    return value


_FIELDS: dict[str, Any] = {
    "managed_partitions": _partitions,
    "policy": _policy,
    "round_s": lambda v, w: _seconds("round_s", v, w),
    "checkpoint_signal": _signal,
    "grace_s": lambda v, w: _seconds("grace_s", v, w),
    "signal_min_run_s": lambda v, w: _seconds("signal_min_run_s", v, w, zero_ok=True),
    "reconfig_threshold": _threshold,
    "reconfig_cost_s": lambda v, w: _seconds("reconfig_cost_s", v, w, zero_ok=True),
    "requeue_delay_s": lambda v, w: _seconds("requeue_delay_s", v, w, zero_ok=True),
    "priority_reset_s": lambda v, w: _seconds("priority_reset_s", v, w, zero_ok=True),
    "database": lambda v, w: _path("database", v, w),
    "report_dir": lambda v, w: _path("report_dir", v, w),
    "lock_file": lambda v, w: _path("lock_file", v, w),
    "dry_run": lambda v, w: _bool("dry_run", v, w),
    "shadow": lambda v, w: _bool("shadow", v, w),
    "interval_s": lambda v, w: _seconds("interval_s", v, w),
    "heartbeat_file": lambda v, w: _path("heartbeat_file", v, w),
    "fail_open_after_s": lambda v, w: _seconds("fail_open_after_s", v, w),
    "metrics_port": _port,
    "metrics_textfile": lambda v, w: _path("metrics_textfile", v, w),
    "accounting": _accounting,
    "account_weights": _weights,
    "journal_keep_days": lambda v, w: _days(v, w),
}


def config_from_mapping(data: Any, where: str = "<mapping>") -> DaemonConfig:
    """Validate a parsed YAML mapping into a ``DaemonConfig``; ``where`` names the file in errors."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValidationError("<top level>", type(data).__name__, "a mapping of settings", where)
    values: dict[str, Any] = {}
    for key, raw in data.items():
        check = _FIELDS.get(key)
        if check is None and key not in TRUST_KEYS:
            raise ValidationError(key, raw, f"a known setting: {', '.join(sorted([*_FIELDS, *TRUST_KEYS]))}", where)
        if check is not None:
            values[key] = check(raw, where)
    return DaemonConfig(source=where, trust=trust_from_mapping(data, where), **values)


def load_config(path: str | os.PathLike[str] | None = None) -> DaemonConfig:
    """Read the YAML config. ``None`` means the default path, and its absence means all defaults.

    An explicitly named file that does not exist is an error; the default file may be missing so that
    ``slurmplan tick --dry-run`` works on a fresh machine.
    """
    explicit = path is not None
    p = Path(path) if explicit else DEFAULT_CONFIG_PATH
    if not p.exists():
        if explicit:
            raise ValidationError("config", str(p), "an existing YAML file", "--config")
        return DaemonConfig()
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ValidationError("<syntax>", str(exc).splitlines()[0], "valid YAML", str(p)) from exc
    return config_from_mapping(data, str(p))
