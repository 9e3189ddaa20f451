"""Value types shared by every room of slurmplan.

Everything here is a frozen dataclass or an enum: the decision code in the middle (perf, policy, mechanism)
only ever sees these values, never a Slurm string, a SQLite row or a process. The Slurm backend and the
simulator translate to and from them at the edges.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

GpuType = str
"""A GPU type as Slurm's GRES type names it, lower case: ``"a100"``, ``"v100"``, ``"t4"``."""

JobId = int


SLURM_CRED_EXPIRE_S = 120.0
"""Slurm's default ``cred_expire`` (``AuthInfo``), in seconds."""
SLURM_REQUEUE_DELAY_S = SLURM_CRED_EXPIRE_S + 1.0
"""Slurm's wait before a requeued job may start again on a node it just left, ``cred_expire + 1`` with Slurm's
default ``cred_expire`` (120 s), measured the same on 22.05 and 24.11: ``SlurmRules.requeue_start_delay_s`` and
the tick's ``requeue_delay_s`` (so the daemon's and the simulator's) take it from here."""


class SlurmplanError(Exception):
    """Base of every error slurmplan raises on purpose.

    Picklable whatever a subclass's ``__init__`` takes: the constructor's arguments are remembered here and
    replayed on unpickling. Plain ``Exception`` pickles only ``self.args`` (the message), so an error with extra
    constructor arguments raised in a worker process (``compare``) broke the whole process pool instead of
    reaching the user.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> SlurmplanError:
        self = super().__new__(cls, *args)
        self._init_args = (args, kwargs)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self.__dict__.get("_init_args", (self.args, {}))
        state = {k: v for k, v in self.__dict__.items() if k != "_init_args"}
        return (_rebuild_error, (type(self), args, kwargs), state)


def _rebuild_error(cls: type[SlurmplanError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> SlurmplanError:
    return cls(*args, **kwargs)


class ValidationError(SlurmplanError, ValueError):
    """Bad input: the message names the field, the value and what is allowed."""

    def __init__(self, field_name: str, value: object, allowed: str, where: str = "") -> None:
        self.field = field_name
        self.value = value
        self.allowed = allowed
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}invalid {field_name} {value!r}: {allowed}")


# --------------------------------------------------------------------------------------------------- cluster


class NodeState(enum.Enum):
    """The base state Slurm reports for a node; flags such as DRAIN are folded in as DRAINED."""

    IDLE = "idle"
    MIXED = "mixed"
    ALLOCATED = "allocated"
    COMPLETING = "completing"
    DRAINED = "drained"
    DOWN = "down"
    UNKNOWN = "unknown"

    def __init__(self, value: str) -> None:
        # A plain attribute, not a property: every tick asks it of every node.
        self.schedulable: bool = value in ("idle", "mixed", "allocated", "completing")


@dataclass(frozen=True)
class Node:
    name: str
    state: NodeState
    gpu_type: GpuType | None
    gpus: int
    gpus_used: int = 0
    cpus: int = 1
    cpus_used: int = 0
    memory_mb: int = 0
    memory_used_mb: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus - self.gpus_used) if self.state.schedulable else 0

    @property
    def cpus_free(self) -> int:
        return max(0, self.cpus - self.cpus_used) if self.state.schedulable else 0

    @property
    def memory_free_mb(self) -> int:
        return max(0, self.memory_mb - self.memory_used_mb) if self.state.schedulable else 0


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]

    def gpus_by_type(self, *, usable_only: bool = True) -> dict[GpuType, int]:
        """Total GPUs per type, counting only nodes that can run jobs unless told otherwise."""
        out: dict[GpuType, int] = {}
        for n in self.nodes:
            if n.gpu_type and (n.state.schedulable or not usable_only):
                out[n.gpu_type] = out.get(n.gpu_type, 0) + n.gpus
        return out

    def free_gpus_by_type(self) -> dict[GpuType, int]:
        out: dict[GpuType, int] = {}
        for n in self.nodes:
            if n.gpu_type:
                out[n.gpu_type] = out.get(n.gpu_type, 0) + n.gpus_free
        return out

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


# ------------------------------------------------------------------------------------------------------ jobs


class JobState(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETING = "completing"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    PREEMPTED = "preempted"
    OUT_OF_MEMORY = "out_of_memory"
    REQUEUED = "requeued"
    OTHER = "other"

    @property
    def finished(self) -> bool:
        return self in _FINISHED

    @property
    def active(self) -> bool:
        """Holds GPUs now."""
        return self in _ACTIVE


_FINISHED = (
    JobState.COMPLETED,
    JobState.CANCELLED,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.NODE_FAIL,
    JobState.OUT_OF_MEMORY,
)
"""Read by ``JobState.finished`` (for every job, several times a tick): one tuple, not a new one a call."""
_ACTIVE = (JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING)


class JobClass(enum.Enum):
    """Rubick's two classes: guaranteed jobs get a performance SLA, best-effort jobs use what is left."""

    GUARANTEED = "guaranteed"
    BEST_EFFORT = "best-effort"


