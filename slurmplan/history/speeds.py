"""How fast each GPU type runs a job whose model is unknown, relative to a V100 (= 1.0).

A job from a site's history without a model hint ran on one GPU type for a measured time; the simulator needs
its time on the other types. It gets ``time x speed[ran on] / speed[other]``: one number per type, the same
for every such job (nothing else is known about it).

Default table (``default_speeds``), from the measured data shipped with slurmplan:
- measured: K80, P100, V100 from Gavel's throughput table (``perf/gavel_table``: 26 job types measured on
  all three): the geometric mean over its single-GPU job types of throughput(type) / throughput(V100);
- catalog: every other type of the GPU catalog (``perf/data/gpus.yaml``), whose speed no shipped measurement
  covers: its fp16 peak x MFU (the fraction of peak large GEMMs reach) relative to the V100's. Not scaled to
  the measured types: those lack tensor cores (K80, P100), so the V100's lead over them says nothing about an
  A100's over a V100.

A site overrides any entry with ``--speeds FILE`` (YAML or JSON ``{type: speed}``); types it leaves out keep
the default. ``slurmplan trace import`` prints the table it used, with each row's source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import ValidationError

REFERENCE = "v100"


@dataclass(frozen=True)
class SpeedTable:
    """Relative speed per GPU type (V100 = 1.0) and where each number came from."""

    speeds: Mapping[str, float]
    sources: Mapping[str, str]

    def speed(self, gpu_type: str) -> float:
        return self.speeds.get(gpu_type.lower(), 0.0)

    def rows(self) -> list[tuple[str, float, str]]:
        return [(t, self.speeds[t], self.sources[t]) for t in sorted(self.speeds, key=lambda t: -self.speeds[t])]


def _measured() -> tuple[dict[str, float], int]:
    from slurmplan.perf.gavel_table import load_gavel_table

    table = load_gavel_table()
    out: dict[str, float] = {}
    for gpu in table.gpu_types:
        logs = []
        for job_type in table.job_types:
            ref, val = table.throughput(job_type, 1, REFERENCE), table.throughput(job_type, 1, gpu)
            if ref > 0 and val > 0:
                logs.append(math.log(val / ref))
        if logs:
            out[gpu] = math.exp(sum(logs) / len(logs))
    return out, len(table.job_types)


def _estimated() -> dict[str, float]:
    from slurmplan.perf.hardware import default_catalog

    catalog = default_catalog()
    ref = catalog.get(REFERENCE)
    base = ref.fp16_tflops * ref.mfu
    return {name: catalog.get(name).fp16_tflops * catalog.get(name).mfu / base for name in catalog.names()}


def default_speeds() -> SpeedTable:
    """Measured types from Gavel's table, the rest from the GPU catalog (see the module docstring)."""
    (measured, kinds), speeds = _measured(), _estimated()
    sources = {t: "catalog (fp16 peak x MFU relative to v100)" for t in speeds}
    speeds.update(measured)
    sources.update({t: f"measured (Gavel's table, geometric mean over {kinds} job types)" for t in measured})
    return SpeedTable(speeds, sources)


def load_speeds(path: str | Path | None = None) -> SpeedTable:
    """The default table, with a site's file laid over it; a bad entry is an error naming it."""
    table = default_speeds()
    if path is None:
        return table
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ValidationError("--speeds", str(file), f"a readable file ({exc.strerror})", "trace import") from None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationError("--speeds", str(file), f"YAML or JSON ({exc})", "trace import") from None
    if not isinstance(data, Mapping):
        raise ValidationError("--speeds", str(file), "a mapping of GPU type to relative speed", "trace import")
    speeds, sources = dict(table.speeds), dict(table.sources)
    for key, value in data.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        if not isinstance(key, str) or not ok:
            raise ValidationError(f"--speeds {key}", value, "a number > 0 (speed relative to a V100)", str(file))
        speeds[key.lower()] = float(value)
        sources[key.lower()] = f"site ({file.name})"
    return SpeedTable(speeds, sources)
