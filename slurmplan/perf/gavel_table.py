"""Gavel's measured throughput table: isolated steps/s per (job type, scale factor, GPU type).

Gavel's simulator and its traces express every job as a job type from this table plus a scale factor (the
number of GPUs it gangs, all of one type). Reproducing Gavel's results means using the table as-is, odd entries
included, so this module only loads and looks up; it derives nothing. Candidates built from it carry
``ThroughputSource.TABLE`` so ``slurmplan explain`` can say where a figure came from.

Two file shapes are accepted: Gavel's own ``simulation_throughputs.json`` (``{gpu: {key: {"null": v, ...}}}``,
co-location entries ignored) and the slim ``{gpu: {key: v}}`` copy shipped in ``slurmplan/sim/data``.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from slurmplan.domain import Candidate, Cell, GpuType, ThroughputSource, ValidationError

log = logging.getLogger(__name__)

DEFAULT_TABLE = Path(__file__).resolve().parent.parent / "sim" / "data" / "gavel_throughputs.json"
"""The isolated entries of Gavel's published table (MIT licence, see ``sim/data/README.md``)."""

DISTRIBUTED_MODELS = ("ResNet-18", "ResNet-50", "Transformer", "LM")
"""Job types Gavel's generator allows with a scale factor above 1."""


@dataclass(frozen=True)
class GavelTable:
    """Isolated throughputs, keyed ``(job_type, scale_factor) -> {gpu_type: steps/s}``."""

    entries: Mapping[tuple[str, int], Mapping[GpuType, float]]

    @property
    def job_types(self) -> tuple[str, ...]:
        """The job types with a single-GPU entry, sorted (Gavel draws uniformly over these)."""
        return tuple(sorted({t for t, s in self.entries if s == 1}))

    @property
    def gpu_types(self) -> tuple[GpuType, ...]:
        return tuple(sorted({g for row in self.entries.values() for g in row}))

    def distributed_types(self) -> tuple[str, ...]:
        """Job types Gavel allows at scale factors above 1 (its generator redraws until one of these)."""
        return tuple(t for t in self.job_types if t.split(" (")[0] in DISTRIBUTED_MODELS)

    def throughput(self, job_type: str, scale_factor: int, gpu_type: GpuType) -> float:
        """Steps/s of the whole job; 0.0 when the table has no entry (the job cannot run there)."""
        row = self.entries.get((job_type, scale_factor))
        if row is None:
            raise ValidationError(
                "job_type", f"{job_type} x{scale_factor}", f"a (job type, scale factor) in the table: {self.job_types}"
            )
        return float(row.get(gpu_type, 0.0))

    def candidates(
        self, job_type: str, scale_factor: int, gpu_types: Iterable[GpuType] | None = None
    ) -> tuple[Candidate, ...]:
        """One Candidate per GPU type the job can run on, at its own scale factor (Gavel jobs are not elastic)."""
        types = self.gpu_types if gpu_types is None else tuple(gpu_types)
        out = []
        for gpu in types:
            value = self.throughput(job_type, scale_factor, gpu)
            if value > 0:
                out.append(Candidate(Cell(gpu, scale_factor), value, source=ThroughputSource.TABLE))
        return tuple(out)


def parse_key(key: str) -> tuple[str, int]:
    """``"('ResNet-18 (batch size 64)', 1)"`` -> ``("ResNet-18 (batch size 64)", 1)``."""
    try:
        value = ast.literal_eval(key)
    except (ValueError, SyntaxError) as exc:
        raise ValidationError("job_key", key, "a Python tuple literal ('<job type>', <scale factor>)") from exc
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int)):
        raise ValidationError("job_key", key, "a tuple ('<job type>', <scale factor>)")
    return value[0], value[1]


def table_from_dict(data: Mapping[str, object], where: str = "table") -> GavelTable:
    """Build a table from either file shape; ``*_unconsolidated`` GPU types are skipped as Gavel's simulator does."""
    entries: dict[tuple[str, int], dict[GpuType, float]] = {}
    for gpu, rows in data.items():
        if gpu.endswith("_unconsolidated"):
            continue
        if not isinstance(rows, Mapping):
            raise ValidationError(gpu, type(rows).__name__, "a mapping of job keys to throughputs", where)
        for key, value in rows.items():
            isolated = value.get("null") if isinstance(value, Mapping) else value
            if not isinstance(isolated, int | float) or isolated < 0:
                raise ValidationError(f"{gpu}[{key}]", isolated, "a non-negative number (steps/s)", where)
            entries.setdefault(parse_key(key), {})[gpu.lower()] = float(isolated)
    if not entries:
        raise ValidationError("entries", 0, "at least one throughput", where)
    return GavelTable(entries)


@lru_cache(maxsize=8)
def load_gavel_table(path: str | Path | None = None) -> GavelTable:
    """Load (and cache) a table; ``None`` loads the copy shipped with slurmplan."""
    file = Path(path) if path is not None else DEFAULT_TABLE
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError("throughputs", str(file), f"a readable JSON throughput table ({exc})") from exc
    table = table_from_dict(data, where=str(file))
    log.debug("loaded %d table entries from %s", len(table.entries), file)
    return table
