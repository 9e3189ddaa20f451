"""A job's Candidates: the Crius Cells around its request, each with its best plan and predicted throughput.

This is the one entry point the mechanism, the simulator and the daemon call (``job_candidates``). For each GPU
type in the cluster (or the user's allowed types), the GPU counts N/2, N, 2N (inside min/max and what the type
has) and the pipeline stage counts 1, 2, 4, ... (Crius), it finds the fastest plan that fits in memory with the
Rubick model. Measurements of the same model override (exact Cell: MEASURED) or calibrate (FITTED) the estimate.

The simulator calls this for thousands of jobs, so results are cached on hashable inputs: the planning-relevant
hint fields, the cluster's per-type shape (not its free GPUs) and the measurements' essentials.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from slurmplan.domain import (
    Candidate,
    Cell,
    Cluster,
    GpuType,
    Hints,
    Measurement,
    Plan,
    ThroughputSource,
    ValidationError,
)
from slurmplan.perf.calibration import Calibration, calibrate
from slurmplan.perf.hardware import GpuSpec, default_catalog, with_node_shape
from slurmplan.perf.memory import GB, plan_memory
from slurmplan.perf.models import ModelSpec, get_model, list_models
from slurmplan.perf.search import PlanSearch, search_plans
from slurmplan.perf.stacks import get_stack

log = logging.getLogger(__name__)

MAX_MEASUREMENTS = 256
"""Only a model's latest measurements are used (bounded fit cost and cache keys)."""
BASE_CPUS_PER_GPU = 4
"""CPUs a GPU's process gets without offload (data loading); offload plans take the node's share per GPU."""


@dataclass(frozen=True)
class TypeShape:
    """What the planner needs to know about one GPU type in a cluster."""

    gpu_type: GpuType
    total_gpus: int
    gpus_per_node: int
    cpus_per_node: int
    host_memory_gb: float


@dataclass(frozen=True)
class _JobKey:
    model: str
    gpu_types: tuple[GpuType, ...]
    gpus: int
    min_gpus: int
    max_gpus: int
    global_batch: int
    seq_len: int
    stack: str | None = None
    """The job's framework (``perf.stacks``); None = the default stack."""


def cluster_shapes(cluster: Cluster | Mapping[GpuType, int]) -> tuple[TypeShape, ...]:
    """Per-type shapes of a cluster; a plain ``{type: count}`` mapping takes node shapes from the catalog."""
    catalog = default_catalog()
    shapes: list[TypeShape] = []
    if isinstance(cluster, Mapping):
        for gpu_type, total in sorted(cluster.items()):
            name = catalog.resolve(gpu_type)
            if name is None or total <= 0:
                if name is None:
                    log.warning("gpu type %r is not in the hardware catalog; no candidates on it", gpu_type)
                continue
            spec = catalog.get(name)
            shapes.append(TypeShape(gpu_type, int(total), spec.gpus_per_node, spec.cpus_per_node, spec.host_memory_gb))
        return tuple(shapes)
    totals = cluster.gpus_by_type(usable_only=True)
    for gpu_type in sorted(totals):
        nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type and n.state.schedulable and n.gpus > 0]
        if not nodes or totals[gpu_type] <= 0:
            continue
        gpn = max(n.gpus for n in nodes)
        cpus = min(n.cpus for n in nodes)
        mem_gb = min(n.memory_mb for n in nodes) / 1000.0
        shapes.append(TypeShape(gpu_type, totals[gpu_type], gpn, cpus if cpus > 1 else 0, mem_gb))
    return tuple(shapes)


