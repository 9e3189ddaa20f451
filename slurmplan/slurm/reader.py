"""The one reader of Slurm's output, one version per Slurm data format.

Everything slurmplan reads from Slurm (``sinfo --json``, ``squeue --json``, ``scontrol show config``) goes
through here and leaves as version-neutral records (:class:`NodeRecord`, :class:`JobRecord`, a config dict),
whose field names are Slurm 22.05's. The backend builds domain values from those records; the site checks,
the job's own calls (``jobctl``), the replay harness and the tests' helpers read them as they are.

Which reader: JSON names its format in ``meta.plugin`` (``type: openapi/v0.0.38`` on 22.05,
``data_parser: data_parser/v0.0.42`` on 24.11), so :func:`reader_for` picks by that; text output
(``scontrol show config``) carries no version, so :func:`show_config` takes the version ``scontrol --version``
printed. A new Slurm version means one new :class:`Reader` subclass here (and one new value in ``rules``).

Slurm's output is partly user input (job names, comments): a record that cannot be read is reported as a
:class:`SlurmOutputError` naming its field; :func:`read_records` collects those per record, so a caller may
skip one bad record and keep the rest (the backend decides whether to).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from slurmplan.domain import SlurmplanError, ValidationError
from slurmplan.slurm.parse import expand_hostlist, gpu_request

log = logging.getLogger(__name__)

INFINITE32 = 0xFFFFFFFE
"""Slurm's INFINITE/NO_VAL for 32-bit fields as 22.05 prints them (24.11 prints ``{"infinite": true}``)."""


class SlurmOutputError(SlurmplanError):
    """A Slurm command answered, but not in the shape this reader knows; the message names the field."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.record_id: str | None = None
        """The job id (or node name) of the record that could not be read, where :func:`read_records` knows it."""
        super().__init__(f"{source}: field {field!r}: {problem}")


@dataclass(frozen=True)
class NodeRecord:
    """One node as ``sinfo --json`` shows it (22.05's field names; states upper-case, flags split out)."""

    name: str
    state: str  # base state, e.g. "MIXED"
    flags: frozenset[str]  # e.g. {"DRAIN"}
    gres: str
    gres_used: str
    gpu_type: str | None  # from gres, lower-case
    gpus: int
    gpus_used: int
    cpus: int
    alloc_cpus: int
    real_memory: int
    alloc_memory: int
    features: tuple[str, ...]
    active_features: tuple[str, ...]
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class JobRecord:
    """One job as ``squeue --json`` shows it, in 22.05's field names whatever the version.

    Numbers Slurm leaves unset or infinite are None; ``tres_per_node``/``tres_per_job`` are in 22.05's
    ``gres:gpu:TYPE:N`` spelling (24.11 prints ``gres/gpu:TYPE:N``), so messages read the same on both.
    """

    job_id: int
    name: str
    user_name: str
    account: str
    partition: str
    qos: str
    cluster: str
    job_state: str  # e.g. "RUNNING", or the flag 22.05 names instead (e.g. "COMPLETING"); all 24.11 flags: state_flags
    state_flags: tuple[str, ...]
    state_reason: str
    tres_per_node: str
    tres_per_job: str
    features: str
    node_count: int | None
    nodes: str
    node_names: tuple[str, ...]  # ``nodes`` expanded
    required_nodes: str
    gpu_per_node: tuple[str | None, int]  # from tres_per_node: (type or None, count)
    gpu_per_job: tuple[str | None, int]  # from tres_per_job
    cpus: int | None
    memory_per_node: int | None
    memory_per_cpu: int | None
    time_limit: int | None  # minutes; None = unlimited or unset
    submit_time: int | None
    start_time: int | None
    priority: int | None
    comment: str
    admin_comment: str
    restart_cnt: int

    def as_dict(self) -> dict[str, Any]:
        """The record as a plain dict (tests and the replay harness compare fields by name)."""
        return dataclasses.asdict(self)


R = TypeVar("R")


@dataclass(frozen=True)
class Parsed(Generic[R]):
    """The records of one document that could be read, and one error per record that could not."""

    records: tuple[R, ...]
    bad: tuple[SlurmOutputError, ...] = ()


class Field:
    """Typed access to one JSON record; every problem raises :class:`SlurmOutputError` with the full path."""

    def __init__(self, record: Any, source: str, path: str) -> None:
        if not isinstance(record, Mapping):
            raise SlurmOutputError(source, path, f"expected an object, got {type(record).__name__}")
        self.record = record
        self.source = source
        self.path = path

    def error(self, key: str, problem: str) -> SlurmOutputError:
        return SlurmOutputError(self.source, f"{self.path}.{key}", problem)

    def get(self, key: str, required: bool) -> Any:
        if key not in self.record:
            if required:
                raise self.error(key, "missing")
            return None
        return self.record[key]

    def num(self, key: str, required: bool = False) -> int | None:
        """A number: plain (22.05) or ``{set, infinite, number}`` (24.11); unset or infinite is None."""
        value = self.get(key, required)
        if isinstance(value, Mapping):
            if not value.get("set", True) or value.get("infinite", False):
                return None
            value = value.get("number")
        if value is None:
            if required:
                raise self.error(key, "expected a number, got None")
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"expected a number, got {value!r}")
        return int(value)

    def text(self, key: str, required: bool = False) -> str:
        value = self.get(key, required)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        return value

    def parsed(self, key: str, parse: Callable[[str], Any], required: bool = False) -> Any:
        """A string field run through ``parse`` (a GRES or host-list parser); its refusal names the field."""
        value = self.text(key, required)
        try:
            return parse(value)
        except ValidationError as exc:
            raise self.error(key, str(exc)) from exc

    def strs(self, key: str, required: bool = False) -> tuple[str, ...]:
        """A list of strings, given as a list or as one comma-separated string."""
        value = self.get(key, required)
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(v for v in value.split(",") if v)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"expected a list of strings, got {value!r}")
        return tuple(value)