@dataclass(frozen=True)
class Hints:
    """What a user told slurmplan about a job (sbatch plan options, copied into the admin comment).

    ``gpus`` and ``gpu_types`` are the user's request; ``min_gpus``/``max_gpus`` allow elastic resizing;
    ``workers`` is EasyScale's maxP (logical workers fixed for the job's life).
    """

    managed: bool = True
    model: str | None = None
    gpu_types: tuple[GpuType, ...] = ()
    gpus: int | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    job_class: JobClass = JobClass.BEST_EFFORT
    workers: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    stack: str | None = None
    """The training framework the job runs (``formats.STACKS``): the performance model predicts for it and ranks
    only the plans it can run; None = the launcher's Megatron adapters, whichever runs the plan."""
    steps: int | None = None
    deadline: float | None = None
    """Unix time by which the job should finish."""
    max_nodes: int | None = None
    """The most nodes the job may span: its own ``--nodes``/``-N`` (max), recorded by job_submit.lua as ``nodes=``.
    A job written for one node breaks when spread over two, so the daemon never gives it more."""
    asked: str | None = None
    """The typed GPU request (``a100:4``) job_submit.lua turned into an untyped one plus a type preference, so the
    job can move; the daemon may still use another type unless ``gpu_types`` says which it needs."""

    @property
    def elastic(self) -> bool:
        return self.min_gpus is not None and self.max_gpus is not None and self.min_gpus != self.max_gpus


@dataclass(frozen=True)
class Job:
    """A Slurm job as the decision code sees it (pyslurm's field names where they exist)."""

    job_id: JobId
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    """The job's Slurm QOS (the trust allowlist of hints and QOS preemption name it, ``control/trust.py``,
    ``mechanism/qos.py``)."""
    state: JobState = JobState.PENDING
    state_reason: str = ""
    gpu_type: GpuType | None = None
    gpus_per_node: int = 0
    node_count: int = 1
    nodes: tuple[str, ...] = ()
    cpus: int = 1
    memory_mb: int = 0
    time_limit_s: int | None = None
    submit_time: float = 0.0
    start_time: float | None = None
    comment: str = ""
    admin_comment: str = ""
    restart_count: int = 0
    held: bool = False
    gpu_type_preferred: bool = False
    """True when ``gpu_type`` is only a preference: the GRES request is untyped (``--gres=gpu:2``) and the type
    comes from ``--constraint`` or from the nodes it runs on. Slurm lets the daemon move such a request to another
    type through node features; a typed request (False, with a ``gpu_type``) keeps its type (``slurmplan.rules``)."""
    cluster: str = ""
    """Slurm's ClusterName the job belongs to (report files are keyed by it, ``control/reports.py``)."""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.node_count


