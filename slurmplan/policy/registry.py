"""Policies by name: the YAML files shipped in ``policies/`` (or any path), validated before anything runs.

A YAML file names a policy and the class that implements it (``objective``), its solver and the class's own
``params``. Every field is checked here (unknown names, wrong types, impossible values) and
the error names the file, the field and what is allowed, k8s ``NewFramework`` style: a bad file fails at
start-up rather than in the middle of a simulation.

The shipped files live in ``slurmplan/policy/presets/`` (package data, so an installed package has them); the
repository's ``policies/`` is a link to that folder. ``$SLURMPLAN_POLICY_DIR`` (os.pathsep-separated) is
searched first, so a site can add or override policies without touching the package.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from slurmplan.domain import ValidationError
from slurmplan.policy.base import SOLVERS, Policy, PolicyConfig

log = logging.getLogger(__name__)

PRESET_DIR = Path(__file__).resolve().parent / "presets"

TICK_SETTINGS: Mapping[str, str] = MappingProxyType(
    {
        "round_s": "round_s in the daemon's config (/etc/slurmplan/slurmplan.yaml), --round for simulate/compare",
        "reconfig_threshold": "reconfig_threshold in the daemon's config (/etc/slurmplan/slurmplan.yaml)",
        "reconfig_cost_s": (
            "reconfig_cost_s in the daemon's config (/etc/slurmplan/slurmplan.yaml), --reconfig-cost or "
            "--zero-cost for simulate/compare"
        ),
    }
)
"""Keys older policy files carried: round settings, which have one owner, the tick's config. A file that still
sets them loads, with a warning saying where each belongs; the value is not read."""

_FIELDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "name": (str, "a non-empty string"),
    "objective": (str, "one of the objectives"),  # the names: _objectives(), which imports every policy class
    "description": (str, "a string"),
    "solver": (str, "one of " + ", ".join(SOLVERS)),
    "params": (dict, "a mapping of parameter names to values"),
}


def _classes() -> Mapping[str, type[Policy]]:
    """The policy classes by objective name, imported on first use: they bring scipy (and cvxpy's users) along,
    which listing policies or printing ``--help`` must not pay for (~1 s of every ``slurmplan`` start)."""
    from slurmplan.policy.classes import POLICY_CLASSES

    return POLICY_CLASSES


def _allowed(key: str) -> str:
    if key == "objective":
        return "one of " + ", ".join(sorted(_classes()))
    return _FIELDS[key][1]


def policy_dirs() -> tuple[Path, ...]:
    """Folders searched for ``<name>.yaml``, first match wins."""
    extra = [Path(p) for p in os.environ.get("SLURMPLAN_POLICY_DIR", "").split(os.pathsep) if p]
    return (*extra, PRESET_DIR)


def list_policies() -> tuple[str, ...]:
    """Names of every policy a plain ``load_policy(name)`` finds, sorted."""
    names = {p.stem for d in policy_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return tuple(sorted(names))


def load_policy(name_or_path: str) -> Policy:
    """The policy a YAML file describes: a name from ``list_policies()``, an objective name, or a path."""
    return build_policy(load_config(name_or_path))


def load_config(name_or_path: str) -> PolicyConfig:
    path = _find(name_or_path)
    if path is None:
        if name_or_path in _classes():
            return PolicyConfig(name=name_or_path, objective=name_or_path)
        allowed = f"a file path or one of: {', '.join(list_policies())}"
        raise ValidationError("policy", name_or_path, allowed)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValidationError("yaml", str(exc).splitlines()[0], "valid YAML", str(path)) from exc
    except OSError as exc:
        raise ValidationError("policy", name_or_path, f"a readable file ({exc.strerror})", str(path)) from exc
    return parse_config(data, str(path))


def parse_config(data: Any, where: str) -> PolicyConfig:
    """Validate one YAML document (already parsed) into a PolicyConfig; raises ValidationError naming ``where``."""
    if not isinstance(data, Mapping):
        raise ValidationError("document", type(data).__name__, "a mapping of policy fields", where)
    for key, value in data.items():
        if key in TICK_SETTINGS:
            log.warning("%s: %s: %r is not read from a policy file; set %s", where, key, value, TICK_SETTINGS[key])
            continue
        if key not in _FIELDS:
            raise ValidationError(str(key), value, f"a known field: {', '.join(_FIELDS)}", where)
        kinds, _ = _FIELDS[key]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ValidationError(key, value, _allowed(key), where)
    for key in ("name", "objective"):
        if not data.get(key):
            raise ValidationError(key, data.get(key), f"required: {_allowed(key)}", where)
    _check_values(data, where)
    cfg = PolicyConfig(
        name=data["name"],
        objective=data["objective"],
        solver=data.get("solver", "highs"),
        params=MappingProxyType(dict(data.get("params") or {})),
        description=data.get("description", ""),
        source=where,
    )
    build_policy(cfg)  # checks params against the class now, naming the file
    return cfg


def _check_values(data: Mapping[str, Any], where: str) -> None:
    checks = {
        "objective": lambda v: v in _classes(),
        "solver": lambda v: v in SOLVERS,
    }
    for key, ok in checks.items():
        if key in data and not ok(data[key]):
            raise ValidationError(key, data[key], _allowed(key), where)


def build_policy(config: PolicyConfig) -> Policy:
    """Instantiate the class behind ``config.objective`` (params validated by the class)."""
    cls = _classes().get(config.objective)
    if cls is None:
        raise ValidationError("objective", config.objective, _allowed("objective"), config.source or config.name)
    return cls(config)


def _find(name_or_path: str) -> Path | None:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        return p if p.exists() else _missing(name_or_path)
    for d in policy_dirs():
        cand = d / f"{name_or_path}.yaml"
        if cand.is_file():
            return cand
    return None


def _missing(path: str) -> Path:
    raise ValidationError("policy", path, "an existing YAML file")


__all__ = [
    "PRESET_DIR",
    "TICK_SETTINGS",
    "build_policy",
    "list_policies",
    "load_config",
    "load_policy",
    "parse_config",
    "policy_dirs",
]