def gpu_counts(requested: int, min_gpus: int, max_gpus: int, available: int) -> tuple[int, ...]:
    """Crius's counts around the request (N/2, N, 2N), clipped to [min, max] and to what the type has."""
    counts = {max(1, requested // 2), requested, requested * 2}
    clipped = {min(max(c, min_gpus), max_gpus) for c in counts}
    return tuple(sorted(c for c in clipped if 1 <= c <= available))


def stage_counts(model: ModelSpec, gpus: int) -> tuple[int, ...]:
    """Crius's stage counts 1, 2, 4, ... up to the GPU count, keeping those that divide the layers."""
    out, s = [], 1
    while s <= gpus:
        if model.layers % s == 0:
            out.append(s)
        s *= 2
    return tuple(out)


def _resolve_spec(shape: TypeShape) -> GpuSpec | None:
    catalog = default_catalog()
    name = catalog.resolve(shape.gpu_type)
    if name is None:
        log.warning(
            "gpu type %r is not in the hardware catalog (%s); no candidates on it",
            shape.gpu_type,
            ", ".join(catalog.names()),
        )
        return None
    return with_node_shape(
        catalog.get(name), shape.gpus_per_node, shape.cpus_per_node or None, shape.host_memory_gb or None
    )


def _cell_candidate(search: PlanSearch, spec: GpuSpec, cell: Cell, calib: Calibration) -> Candidate | None:
    measured = calib.measured(cell)
    if measured is not None:  # it ran: trust the measurement over the memory model and the estimate
        plan, throughput = measured
        est = plan_memory(search.model, plan, spec, search.stack)
        gpu_gb, host_gb = float(est.total[0]) / GB, float(est.host[0]) / GB
        return _with_needs(cell, plan, throughput, ThroughputSource.MEASURED, spec, gpu_gb, host_gb)
    best = search.best_with_stages(cell.stages)
    if best is None:
        return None
    throughput = best.throughput * calib.ratio(cell.gpu_type)
    return _with_needs(cell, best.plan, throughput, calib.source, spec, best.gpu_memory_gb, best.host_memory_gb)


def plan_needs(plan: Plan, spec: GpuSpec, gpus: int, host_gb_per_gpu: float) -> tuple[int, int]:
    """(CPUs, host memory MB) a job needs on ``gpus`` GPUs with ``plan``: a few CPUs per GPU for data loading,
    the node's whole CPU share per GPU with offload (the CPU runs the optimizer)."""
    share = max(1, spec.cpus_per_node // spec.gpus_per_node)
    cpus_per_gpu = share if plan.offload else min(BASE_CPUS_PER_GPU, share)
    return cpus_per_gpu * gpus, int(round(host_gb_per_gpu * gpus * GB / 1e6))


def _with_needs(
    cell: Cell,
    plan: Plan,
    throughput: float,
    source: ThroughputSource,
    spec: GpuSpec,
    gpu_memory_gb: float,
    host_gb_per_gpu: float,
) -> Candidate:
    cpus, host_mb = plan_needs(plan, spec, cell.gpus, host_gb_per_gpu)
    return Candidate(
        cell=cell,
        throughput=float(throughput),
        plan=plan,
        source=source,
        nodes=math.ceil(cell.gpus / spec.gpus_per_node),
        cpus=cpus,
        host_memory_mb=host_mb,
        gpu_memory_gb=round(gpu_memory_gb, 3),
    )


def _monotone(cands: list[Candidate]) -> list[Candidate]:
    """More GPUs of a type (same stage count) never predicted slower: a slower larger Cell runs the smaller
    Cell's plan (leaving GPUs idle), as Rubick's resource-sensitivity curve stays flat over bad counts."""
    out: list[Candidate] = []
    best_by: dict[tuple[GpuType, int], Candidate] = {}
    for c in sorted(cands, key=lambda c: (c.cell.gpu_type, c.cell.stages, c.cell.gpus)):
        key = (c.cell.gpu_type, c.cell.stages)
        prev = best_by.get(key)
        if prev is not None and prev.throughput > c.throughput:
            c = Candidate(
                cell=c.cell,
                throughput=prev.throughput,
                plan=prev.plan,
                source=prev.source,
                nodes=c.nodes,
                cpus=prev.cpus,
                host_memory_mb=prev.host_memory_mb,
                gpu_memory_gb=prev.gpu_memory_gb,
            )
        best_by[key] = c
        out.append(c)
    return out


@lru_cache(maxsize=32768)
def _cached(key: _JobKey, shapes: tuple[TypeShape, ...], measured: tuple[tuple, ...]) -> tuple[Candidate, ...]:
    model = get_model(key.model).with_seq_len(key.seq_len)
    calib = calibrate(model, measured, get_stack(key.stack) if key.stack else None)
    cands: list[Candidate] = []
    for shape in shapes:
        if key.gpu_types and shape.gpu_type not in key.gpu_types:
            continue
        spec = _resolve_spec(shape)
        if spec is None:
            continue
        for n in gpu_counts(key.gpus, key.min_gpus, key.max_gpus, shape.total_gpus):
            # all stage counts at once, for the job's own framework
            search = search_plans(model, spec, n, key.global_batch, calib.constants, stack=key.stack)
            if not search.feasible_count:
                log.debug("%s on %s x%d: %s", model.name, shape.gpu_type, n, search.why_infeasible())
            for stages in stage_counts(model, n):
                cand = _cell_candidate(search, spec, Cell(shape.gpu_type, n, stages), calib)
                if cand is not None:
                    cands.append(cand)
    return tuple(_monotone(cands))


def count_range(hints: Hints) -> tuple[int, int, int]:
    """(requested, min, max) GPUs of a job. A job that gave neither ``min`` nor ``max`` did not say it is elastic:
    it keeps the count it asked for (a fixed-size program breaks on another count); with either, the other
    defaults to 1 (min) or twice the request (max), capped by ``workers``."""
    requested = hints.gpus if hints.gpus is not None else (hints.min_gpus or 1)
    if hints.min_gpus is None and hints.max_gpus is None:
        return requested, requested, requested
    low, high = hints.min_gpus or 1, hints.max_gpus or max(requested * 2, 1)
    if hints.workers:  # EasyScale: never more GPUs than logical workers
        high = min(high, hints.workers)
    return requested, low, high


def _job_key(hints: Hints) -> _JobKey:
    if hints.model is None:
        raise ValidationError("model", None, f"a model name, one of {list(list_models())}", "hints")
    model = get_model(hints.model)
    requested = hints.gpus if hints.gpus is not None else (hints.min_gpus or 1)
    for name, value in (
        ("gpus", requested),
        ("min_gpus", hints.min_gpus),
        ("max_gpus", hints.max_gpus),
        ("global_batch", hints.global_batch),
        ("seq_len", hints.seq_len),
    ):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValidationError(name, value, "a positive integer", "hints")
    _, low, high = count_range(hints)
    if low > high:
        raise ValidationError("min_gpus", low, f"at most max_gpus={high}", "hints")
    types = tuple(sorted(str(t).lower() for t in hints.gpu_types))
    return _JobKey(
        model.name,
        types,
        requested,
        low,
        high,
        hints.global_batch or model.default_global_batch,
        hints.seq_len or model.seq_len,
        get_stack(hints.stack).name if hints.stack is not None else None,
    )


def _stack_name(name: str | None) -> str | None:
    """A report's framework as a ``perf.stacks`` name; None when not said or unknown (a report is user bytes)."""
    try:
        return get_stack(name).name if name else None
    except ValidationError:
        return None


def _measurement_key(model: str, measurements: Sequence[Measurement]) -> tuple[tuple, ...]:
    """The hashable essentials of the model's most recent measurements (at most ``MAX_MEASUREMENTS``)."""
    rows = []
    for m in measurements:
        try:
            name = get_model(m.model).name
        except ValidationError:
            continue
        if name == model and m.samples_per_s > 0:
            rows.append((m.gpu_type, m.gpus, m.plan, float(m.samples_per_s), m.nodes, _stack_name(m.stack)))
    return tuple(sorted(rows[-MAX_MEASUREMENTS:], key=repr))


def job_candidates(
    hints: Hints,
    cluster: Cluster | Mapping[GpuType, int],
    measurements: Sequence[Measurement] | None = (),
) -> tuple[Candidate, ...]:
    """Every feasible Cell of a job on the cluster's GPU types, each with its best plan and samples/s.

    ``cluster`` is a ``Cluster`` (node shapes from its nodes) or a ``{gpu_type: total GPUs}`` mapping (node
    shapes from the catalog). ``hints.gpu_types``, when set, restricts the types. Infeasible Cells are omitted;
    an empty tuple means the job cannot run anywhere in this cluster. When more GPUs of a type would be predicted
    slower (e.g. DP crossing nodes at a small global batch), the larger Cell keeps the smaller one's plan, so
    ``plan.gpus`` may be below ``cell.gpus``. A hint model that is not in the model catalog but is a job type of
    Gavel's measured table gets TABLE candidates (steps/s, no plan); any other model, or none, is priced from its
    measurements or a default (``perf/unknown.py``). Raises ValidationError for bad sizes.
    """
    shapes = cluster_shapes(cluster)
    try:
        key = _job_key(hints)
    except ValidationError as exc:
        if exc.field != "model":
            raise
        table = _table_candidates(hints, shapes) if hints.model else None
        cands = table if table is not None else _unknown_candidates(hints, shapes, measurements or ())
    else:
        cands = _cached(key, shapes, _measurement_key(key.model, measurements or ()))
    if hints.max_nodes is not None:  # the job's own --nodes: never spread wider
        cands = tuple(c for c in cands if c.nodes <= hints.max_nodes)
    return cands


def _unknown_candidates(
    hints: Hints, shapes: tuple[TypeShape, ...], measurements: Sequence[Measurement]
) -> tuple[Candidate, ...]:
    """A model not in the catalog (or none named): measured throughput, else a default (``perf/unknown.py``)."""
    from slurmplan.perf.unknown import unknown_model_candidates

    requested, low, high = count_range(hints)
    if low > high:
        raise ValidationError("min_gpus", low, f"at most max_gpus={high}", "hints")
    specs = {s.gpu_type: spec for s in shapes if (spec := _resolve_spec(s)) is not None}
    return unknown_model_candidates(hints, shapes, specs, (requested, low, high), measurements)


def _table_candidates(hints: Hints, shapes: tuple[TypeShape, ...]) -> tuple[Candidate, ...] | None:
    """Opaque job types known only by measured throughputs (Gavel's table, steps/s): one Candidate per GPU type
    at the job's own GPU count, source TABLE. None when ``hints.model`` is not a table job type either."""
    from slurmplan.perf.gavel_table import load_gavel_table  # the simulator room's module, loaded on demand

    try:
        table = load_gavel_table()
    except ValidationError as exc:
        log.debug("no Gavel table: %s", exc)
        return None
    if hints.model not in table.job_types:
        return None
    scale = hints.gpus or 1
    by_type = {shape.gpu_type: shape for shape in shapes if shape.total_gpus >= scale}
    try:
        rows = table.candidates(str(hints.model), scale, tuple(by_type))
    except ValidationError:
        return ()
    return tuple(
        Candidate(
            c.cell,
            c.throughput,
            source=ThroughputSource.TABLE,
            nodes=math.ceil(scale / by_type[c.cell.gpu_type].gpus_per_node),
        )
        for c in rows
    )


def best_candidate(cands: Sequence[Candidate]) -> Candidate | None:
    """The fastest candidate (ties: fewer GPUs), e.g. for a quick look."""
    if not cands:
        return None
    return max(cands, key=lambda c: (c.throughput, -c.cell.gpus))


__all__ = [
    "TypeShape",
    "best_candidate",
    "cluster_shapes",
    "gpu_counts",
    "job_candidates",
    "plan_needs",
    "stage_counts",
]
