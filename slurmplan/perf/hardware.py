"""The GPU hardware catalog: what each GPU type can compute, hold and move.

The performance model needs per-type peak FLOP/s, memory and link bandwidths to give a job with no measurement
a sensible estimate. The numbers live in ``data/gpus.yaml`` (each entry cites its datasheet); a site YAML of the
same shape, named by ``SLURMPLAN_GPU_CATALOG`` or passed to :func:`load_catalog`, overrides or adds entries
field by field, because real clusters differ from datasheet servers (network, CPUs per node).

Names follow Slurm GRES type names in lower case: ``v100`` (16 GB), ``v100-32g``, ``a100`` (40 GB),
``a100-80g``, ``h100``... Aliases (``a100-40g``, ``v100s``) resolve to the same entry.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

import yaml

from slurmplan.domain import GpuType, ValidationError

log = logging.getLogger(__name__)

DEFAULT_CATALOG = Path(__file__).resolve().parent / "data" / "gpus.yaml"
ENV_CATALOG = "SLURMPLAN_GPU_CATALOG"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type. Bandwidths are GB/s per GPU per direction; FLOP/s are dense peaks."""

    name: GpuType
    memory_gb: float
    fp16_tflops: float
    fp32_tflops: float
    mem_bandwidth_gbps: float
    nvlink_gbps: float
    pcie_gbps: float
    inter_node_gbps: float
    gpus_per_node: int
    cpus_per_node: int
    host_memory_gb: float
    mfu: float
    source: str
    aliases: tuple[str, ...] = ()
    bf16: bool = False
    """Native bfloat16 arithmetic (Ampere and later): what a job script may train in."""
    sms: int = 0
    """Streaming multiprocessors (SMX on Kepler) per GPU: how many GEMM tiles run at once (``perf.compute``
    counts the waves a GEMM needs); 0 = unknown, no wave quantization."""

    @property
    def intra_node_gbps(self) -> float:
        """Bandwidth between two GPUs of one node: NVLink when present, otherwise PCIe."""
        return self.nvlink_gbps if self.nvlink_gbps > 0 else self.pcie_gbps

    @property
    def effective_flops(self) -> float:
        """FLOP/s a large transformer GEMM reaches (peak times the catalog's MFU)."""
        return self.fp16_tflops * 1e12 * self.mfu


_NUMERIC = {
    "memory_gb": float,
    "fp16_tflops": float,
    "fp32_tflops": float,
    "mem_bandwidth_gbps": float,
    "nvlink_gbps": float,
    "pcie_gbps": float,
    "inter_node_gbps": float,
    "gpus_per_node": int,
    "cpus_per_node": int,
    "host_memory_gb": float,
    "mfu": float,
}


def _spec_from_mapping(name: str, raw: Mapping[str, object], where: str) -> GpuSpec:
    if not isinstance(raw, Mapping):
        raise ValidationError(name, raw, "a mapping of GPU fields", where)
    known = {f.name for f in fields(GpuSpec)} - {"name"}
    unknown = set(raw) - known
    if unknown:
        raise ValidationError("field", sorted(unknown)[0], f"one of {sorted(known)}", f"{where}: gpu {name}")
    values: dict[str, object] = {"name": name.lower()}
    for key, kind in _NUMERIC.items():
        if key not in raw:
            raise ValidationError(key, None, "a number (required)", f"{where}: gpu {name}")
        try:
            value = kind(raw[key])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValidationError(key, raw[key], "a number", f"{where}: gpu {name}") from None
        if value < 0 or (key in ("memory_gb", "fp16_tflops", "gpus_per_node", "mfu") and value <= 0):
            raise ValidationError(key, raw[key], "a positive number", f"{where}: gpu {name}")
        values[key] = value
    if not 0 < float(values["mfu"]) <= 1:  # type: ignore[arg-type]
        raise ValidationError("mfu", raw["mfu"], "a fraction in (0, 1]", f"{where}: gpu {name}")
    if float(values["pcie_gbps"]) <= 0 and float(values["nvlink_gbps"]) <= 0:  # type: ignore[arg-type]
        raise ValidationError("pcie_gbps", raw["pcie_gbps"], "positive (GPUs need some link)", f"{where}: gpu {name}")
    if not isinstance(raw.get("bf16", False), bool):
        raise ValidationError("bf16", raw["bf16"], "true or false", f"{where}: gpu {name}")
    values["bf16"] = raw.get("bf16", False)
    sms = raw.get("sms", 0)
    if not isinstance(sms, int) or isinstance(sms, bool) or sms < 0:
        raise ValidationError("sms", sms, "a non-negative integer (streaming multiprocessors)", f"{where}: gpu {name}")
    values["sms"] = sms
    values["source"] = str(raw.get("source", ""))
    values["aliases"] = tuple(str(a).lower() for a in (raw.get("aliases") or ()))  # type: ignore[union-attr]
    return GpuSpec(**values)  # type: ignore[arg-type]