def _tres(text: str) -> str:
    """``gres/gpu:a100:2`` (24.11) as ``gres:gpu:a100:2`` (22.05), each comma-separated entry."""
    return ",".join(re.sub(r"^gres/", "gres:", part) for part in text.split(",")) if text else ""


class Reader:
    """Slurm 22.05's JSON (OpenAPI v0.0.38): flat records, plain numbers, states as one string."""

    name: ClassVar[str] = "22.05"
    version: ClassVar[tuple[int, int]] = (22, 5)
    formats: ClassVar[tuple[str, ...]] = ("openapi/v0.0.38", "v0.0.38")
    nodes_argv: ClassVar[tuple[str, ...]] = ("sinfo", "--json")
    """The command whose JSON has one record per node with its GRES, CPUs and memory."""

    def node_list(self, payload: Mapping[str, Any], source: str) -> list[Any]:
        return _list(payload, "nodes", source)

    def job_list(self, payload: Mapping[str, Any], source: str) -> list[Any]:
        return _list(payload, "jobs", source)

    def node_state(self, f: Field) -> tuple[str, frozenset[str]]:
        return f.text("state", required=True).upper(), frozenset(s.upper() for s in f.strs("state_flags"))

    def job_state(self, f: Field) -> tuple[str, tuple[str, ...]]:
        return f.text("job_state", required=True).upper(), ()

    def node(self, f: Field) -> NodeRecord:
        state, flags = self.node_state(f)
        gpu_type, gpus = f.parsed("gres", gpu_request, required=True)
        _, used = f.parsed("gres_used", gpu_request)
        return NodeRecord(
            name=f.text("name", required=True),
            state=state,
            flags=flags,
            gres=f.text("gres", required=True),
            gres_used=f.text("gres_used"),
            gpu_type=gpu_type.lower() if gpu_type else None,
            gpus=gpus,
            gpus_used=min(used, gpus) if gpus else 0,
            cpus=f.num("cpus", required=True) or 0,
            alloc_cpus=f.num("alloc_cpus") or 0,
            real_memory=f.num("real_memory", required=True) or 0,
            alloc_memory=f.num("alloc_memory") or 0,
            features=f.strs("features"),
            active_features=f.strs("active_features"),
            partitions=f.strs("partitions"),
        )

    def job(self, f: Field) -> JobRecord:
        state, state_flags = self.job_state(f)
        job_id = f.num("job_id", required=True)
        assert job_id is not None
        return JobRecord(
            job_id=job_id,
            name=f.text("name"),
            user_name=f.text("user_name"),
            account=f.text("account"),
            partition=f.text("partition"),
            qos=f.text("qos"),
            cluster=f.text("cluster"),
            job_state=state,
            state_flags=state_flags,
            state_reason=f.text("state_reason"),
            tres_per_node=_tres(f.text("tres_per_node")),
            tres_per_job=_tres(f.text("tres_per_job")),
            features=f.text("features"),
            node_count=f.num("node_count"),
            nodes=f.text("nodes"),
            node_names=f.parsed("nodes", expand_hostlist),
            required_nodes=f.text("required_nodes"),
            gpu_per_node=_lower(f.parsed("tres_per_node", lambda t: gpu_request(_tres(t)))),
            gpu_per_job=_lower(f.parsed("tres_per_job", lambda t: gpu_request(_tres(t)))),
            cpus=f.num("cpus"),
            memory_per_node=_finite(f.num("memory_per_node")),
            memory_per_cpu=_finite(f.num("memory_per_cpu")),
            time_limit=_finite(f.num("time_limit")),
            submit_time=f.num("submit_time"),
            start_time=f.num("start_time"),
            priority=f.num("priority"),
            comment=f.text("comment"),
            admin_comment=f.text("admin_comment"),
            restart_cnt=f.num("restart_cnt") or 0,
        )


