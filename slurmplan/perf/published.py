"""The published measurements the performance model is held against, with their provenance.

``data/published.yaml`` lists every throughput table and stated figure of the seed papers (Megatron PTD-P,
PipeDream, PipeDream-2BW, Gavel, Rubick, Crius, EasyScale); see its header for the row format. Each row keeps its
paper, table or figure, hardware, stack, plan, batch, the measured figure and unit, and the assumptions made where
the paper leaves a plan detail out. Figures the model cannot express (CNN speedups, schedules outside the plan
space, overheads of a system's own mechanism) are kept with ``fit: false`` and the reason, so the record is
complete and the benchmark can say what it leaves out.

``load_published()`` validates every row (bad rows raise ValidationError naming the row and the field) and builds
the ``Plan``, ``ModelSpec`` and ``GpuSpec`` the model needs; ``predicted_value`` turns a prediction into the row's
unit (TFLOP/s per GPU with the paper's FLOP formula, or a ratio of two runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.hardware import GpuSpec, default_catalog
from slurmplan.perf.models import ModelSpec, get_model, model_from_mapping
from slurmplan.perf.stacks import Stack, get_stack

DEFAULT_DATASET = Path(__file__).resolve().parent / "data" / "published.yaml"
UNITS = ("tflops_per_gpu", "ratio")
_TABLE_KEYS = {"paper", "source", "hardware", "hardware_note", "stack", "precision", "unit", "flops_recompute"}
_TABLE_KEYS |= {"plan", "assumptions", "rows", "fit", "why", "model", "cpus_per_gpu"}
_ROW_KEYS = (_TABLE_KEYS - {"rows", "hardware_note"}) | {"id", "gpus", "batch", "value", "baseline"}
_PLAN_KEYS = {"tp": "tp", "pp": "pp", "mb": "micro_batch", "v": "virtual_stages", "gc": "checkpointing"}
_PLAN_KEYS |= {"zero": "zero_stage", "offload": "offload"}
_HARDWARE_KEYS = {"gpu", "gpus_per_node", "inter_node_gbps"}
_BASELINE_KEYS = set(_PLAN_KEYS) | {"stack", "gpu", "cpus_per_gpu", "batch"}


@dataclass(frozen=True)
class Run:
    """One measured configuration: what the model predicts samples/s for (its global batch is the plan's)."""

    gpu: GpuSpec
    plan: Plan
    stack: Stack
    cpus_per_gpu: float | None = None


@dataclass(frozen=True)
class PublishedRow:
    """One published figure with its provenance; ``baseline`` is set for ratio rows."""

    id: str
    table: str
    paper: str
    source: str
    model: ModelSpec
    gpus: int
    global_batch: int
    run: Run
    unit: str
    value: float
    fit: bool = True
    why: str = ""
    baseline: Run | None = None
    flops_recompute: bool = True
    assumptions: tuple[str, ...] = ()

    @property
    def hardware(self) -> str:
        return self.run.gpu.name


def _positive_int(raw: Mapping, key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValidationError(key, value, "a positive integer", where)
    return value


def _model(raw: object, where: str) -> ModelSpec:
    if isinstance(raw, str):
        try:
            return get_model(raw)
        except ValidationError as exc:
            raise ValidationError("model", raw, exc.allowed, where) from None
    if isinstance(raw, Mapping):
        return model_from_mapping("inline", raw, where)
    raise ValidationError("model", raw, "a catalog model name or {layers, hidden, heads, seq_len, vocab}", where)


def _gpu(hardware: object, where: str) -> GpuSpec:
    if not isinstance(hardware, Mapping) or "gpu" not in hardware:
        raise ValidationError("hardware", hardware, "a mapping with gpu (and gpus_per_node, inter_node_gbps)", where)
    unknown = set(hardware) - _HARDWARE_KEYS
    if unknown:
        raise ValidationError("hardware field", sorted(unknown)[0], f"one of {sorted(_HARDWARE_KEYS)}", where)
    try:
        spec = default_catalog().get(str(hardware["gpu"]))
    except ValidationError as exc:
        raise ValidationError("hardware.gpu", hardware["gpu"], exc.allowed, where) from None
    changes: dict[str, object] = {}
    if "gpus_per_node" in hardware:
        changes["gpus_per_node"] = _positive_int(hardware, "gpus_per_node", where)
    if "inter_node_gbps" in hardware:
        bw = hardware["inter_node_gbps"]
        if not isinstance(bw, int | float) or isinstance(bw, bool) or bw <= 0:
            raise ValidationError("hardware.inter_node_gbps", bw, "a positive number (GB/s per GPU)", where)
        changes["inter_node_gbps"] = float(bw)
    return replace(spec, **changes) if changes else spec  # type: ignore[arg-type]


def _plan(fields: Mapping, gpus: int, batch: int, where: str) -> Plan:
    unknown = set(fields) - set(_PLAN_KEYS)
    if unknown:
        raise ValidationError("plan field", sorted(unknown)[0], f"one of {sorted(_PLAN_KEYS)}", where)
    values = {_PLAN_KEYS[k]: v for k, v in fields.items()}
    tp, pp, mb = values.get("tp", 1), values.get("pp", 1), values.get("micro_batch", 1)
    for name, value in (("tp", tp), ("pp", pp), ("mb", mb)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValidationError(f"plan.{name}", value, "a positive integer", where)
    if gpus % (tp * pp):
        raise ValidationError("plan", f"tp{tp} pp{pp}", f"tp*pp dividing gpus={gpus}", where)
    dp = gpus // (tp * pp)
    if batch % (dp * mb):
        raise ValidationError("batch", batch, f"a multiple of dp*mb = {dp * mb}", where)
    for flag in ("checkpointing", "offload"):
        if not isinstance(values.get(flag, False), bool):
            raise ValidationError(f"plan.{flag}", values[flag], "true or false", where)
    try:
        return Plan(dp=dp, grad_accum=batch // (dp * mb), **values)
    except ValidationError as exc:
        raise ValidationError(f"plan.{exc.field}", exc.value, exc.allowed, where) from None


def _row(table: str, defaults: Mapping, raw: Mapping, where: str) -> PublishedRow:
    unknown = set(raw) - _ROW_KEYS
    if unknown:
        raise ValidationError("field", sorted(unknown)[0], f"one of {sorted(_ROW_KEYS)}", where)
    merged = {**defaults, **raw}
    merged["plan"] = {**(defaults.get("plan") or {}), **(raw.get("plan") or {})}
    merged["hardware"] = {**(defaults.get("hardware") or {}), **(raw.get("hardware") or {})}
    assumptions = tuple(str(a) for a in (defaults.get("assumptions") or ())) + tuple(
        str(a) for a in (raw.get("assumptions") or ())
    )
    for key in ("id", "paper", "source", "value", "unit", "model"):
        if key not in merged:
            raise ValidationError(key, None, "present", where)
    unit = merged["unit"]
    if unit not in UNITS:
        raise ValidationError("unit", unit, f"one of {list(UNITS)}", where)
    value = merged["value"]
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ValidationError("value", value, "a positive number", where)
    fit = merged.get("fit", True)
    if not isinstance(fit, bool):
        raise ValidationError("fit", fit, "true or false", where)
    if not fit and not merged.get("why"):
        raise ValidationError("why", None, "the reason a row is not fitted (required with fit: false)", where)
    gpus, batch = _positive_int(merged, "gpus", where), _positive_int(merged, "batch", where)
    model = _model(merged["model"], where)
    try:
        stack = get_stack(str(merged.get("stack", "megatron")), merged.get("precision"))
    except ValidationError as exc:
        raise ValidationError(exc.field, exc.value, exc.allowed, where) from None
    cpus = merged.get("cpus_per_gpu")
    run = Run(_gpu(merged["hardware"], where), _plan(merged["plan"], gpus, batch, where), stack, cpus)
    baseline = _baseline(merged.get("baseline"), run, merged, gpus, batch, where)
    if fit and unit == "ratio" and baseline is None:
        raise ValidationError("baseline", None, "what the ratio compares with (required with unit: ratio)", where)
    return PublishedRow(
        id=str(merged["id"]),
        table=table,
        paper=str(merged["paper"]),
        source=str(merged["source"]),
        model=model,
        gpus=gpus,
        global_batch=batch,
        run=run,
        unit=unit,
        value=float(value),
        fit=fit,
        why=str(merged.get("why", "")),
        baseline=baseline,
        flops_recompute=bool(merged.get("flops_recompute", True)),
        assumptions=assumptions,
    )


def _baseline(raw: object, run: Run, merged: Mapping, gpus: int, batch: int, where: str) -> Run | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValidationError("baseline", raw, f"a mapping of {sorted(_BASELINE_KEYS)}", where)
    unknown = set(raw) - _BASELINE_KEYS
    if unknown:
        raise ValidationError("baseline field", sorted(unknown)[0], f"one of {sorted(_BASELINE_KEYS)}", where)
    plan_fields = {k: v for k, v in raw.items() if k in _PLAN_KEYS}
    if "batch" in raw:
        batch = _positive_int(raw, "batch", f"{where} baseline")
    changed = plan_fields or "batch" in raw
    plan = _plan({**merged["plan"], **plan_fields}, gpus, batch, where) if changed else run.plan
    gpu = _gpu({**merged["hardware"], "gpu": raw["gpu"]}, where) if "gpu" in raw else run.gpu
    stack = get_stack(str(raw["stack"]), run.stack.precision) if "stack" in raw else run.stack
    return Run(gpu, plan, stack, raw.get("cpus_per_gpu", run.cpus_per_gpu))


def load_published(path: str | Path | None = None) -> tuple[PublishedRow, ...]:
    """Every row of the dataset (fitted or not), validated."""
    where = str(path or DEFAULT_DATASET)
    try:
        data = yaml.safe_load(Path(where).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError("dataset", where, f"a readable YAML file ({exc})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("tables"), Mapping):
        raise ValidationError("tables", None, "a mapping of table name -> {paper, source, ..., rows}", where)
    rows: list[PublishedRow] = []
    seen: set[str] = set()
    for table, body in data["tables"].items():
        here = f"{where}: table {table}"
        if not isinstance(body, Mapping) or not isinstance(body.get("rows"), list) or not body["rows"]:
            raise ValidationError("rows", None, "a non-empty list of rows", here)
        unknown = set(body) - _TABLE_KEYS
        if unknown:
            raise ValidationError("field", sorted(unknown)[0], f"one of {sorted(_TABLE_KEYS)}", here)
        defaults = {k: v for k, v in body.items() if k not in ("rows", "hardware_note")}
        for i, raw in enumerate(body["rows"]):
            if not isinstance(raw, Mapping):
                raise ValidationError("row", raw, "a mapping", f"{here} row {i}")
            row = _row(str(table), defaults, raw, f"{here} row {raw.get('id', i)}")
            if row.id in seen:
                raise ValidationError("id", row.id, "unique across the dataset", here)
            seen.add(row.id)
            rows.append(row)
    return tuple(rows)


def fitted_rows(rows: tuple[PublishedRow, ...]) -> tuple[PublishedRow, ...]:
    return tuple(r for r in rows if r.fit)


def predicted_value(row: PublishedRow, samples_per_s: float, baseline_samples_per_s: float | None = None) -> float:
    """The model's figure in the row's unit, from its predicted samples/s (and the baseline's, for ratios)."""
    if row.unit == "ratio":
        if not baseline_samples_per_s:
            raise ValidationError("baseline", baseline_samples_per_s, "a positive predicted throughput", row.id)
        return samples_per_s / baseline_samples_per_s
    flops = row.model.training_flops_per_sample(checkpointing=row.flops_recompute)
    return samples_per_s * flops / row.gpus / 1e12
