"""The node layout of a local development cluster, read from YAML.

A layout says which virtual nodes exist (GPU type and count, CPUs, memory, features), which partitions group
them, and what a test or another room wants added to the configuration (extra slurm.conf lines, files such as
``job_submit.lua`` copied beside slurm.conf). It is validated in full before anything starts, and every error
names the file, the field and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from slurmplan.domain import ValidationError
from slurmplan.slurm.devaccounts import AccountsSpec, parse_accounts
from slurmplan.slurm.parse import expand_hostlist

_TOP_KEYS = {"nodes", "partitions", "slurm_conf_extra", "conf_files", "slurmctld_port", "cred_expire", "accounts"}
_NODE_KEYS = {"name", "gpu_type", "gpus", "cpus", "memory_mb", "features", "port"}
_PART_KEYS = {"name", "nodes", "default", "max_time", "priority_tier"}
_TYPE_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")
_TIME_RE = re.compile(r"^(UNLIMITED|INFINITE|\d+|\d+:\d\d(:\d\d)?|\d+-\d+(:\d\d(:\d\d)?)?)$")
_CONF_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_RESERVED_CONF = {"slurm.conf", "gres.conf"}


@dataclass(frozen=True)
class NodeSpec:
    """One virtual node: a slurmd of its own on localhost with placeholder GPU files."""

    name: str
    gpu_type: str | None
    gpus: int
    cpus: int
    memory_mb: int
    features: tuple[str, ...] = ()
    port: int | None = None


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    max_time: str = "7-00:00:00"
    priority_tier: int = 1


@dataclass(frozen=True)
class Layout:
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]
    slurm_conf_extra: tuple[str, ...] = ()
    conf_files: Mapping[str, Path] = field(default_factory=dict)
    slurmctld_port: int | None = None
    cred_expire: int | None = 10
    """munge's ``cred_expire`` (s): a requeued job waits this + 1 s before Slurm may start it again unless its start
    time is reset (the backend does). 10 keeps tests of plain requeues short; None is Slurm's default (120)."""
    source: str = "<dict>"
    accounts: AccountsSpec | None = None
    """QOS, accounts and users created with sacctmgr when the cluster runs with accounting (``--accounting``)."""

    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


def default_layout_path() -> Path:
    """``site/devcluster/default.yaml`` of the source tree this package runs from."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "site" / "devcluster" / "default.yaml"
        if candidate.is_file():
            return candidate
    raise ValidationError(
        "layout", "default", "a checkout with site/devcluster/default.yaml, or --layout FILE", "devcluster"
    )


def load_layout(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Layout:
    """Read a layout YAML (the default one when ``path`` is None), with top-level keys of ``overrides``
    replacing the file's. Relative ``conf_files`` paths are taken relative to the YAML file."""
    file = Path(path) if path is not None else default_layout_path()
    where = str(file)
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise ValidationError("layout", str(file), f"a readable YAML file ({exc.strerror})", "devcluster") from exc
    except yaml.YAMLError as exc:
        raise ValidationError("layout", str(file), f"valid YAML ({exc})", "devcluster") from exc
    if not isinstance(data, dict):
        raise ValidationError("layout", type(data).__name__, "a mapping at the top level", where)
    if overrides:
        data = {**data, **overrides}
        where = f"{file} (with overrides)"
    return parse_layout(data, where=where, base_dir=file.parent)