class Reader24(Reader):
    """Slurm 24.11's JSON (data_parser v0.0.42).

    Differences from 22.05, each pinned by ``tests/slurm/test_reader.py`` on captured output: ``sinfo --json``
    is ``{sinfo: [...]}`` grouped by partition and state, with only node *names* in ``sinfo[i].nodes.nodes``, so
    nodes are read from ``scontrol show nodes --json`` (:attr:`nodes_argv`, absent on 22.05);
    node ``state`` and job ``job_state`` are lists (base state first, then flags) and ``state_flags`` is gone;
    a job's state is then read as 22.05 prints it (``JOB_STATE_NAMED_BY_FLAG``: a job being requeued is
    ``['PENDING', 'COMPLETING']`` on 24.11, ``COMPLETING`` on 22.05); numbers are ``{set, infinite, number}``;
    ``tres_per_node`` is spelt ``gres/gpu:N``.
    """

    name: ClassVar[str] = "24.11"
    version: ClassVar[tuple[int, int]] = (24, 11)
    formats: ClassVar[tuple[str, ...]] = ("data_parser/v0.0.42", "v0.0.42")
    nodes_argv: ClassVar[tuple[str, ...]] = ("scontrol", "show", "nodes", "--json")

    def node_list(self, payload: Mapping[str, Any], source: str) -> list[Any]:
        if "nodes" not in payload and "sinfo" in payload:
            problem = "24.11's sinfo --json lists node names per partition only; read `scontrol show nodes --json`"
            raise SlurmOutputError(source, "nodes", problem)
        return _list(payload, "nodes", source)

    def node_state(self, f: Field) -> tuple[str, frozenset[str]]:
        states = [s.upper() for s in f.strs("state", required=True)]
        if not states:
            raise f.error("state", "expected at least one state, got []")
        return states[0], frozenset(states[1:])

    def job_state(self, f: Field) -> tuple[str, tuple[str, ...]]:
        states = [s.upper() for s in f.strs("job_state", required=True)]
        if not states:
            raise f.error("job_state", "expected at least one state, got []")
        flags = tuple(states[1:])
        named = next((s for s in JOB_STATE_NAMED_BY_FLAG if s in flags), states[0])
        return named, flags


JOB_STATE_NAMED_BY_FLAG = (
    "COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
)  # fmt: skip
"""The job state flags that 22.05's ``job_state`` names instead of the base state, first match wins (Slurm's
``job_state_string``). 24.11 lists the base state first: a job whose requeue is not done yet reads
``['PENDING', 'COMPLETING']`` there (priority 0 if held, its nodes still listed, Slurm's begin time not yet set)
where 22.05 says ``COMPLETING``; read as PENDING, a tick released it at once and Slurm's requeue then set the
121-s wait after the tick had cleared it."""