# ----------------------------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """An execution plan. ``dp * tp * pp`` GPUs; the global batch is ``dp * micro_batch * grad_accum``.

    ``grad_accum`` is the number of micro-batches each data-parallel replica runs per iteration: plain
    gradient accumulation when ``pp == 1``, the pipeline's micro-batches when ``pp > 1``. ``virtual_stages``
    is Megatron's interleaving factor v (chunks per GPU).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    micro_batch: int = 1
    grad_accum: int = 1
    checkpointing: bool = False
    zero_stage: int = 0
    offload: bool = False
    virtual_stages: int = 1

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "micro_batch", "grad_accum", "virtual_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValidationError(name, value, "a positive integer", "plan")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValidationError("zero_stage", self.zero_stage, "one of 0, 1, 2, 3", "plan")

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def global_batch(self) -> int:
        return self.dp * self.micro_batch * self.grad_accum

    def short(self) -> str:
        """The compact form shown in admin comments: ``dp2 tp4 pp1 mb2 ga8 gc z1 off``."""
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}", f"mb{self.micro_batch}", f"ga{self.grad_accum}"]
        if self.virtual_stages > 1:
            parts.append(f"v{self.virtual_stages}")
        if self.checkpointing:
            parts.append("gc")
        if self.zero_stage:
            parts.append(f"z{self.zero_stage}")
        if self.offload:
            parts.append("off")
        return " ".join(parts)


@dataclass(frozen=True)
class Cell:
    """Crius's Cell: a configuration a job may run in — GPU type, GPU count and pipeline stage count."""

    gpu_type: GpuType
    gpus: int
    stages: int = 1

    def short(self) -> str:
        suffix = f" pp{self.stages}" if self.stages > 1 else ""
        return f"{self.gpu_type}x{self.gpus}{suffix}"


class ThroughputSource(enum.Enum):
    """Where a predicted figure comes from; ``slurmplan explain`` prints it."""

    MEASURED = "measured"
    FITTED = "fitted"
    ESTIMATED = "estimated"
    TABLE = "table"
    DEFAULT = "default"
    """A model slurmplan does not know, not measured yet: a relative default (``perf/unknown.py``)."""


@dataclass(frozen=True)
class Candidate:
    """One way to run one job: a Cell, the best plan found for it, and what it would achieve."""

    cell: Cell
    throughput: float
    """Samples per second (or steps per second for table-only job types); 0 means it cannot run."""
    plan: Plan | None = None
    source: ThroughputSource = ThroughputSource.ESTIMATED
    nodes: int = 1
    cpus: int = 0
    host_memory_mb: int = 0
    gpu_memory_gb: float = 0.0


# ------------------------------------------------------------------------------------------------ allocation