def parse_layout(data: Mapping[str, Any], where: str = "<dict>", base_dir: Path | None = None) -> Layout:
    """Validate a layout given as plain data (what the YAML holds)."""
    _check_keys(data, _TOP_KEYS, "layout", where)
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise ValidationError("nodes", raw_nodes, "a non-empty list of node entries", where)
    nodes: list[NodeSpec] = []
    for i, raw in enumerate(raw_nodes):
        nodes.extend(_parse_node(raw, f"{where}: nodes[{i}]"))
    names = [n.name for n in nodes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError("nodes.name", dupes, "each node name once", where)
    partitions = _parse_partitions(data.get("partitions"), names, where)
    extra = data.get("slurm_conf_extra") or []
    if not isinstance(extra, list) or not all(isinstance(x, str) and "\n" not in x for x in extra):
        raise ValidationError("slurm_conf_extra", extra, "a list of single-line strings", where)
    conf_files = _parse_conf_files(data.get("conf_files") or {}, where, base_dir)
    port = data.get("slurmctld_port")
    if port is not None:
        _check_port(port, "slurmctld_port", where)
    cred_expire = data.get("cred_expire", 10)
    bad = isinstance(cred_expire, bool) or not isinstance(cred_expire, int) or cred_expire < 1
    if cred_expire is not None and bad:
        raise ValidationError("cred_expire", cred_expire, "seconds >= 1, or null for Slurm's default (120)", where)
    return Layout(
        nodes=tuple(nodes),
        partitions=partitions,
        slurm_conf_extra=tuple(extra),
        conf_files=conf_files,
        slurmctld_port=port,
        cred_expire=cred_expire,
        source=where,
        accounts=parse_accounts(data["accounts"], where) if data.get("accounts") is not None else None,
    )


def _check_keys(data: Mapping[str, Any], allowed: set[str], what: str, where: str) -> None:
    if not isinstance(data, Mapping):
        raise ValidationError(what, data, "a mapping", where)
    for key in data:
        if key not in allowed:
            raise ValidationError(f"{what} key", key, f"one of {', '.join(sorted(allowed))}", where)


def _int_field(raw: Mapping[str, Any], name: str, where: str, *, minimum: int, default: int | None = None) -> int:
    value = raw.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValidationError(name, value, f"an integer >= {minimum}", where)
    return value


def _check_port(port: Any, name: str, where: str) -> None:
    if not isinstance(port, int) or isinstance(port, bool) or not 1024 <= port <= 65535:
        raise ValidationError(name, port, "a TCP port number between 1024 and 65535", where)


def _parse_node(raw: Any, where: str) -> list[NodeSpec]:
    _check_keys(raw, _NODE_KEYS, "node", where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError("name", name, "a host name or hostlist such as 'a100n[1-2]'", where)
    names = expand_hostlist(name)
    gpu_type = raw.get("gpu_type")
    if gpu_type is not None and (not isinstance(gpu_type, str) or not _TYPE_RE.match(gpu_type)):
        raise ValidationError("gpu_type", gpu_type, "a lower-case GPU type name such as 'a100', or null", where)
    gpus = _int_field(raw, "gpus", where, minimum=0, default=0)
    if gpus and gpu_type is None:
        raise ValidationError("gpu_type", gpu_type, "a GPU type when gpus > 0", where)
    cpus = _int_field(raw, "cpus", where, minimum=1, default=4)
    memory_mb = _int_field(raw, "memory_mb", where, minimum=1, default=4096)
    features = raw.get("features") or []
    if not isinstance(features, list) or not all(isinstance(f, str) and _TYPE_RE.match(f) for f in features):
        raise ValidationError("features", features, "a list of lower-case words", where)
    port = raw.get("port")
    if port is not None:
        _check_port(port, "port", where)
        if len(names) != 1:
            raise ValidationError("port", port, "a port only on an entry naming one node", where)
    return [NodeSpec(n, gpu_type if gpus else None, gpus, cpus, memory_mb, tuple(features), port) for n in names]


def _parse_partitions(raw: Any, names: list[str], where: str) -> tuple[PartitionSpec, ...]:
    if raw is None:
        return (PartitionSpec("gpu", tuple(names), default=True),)
    if not isinstance(raw, list) or not raw:
        raise ValidationError("partitions", raw, "a non-empty list of partition entries", where)
    out: list[PartitionSpec] = []
    for i, part in enumerate(raw):
        at = f"{where}: partitions[{i}]"
        _check_keys(part, _PART_KEYS, "partition", at)
        pname = part.get("name")
        if not isinstance(pname, str) or not _TYPE_RE.match(pname):
            raise ValidationError("name", pname, "a lower-case partition name", at)
        members = part.get("nodes", "ALL")
        if members == "ALL":
            pnodes = tuple(names)
        elif isinstance(members, str):
            pnodes = expand_hostlist(members)
            unknown = [n for n in pnodes if n not in names]
            if unknown:
                raise ValidationError("nodes", unknown, f"nodes of this layout ({', '.join(names)}) or ALL", at)
        else:
            raise ValidationError("nodes", members, "a hostlist string or ALL", at)
        max_time = str(part.get("max_time", "7-00:00:00"))
        if not _TIME_RE.match(max_time):
            raise ValidationError("max_time", max_time, "a Slurm time such as '7-00:00:00' or UNLIMITED", at)
        default = part.get("default", False)
        if not isinstance(default, bool):
            raise ValidationError("default", default, "true or false", at)
        tier = _int_field(part, "priority_tier", at, minimum=0, default=1)
        out.append(PartitionSpec(pname, pnodes, default, max_time, tier))
    if sum(p.default for p in out) > 1:
        raise ValidationError("partitions.default", [p.name for p in out if p.default], "at most one default", where)
    return tuple(out)


def _parse_conf_files(raw: Any, where: str, base_dir: Path | None) -> dict[str, Path]:
    if not isinstance(raw, Mapping):
        raise ValidationError("conf_files", raw, "a mapping of file name to source path", where)
    out: dict[str, Path] = {}
    for name, src in raw.items():
        if not isinstance(name, str) or not _CONF_NAME_RE.match(name) or name in _RESERVED_CONF:
            raise ValidationError(
                "conf_files name", name, "a plain file name other than slurm.conf and gres.conf", where
            )
        path = Path(str(src))
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ValidationError(f"conf_files.{name}", str(path), "an existing file", where)
        out[name] = path.resolve()
    return out