class Reader26(Reader24):
    """Slurm 26.05's JSON (data_parser v0.0.45), read as 24.11's: on Debian forky's Slurm 26.05.5 the recorded
    output (``tests/slurm/data/*_26.05*``) reads to the same domain values as 24.11's, and every Slurm-facing test
    passes (``SLURMPLAN_DEBIAN_SUITE=forky bash site/quickstart/debian13.sh test``; twenty-fourth session). The
    formats between (v0.0.43 and v0.0.44: Slurm 25.05 and 25.11) were not seen on a real Slurm and stay refused
    by name."""

    name: ClassVar[str] = "26.05"
    version: ClassVar[tuple[int, int]] = (26, 5)
    formats: ClassVar[tuple[str, ...]] = ("data_parser/v0.0.45", "v0.0.45")


READERS: tuple[Reader, ...] = (Reader(), Reader24(), Reader26())


def _lower(request: tuple[str | None, int]) -> tuple[str | None, int]:
    return (request[0].lower() if request[0] else None, request[1])


def _finite(value: int | None) -> int | None:
    return None if value is None or value >= INFINITE32 else value


def _list(payload: Mapping[str, Any], key: str, source: str) -> list[Any]:
    records = payload.get(key)
    if not isinstance(records, list):
        raise SlurmOutputError(source, key, f"expected a list, got {type(records).__name__}")
    return records


def data_format(payload: Any, source: str) -> str:
    """The format a JSON document names in ``meta.plugin`` (``data_parser`` on 23.02+, ``type`` on 22.05)."""
    if not isinstance(payload, Mapping):
        raise SlurmOutputError(source, "(top level)", f"expected an object, got {type(payload).__name__}")
    plugin = (payload.get("meta") or {}).get("plugin") if isinstance(payload.get("meta"), Mapping) else None
    if not isinstance(plugin, Mapping):
        raise SlurmOutputError(source, "meta.plugin", "missing (cannot tell which Slurm wrote this)")
    name = plugin.get("data_parser") or plugin.get("type")
    if not isinstance(name, str) or not name:
        raise SlurmOutputError(source, "meta.plugin.data_parser", f"expected a format name, got {name!r}")
    return name


def reader_for(payload: Any, source: str) -> Reader:
    """The reader for a JSON document, chosen by the format it names; an unknown one is refused by name."""
    name = data_format(payload, source)
    for reader in READERS:
        if name in reader.formats:
            return reader
    known = ", ".join(f"{f} (Slurm {r.name})" for r in READERS for f in r.formats[:1])
    problem = f"{name!r} is not a format slurmplan reads; it reads {known}"
    raise SlurmOutputError(source, "meta.plugin.data_parser", problem)


def _check_errors(payload: Mapping[str, Any], source: str) -> None:
    errors = payload.get("errors") or []
    if errors:
        raise SlurmOutputError(source, "errors", f"Slurm reported {errors!r}")


def read_records(
    payload: Any, source: str, kind: str, on_bad: Callable[[SlurmOutputError], None] | None = None
) -> Parsed[Any]:
    """Every ``kind`` (``"nodes"`` or ``"jobs"``) record of one JSON document.

    Without ``on_bad`` the first record that cannot be read raises; with it, each bad record is passed to
    ``on_bad`` and left out (the document's own shape must still be right: that raises either way).
    """
    reader = reader_for(payload, source)
    _check_errors(payload, source)
    raw = reader.node_list(payload, source) if kind == "nodes" else reader.job_list(payload, source)
    build = reader.node if kind == "nodes" else reader.job
    good: list[Any] = []
    bad: list[SlurmOutputError] = []
    for i, record in enumerate(raw):
        where = f"{kind}[{i}]"
        try:
            good.append(build(Field(record, source, where)))
        except (SlurmOutputError, ValueError, TypeError, OverflowError) as exc:  # users' bytes: any shape
            if on_bad is None:
                raise
            err = exc if isinstance(exc, SlurmOutputError) else SlurmOutputError(source, where, str(exc)[:200])
            ident = record.get("job_id", record.get("name")) if isinstance(record, Mapping) else None
            ok = isinstance(ident, int | str) and not isinstance(ident, bool)
            err.record_id = ascii(ident)[:60].strip("'") if ok else f"#{i}"  # which record, for the log
            on_bad(err)
            bad.append(err)
    return Parsed(tuple(good), tuple(bad))


