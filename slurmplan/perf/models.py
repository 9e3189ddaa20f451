"""The model catalog: transformer architectures, their parameter counts and FLOPs per sample.

The scheduler never runs a model to learn its size: the Megatron formulas (Narayanan thesis ch. 4) give
parameters and training FLOPs from the architecture alone, which is what lets a job with no measurement get an
estimate on any GPU type. Architectures live in ``data/models.yaml``; a site adds its own with a YAML file named
by ``SLURMPLAN_MODEL_CATALOG``, and a user passes one with ``--model-file``.

Formulas (s = sequence length, h = hidden, l = layers, V = vocabulary):
  parameters            P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))
  forward FLOPs/sample  l (24 s h^2 + 4 s^2 h) + 2 s h V
  training FLOPs/sample 3x forward, plus one more forward of the layers with activation recomputation, which is
                        the thesis' 96 s l h^2 (1 + s/(6h) + V/(16 l h)).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import yaml

from slurmplan.domain import ValidationError

log = logging.getLogger(__name__)

DEFAULT_MODELS = Path(__file__).resolve().parent / "data" / "models.yaml"
ENV_MODELS = "SLURMPLAN_MODEL_CATALOG"
_INT_FIELDS = ("layers", "hidden", "heads", "seq_len", "vocab", "default_global_batch")


@dataclass(frozen=True)
class ModelSpec:
    """A transformer by its architecture; everything else is derived."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    default_global_batch: int = 256
    source: str = ""
    aliases: tuple[str, ...] = ()

    def with_seq_len(self, seq_len: int | None) -> ModelSpec:
        """The same model trained at another sequence length (hints may set it)."""
        if seq_len is None or seq_len == self.seq_len:
            return self
        if not isinstance(seq_len, int) or seq_len < 1:
            raise ValidationError("seq_len", seq_len, "a positive integer", f"model {self.name}")
        return replace(self, seq_len=seq_len)

    @property
    def parameters(self) -> float:
        """Megatron's parameter count (weights of all layers, embeddings and position embeddings)."""
        n, h, v, s = self.layers, self.hidden, self.vocab, self.seq_len
        return 12.0 * n * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * n * h))

    @property
    def layer_parameters(self) -> float:
        """Parameters of one transformer layer (attention + MLP + layer norms)."""
        return 12.0 * self.hidden**2 + 13.0 * self.hidden

    @property
    def forward_flops_per_sample(self) -> float:
        """Forward FLOPs for one sample (one sequence), layers plus the logit layer."""
        s, h, v = self.seq_len, self.hidden, self.vocab
        return self.layers * (24.0 * s * h * h + 4.0 * s * s * h) + 2.0 * s * h * v

    def training_flops_per_sample(self, checkpointing: bool = True) -> float:
        """FLOPs of forward + backward for one sample; recomputation adds one forward of the layers."""
        s, h = self.seq_len, self.hidden
        layers_fwd = self.layers * (24.0 * s * h * h + 4.0 * s * s * h)
        logits_fwd = 2.0 * s * h * self.vocab
        return (4.0 if checkpointing else 3.0) * layers_fwd + 3.0 * logits_fwd


def _normalise(name: str) -> str:
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())


def model_from_mapping(name: str, raw: Mapping[str, object], where: str = "model") -> ModelSpec:
    """Validate one YAML entry into a ModelSpec (clear error per bad field)."""
    if not isinstance(raw, Mapping):
        raise ValidationError(name, raw, "a mapping with layers, hidden, heads, seq_len, vocab", where)
    allowed = set(_INT_FIELDS) | {"source", "aliases", "name"}
    for key in raw:
        if key not in allowed:
            raise ValidationError("field", key, f"one of {sorted(allowed)}", f"{where}: model {name}")
    values: dict[str, object] = {}
    for key in _INT_FIELDS:
        if key not in raw:
            if key == "default_global_batch":
                continue
            raise ValidationError(key, None, "a positive integer (required)", f"{where}: model {name}")
        value = raw[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValidationError(key, value, "a positive integer", f"{where}: model {name}")
        values[key] = value
    if values["hidden"] % values["heads"]:  # type: ignore[operator]
        raise ValidationError("heads", values["heads"], f"a divisor of hidden={values['hidden']}", f"model {name}")
    aliases = tuple(_normalise(a) for a in (raw.get("aliases") or ()))  # type: ignore[union-attr]
    return ModelSpec(name=_normalise(name), source=str(raw.get("source", "")), aliases=aliases, **values)  # type: ignore[arg-type]


def load_model_file(path: str | Path) -> ModelSpec:
    """One user model from YAML: either the fields at top level (with ``name``) or ``{name: {fields}}``."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ValidationError("model_file", str(path), f"a readable YAML file ({exc.strerror})") from None
    if isinstance(data, dict) and "layers" in data:
        return model_from_mapping(str(data.get("name", Path(path).stem)), data, str(path))
    if isinstance(data, dict) and len(data) == 1:
        ((name, body),) = data.items()
        return model_from_mapping(str(name), body, str(path))
    raise ValidationError("model_file", str(path), "one model: {name, layers, hidden, heads, seq_len, vocab}")


def _load_all(paths: tuple[str, ...]) -> dict[str, ModelSpec]:
    models: dict[str, ModelSpec] = {}
    for path in paths:
        data = yaml.safe_load(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValidationError("model_catalog", path, "a YAML mapping of name -> fields")
        for name, body in data.items():
            spec = model_from_mapping(str(name), body, path)
            models[spec.name] = spec
    return models


@lru_cache(maxsize=4)
def model_catalog(site: str | None) -> tuple[dict[str, ModelSpec], dict[str, str]]:
    paths = (str(DEFAULT_MODELS),) + ((site,) if site else ())
    models = _load_all(paths)
    aliases = {alias: spec.name for spec in models.values() for alias in spec.aliases}
    return models, aliases


def get_model(name: str) -> ModelSpec:
    """The catalog model called ``name`` (case, spaces and aliases tolerated); ValidationError otherwise."""
    models, aliases = model_catalog(os.environ.get(ENV_MODELS) or None)
    key = _normalise(name)
    key = aliases.get(key, key)
    if key not in models:
        raise ValidationError("model", name, f"one of {sorted(models)}")
    return models[key]


def list_models() -> tuple[str, ...]:
    models, _ = model_catalog(os.environ.get(ENV_MODELS) or None)
    return tuple(sorted(models))