@dataclass(frozen=True, eq=False)
class AllocationProblem:
    """Everything any policy may need, indexed by job (rows) and configuration (columns).

    One type for every policy (Gavel's LP shape made explicit): a policy reads what it needs and ignores the
    rest. ``throughput[j, c] == 0`` means job j cannot use configuration c. Columns are Cells; a
    configuration uses ``cells[c].gpus`` GPUs of type ``cells[c].gpu_type``.
    """

    job_ids: tuple[JobId, ...]
    cells: tuple[Cell, ...]
    throughput: np.ndarray
    capacity: Mapping[GpuType, int]
    weights: np.ndarray | None = None
    steps_remaining: np.ndarray | None = None
    time_since_start: np.ndarray | None = None
    attained_time: np.ndarray | None = None
    """Seconds of GPU-holding wall time each job has received so far."""
    submit_time: np.ndarray | None = None
    deadline: np.ndarray | None = None
    """Seconds from now until each job's deadline; ``inf`` when it has none."""
    accounts: tuple[str, ...] | None = None
    account_weights: Mapping[str, float] | None = None
    job_class: tuple[JobClass, ...] | None = None
    sla_throughput: np.ndarray | None = None
    """Throughput a guaranteed job must get (its requested resources with its requested plan)."""
    requested: np.ndarray | None = None
    """Column of each job's own request, -1 if none of the columns matches it."""
    current: np.ndarray | None = None
    """Column each job runs in now, -1 when not running."""
    cost_per_gpu_hour: Mapping[GpuType, float] | None = None
    candidates: tuple[tuple[Candidate | None, ...], ...] | None = None
    """Per job and column, the candidate behind the throughput (plan, CPU and memory needs, source)."""
    cpu_capacity: Mapping[GpuType, int] | None = None
    """CPUs on the usable nodes of each GPU type (Rubick's second resource); None: CPUs do not limit X.
    A column's CPU need is its candidate's ``cpus``."""
    memory_capacity_mb: Mapping[GpuType, int] | None = None
    """Host memory (MB) on the usable nodes of each GPU type; None: memory does not limit X."""
    steps_known: np.ndarray | None = None
    """Per job: the job told its step count (else ``steps_remaining`` is a stand-in); None: all known."""
    time_limit_left: np.ndarray | None = None
    """Seconds each job has left before its Slurm time limit (``inf`` when it has none); None: unknown."""
    restart_cost_s: np.ndarray | None = None
    """Seconds one restart costs each job end to end (measured delta for its size plus Slurm's start latency,
    doubled for a job moved within the hold time: ``mechanism.pricing``); None: restarts are free."""
    moved_recently: np.ndarray | None = None
    """Per job: a decision moved, resized or stopped it within the hold time (its cost above is doubled)."""
    finished_lengths: np.ndarray | None = None
    """Seconds of GPUs held by the site's recently finished managed jobs (``SchedulerState.finished_lengths``):
    policies may learn the expected remaining time from them (``mechanism.lengths``); None: none finished yet."""

    def __post_init__(self) -> None:
        shape = (len(self.job_ids), len(self.cells))
        if self.throughput.shape != shape:
            raise ValidationError("throughput", self.throughput.shape, f"an array of shape {shape}", "problem")

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)

    def column(self, name: str) -> np.ndarray:
        """A per-job vector, with the neutral default when the field was not given."""
        value = getattr(self, name)
        if value is not None:
            return np.asarray(value, dtype=float)
        defaults = {
            "weights": 1.0,
            "steps_remaining": 1.0,
            "time_since_start": 0.0,
            "attained_time": 0.0,
            "submit_time": 0.0,
            "deadline": np.inf,
            "sla_throughput": 0.0,
        }
        return np.full(self.num_jobs, defaults[name], dtype=float)

    @property
    def gpus_per_cell(self) -> np.ndarray:
        return np.array([c.gpus for c in self.cells], dtype=float)


@dataclass(frozen=True, eq=False)
class Allocation:
    """A policy's answer: ``x[j, c]`` is the share of wall-clock time job j should spend in column c."""

    job_ids: tuple[JobId, ...]
    cells: tuple[Cell, ...]
    x: np.ndarray
    policy: str
    objective: float = float("nan")
    status: str = "optimal"
    notes: tuple[str, ...] | None = None
    """Per job, the policy's own words on why it got what it got (``explain`` shows them); None: none."""

    def effective_throughput(self, problem: AllocationProblem) -> np.ndarray:
        return (self.x * problem.throughput).sum(axis=1)

    def share(self, job_id: JobId) -> dict[Cell, float]:
        row = self.x[self.job_ids.index(job_id)]
        return {cell: float(v) for cell, v in zip(self.cells, row, strict=True) if v > 1e-9}


@runtime_checkable
class Policy(Protocol):
    """What the tick needs of an allocation policy: a name for the journal and ``allocate``.

    Every class in ``slurmplan.policy`` (built by ``policy.registry``) satisfies it; the tick, the mechanism,
    the daemon and the simulator are typed by this protocol rather than by the policy package, so they do not
    import it (it pulls in the LP solvers) and test policies need no base class.
    """

    @property
    def name(self) -> str: ...

    def allocate(self, problem: AllocationProblem) -> Allocation: ...


# ------------------------------------------------------------------------------------------------- decisions