def read_nodes(payload: Any, source: str = "sinfo --json") -> tuple[NodeRecord, ...]:
    """The nodes of ``Reader.nodes_argv``'s JSON (``sinfo --json`` on 22.05, ``scontrol show nodes --json`` on
    24.11); a bad record raises."""
    return read_records(payload, source, "nodes").records


def read_jobs(payload: Any, source: str = "squeue --json", skip_bad: bool = False) -> tuple[JobRecord, ...]:
    """The jobs of ``squeue --json``; with ``skip_bad`` a record that cannot be read is left out and logged once
    (:func:`log_skipped`)."""
    return read_records(payload, source, "jobs", log_skipped if skip_bad else None).records


_SKIPPED_LOGGED: set[tuple[str, str]] = set()
"""(record key, problem) pairs already logged: a bad job is logged when first seen, not on every tick or call."""
_SKIPPED_LOG_MAX = 10_000


def log_skipped(exc: SlurmOutputError) -> None:
    """Log a record left out, once per record and problem: the one logger of skipped Slurm records (the snapshot's
    and ``read_jobs(skip_bad=True)``'s), since a hostile job stays in squeue's output tick after tick."""
    key = (f"{exc.source}:{exc.record_id or '?'}", str(exc)[:200])
    if key in _SKIPPED_LOGGED:
        return
    if len(_SKIPPED_LOGGED) >= _SKIPPED_LOG_MAX:
        _SKIPPED_LOGGED.clear()
    _SKIPPED_LOGGED.add(key)
    log.warning("%s: skipping record %s that cannot be read: %s", exc.source, key[0], ascii(str(exc))[:300])


def find_job(records: tuple[JobRecord, ...], job_id: int | str) -> JobRecord | None:
    """The record of ``job_id`` among ``records`` (a job array's other tasks share no id with it)."""
    return next((r for r in records if str(r.job_id) == str(job_id)), None)


# ------------------------------------------------------------------------------------------ text output


_VERSION = re.compile(r"slurm(?:-wlm)?\s+(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int]:
    """``(major, minor)`` from ``scontrol --version`` (``slurm-wlm 24.11.5`` or ``slurm 22.05.8``)."""
    m = _VERSION.search(text)
    if not m:
        problem = f"expected 'slurm[-wlm] MAJOR.MINOR...', got {text!r}"
        raise SlurmOutputError("scontrol --version", "(version)", problem)
    return int(m.group(1)), int(m.group(2))


def slurm_version(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """The version ``scontrol --version`` prints (it needs a readable slurm.conf, hence ``env``)."""
    from slurmplan.slurm.run import run_slurm

    return parse_version(run_slurm(["scontrol", "--version"], env, timeout=30).stdout)


def read_show_config(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The running controller's configuration (``scontrol show config``), read as its version prints it."""
    from slurmplan.slurm.run import run_slurm

    version = slurm_version(env)
    return show_config(run_slurm(["scontrol", "show", "config"], env, timeout=30).stdout, version)


def show_config(text: str, version: tuple[int, int] = (22, 5)) -> dict[str, str]:
    """``Key = value`` lines of ``scontrol show config``, first occurrence of each key.

    24.11 prints list-valued keys indexed (``PrologSlurmctld[0] = /path``); from 23.02 on (``version``) an
    indexed key is read under its plain name, the entries joined by commas as 22.05 prints them.
    """
    out: dict[str, str] = {}
    indexed: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or " " in key:
            continue
        m = re.fullmatch(r"(\w+)\[(\d+)\]", key) if version >= (23, 2) else None
        if m:
            indexed.setdefault(m.group(1), []).append(value.strip())
            continue
        out.setdefault(key, value.strip())
    for key, values in indexed.items():
        out.setdefault(key, ",".join(values))
    return out