def _read_yaml(path: Path) -> dict[str, Mapping[str, object]]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ValidationError("catalog", str(path), f"a readable YAML file ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ValidationError("catalog", str(path), "a YAML mapping of gpu name -> fields")
    return data


@dataclass(frozen=True)
class GpuCatalog:
    """All known GPU types, with alias resolution."""

    specs: Mapping[GpuType, GpuSpec]
    aliases: Mapping[str, GpuType]

    def get(self, name: str) -> GpuSpec:
        key = str(name).lower()
        key = self.aliases.get(key, key)
        if key not in self.specs:
            raise ValidationError("gpu_type", name, f"one of {sorted(self.specs)}")
        return self.specs[key]

    def resolve(self, name: str) -> GpuType | None:
        """The catalog name for ``name`` (through aliases), or None if unknown."""
        key = str(name).lower()
        key = self.aliases.get(key, key)
        return key if key in self.specs else None

    def names(self) -> tuple[GpuType, ...]:
        return tuple(sorted(self.specs))


def load_catalog(override: str | Path | None = None) -> GpuCatalog:
    """The built-in catalog merged with a site override (field by field; new names are added)."""
    raw = dict(_read_yaml(DEFAULT_CATALOG))
    if override is not None:
        site = _read_yaml(Path(override))
        for name, entry in site.items():
            key = str(name).lower()
            if not isinstance(entry, Mapping):
                raise ValidationError(str(name), entry, "a mapping of GPU fields", str(override))
            raw[key] = {**raw.get(key, {}), **entry}
            log.info("gpu catalog: %s overridden by %s", key, override)
    specs: dict[GpuType, GpuSpec] = {}
    aliases: dict[str, GpuType] = {}
    for name, entry in raw.items():
        spec = _spec_from_mapping(str(name), entry, str(override or DEFAULT_CATALOG))
        specs[spec.name] = spec
        for alias in spec.aliases:
            aliases[alias] = spec.name
    return GpuCatalog(specs=specs, aliases=aliases)


@lru_cache(maxsize=4)
def _catalog_for(path: str | None) -> GpuCatalog:
    return load_catalog(path)


def default_catalog() -> GpuCatalog:
    """The catalog in use: built-in, plus the site file named by ``SLURMPLAN_GPU_CATALOG`` if set."""
    return _catalog_for(os.environ.get(ENV_CATALOG) or None)


def get_gpu(name: str) -> GpuSpec:
    """The spec of a GPU type (aliases accepted); ValidationError listing the known names otherwise."""
    return default_catalog().get(name)


def gpu_type_of_device(device_name: str) -> GpuType | None:
    """The catalog's name for the GPU PyTorch names (``NVIDIA H100 80GB HBM3`` -> h100, ``NVIDIA A100-SXM4-80GB``
    -> a100-80g, ``Tesla V100-SXM2-16GB`` -> v100), through the aliases; None for a GPU the catalog does not know.

    A job the daemon gave no plan reports its GPU by this name; the fit ignores a type it cannot resolve, so the
    raw device name would make the job's measurements useless. A memory size in the name picks the catalog's
    variant of that size where there is one (``a100-80g``), else the base type.
    """
    catalog = default_catalog()
    tokens = re.split(r"[\s_-]+", str(device_name).lower())
    memory = next((m.group(1) for t in tokens if (m := re.fullmatch(r"(\d+)gb", t))), None)
    for token in tokens:
        base = catalog.resolve(token)
        if base is not None:
            variant = catalog.resolve(f"{token}-{memory}g") if memory else None
            return variant or base
    return None


def list_gpus() -> tuple[GpuType, ...]:
    return default_catalog().names()


def with_node_shape(
    spec: GpuSpec, gpus_per_node: int | None, cpus_per_node: int | None = None, host_memory_gb: float | None = None
) -> GpuSpec:
    """The spec adjusted to a real cluster's node shape (the catalog's node is only typical)."""
    changes: dict[str, object] = {}
    if gpus_per_node:
        changes["gpus_per_node"] = int(gpus_per_node)
    if cpus_per_node:
        changes["cpus_per_node"] = int(cpus_per_node)
    if host_memory_gb:
        changes["host_memory_gb"] = float(host_memory_gb)
    return replace(spec, **changes) if changes else spec  # type: ignore[arg-type]