class Reason(enum.Enum):
    """Closed set of why a job got what it got (k8s ``Status`` codes); ``explain`` prints them."""

    SCHEDULED = "scheduled"
    KEPT = "kept"  # lease renewed: running job keeps its configuration
    MOVED = "moved"  # gain beat the reconfiguration cost
    RESIZED = "resized"
    PREEMPTED = "preempted"
    WAITING = "waiting"  # zero share this round, or outranked
    UNPLACEABLE = "unplaceable"  # share > 0 but no nodes fit now
    UNSCHEDULABLE = "unschedulable"  # no configuration can ever run it
    BAD_HINTS = "bad-hints"
    UNMANAGED = "unmanaged"


@dataclass(frozen=True)
class Assignment:
    """What the mechanism decided for one job in one round."""

    job_id: JobId
    reason: Reason
    cell: Cell | None = None
    plan: Plan | None = None
    nodes: tuple[str, ...] = ()
    gpus_per_node: int = 0
    throughput: float = 0.0
    priority: float = 0.0
    share: float = 0.0
    detail: str = ""


class ActionKind(enum.Enum):
    HOLD = "hold"
    RELEASE = "release"
    UPDATE = "update"
    SIGNAL = "signal"
    REQUEUE = "requeue"
    REQUEUE_HOLD = "requeue-hold"
    ANNOTATE = "annotate"
    CANCEL = "cancel"


@dataclass(frozen=True)
class Action:
    """One change to one job. The Slurm backend and the simulator each have a single code path for these.

    Only the fields that matter for ``kind`` are set: UPDATE uses the GPU request, node count, node list and
    admin comment; SIGNAL uses ``signal``; ANNOTATE uses ``admin_comment``.
    """

    kind: ActionKind
    job_id: JobId
    gpu_type: GpuType | None = None
    gpus_per_node: int | None = None
    node_count: int | None = None
    nodelist: tuple[str, ...] | None = None
    admin_comment: str | None = None
    signal: str | None = None
    reason: str = ""
    previous_nodes: tuple[str, ...] | None = None
    """RELEASE of a restarted job: the nodes it last ran on (from the journaled scheduler state), so a backend
    that never saw it run (a cron tick's) knows whether the restart goes to other nodes (Slurm's begin-time
    wait may then be skipped; see ``rules.SlurmRules.may_skip_requeue_wait``)."""


@dataclass(frozen=True)
class Snapshot:
    """What one tick sees: the cluster and the jobs, at one instant."""

    time: float
    cluster: Cluster
    jobs: tuple[Job, ...]


class ClusterBackend(Protocol):
    """The two edges a tick touches. Implemented by ``slurm.backend`` and by ``sim``."""

    def snapshot(self) -> Snapshot: ...

    def apply(self, actions: list[Action]) -> list[ActionResult]: ...


@dataclass(frozen=True)
class ActionResult:
    action: Action
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class Measurement:
    """A throughput a job reported (or a profiler measured) for one plan on one configuration."""

    model: str
    gpu_type: GpuType
    gpus: int
    plan: Plan
    samples_per_s: float
    nodes: int = 1
    memory_gb: float | None = None
    job_id: JobId | None = None
    time: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)
    stack: str | None = None
    """The framework that ran the plan (``formats.STACKS``; None: not said): the model's refit predicts the
    measurement under it, so a fit never absorbs the framework (``perf.calibration``)."""


_V = TypeVar("_V")


def frozen_from(cls: type[_V], values: dict[str, Any]) -> _V:
    """An instance of the frozen dataclass ``cls`` whose fields are ``values``: every field, and ``cls`` without
    ``__post_init__``. ``values`` becomes the instance's own ``__dict__``, so pass a fresh dict.

    What the generated ``__init__`` (or ``dataclasses.replace``) would build, without its one ``object.__setattr__``
    per field: the tick makes several such values for every job every tick (issue 27's speed work), and this one
    place is where that shortcut lives. ``tests/mechanism/test_fast_values.py`` pins each use to the constructor."""
    out = object.__new__(cls)
    object.__setattr__(out, "__dict__", values)
    return out
