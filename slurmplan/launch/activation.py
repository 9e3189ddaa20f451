"""Activation checkpointing applied to a user's model without changing its structure.

Each chosen submodule's ``forward`` is replaced, on the instance only, by one that runs under
``torch.utils.checkpoint``: activations inside it are recomputed in the backward pass instead of kept. The
module tree and so the ``state_dict`` keys stay the same, which keeps checkpoints loadable whether or not a
later plan turns checkpointing on. ``preserve_rng_state`` (the default) replays the same dropout masks in the
recomputation, so gradients are unchanged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from slurmplan.domain import ValidationError

log = logging.getLogger(__name__)

_MARK = "_slurmplan_checkpointed"


def _checkpointed_forward(original, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    if torch.is_grad_enabled():
        return checkpoint(original, *args, use_reentrant=False, **kwargs)
    return original(*args, **kwargs)


def apply_activation_checkpointing(model: nn.Module, names: Sequence[str] | None = None) -> list[str]:
    """Checkpoint the named submodules (default: every direct child that has parameters); returns their names.

    Applying it twice is harmless: modules already wrapped are skipped.
    """
    modules = dict(model.named_modules())
    if names is None:
        names = [n for n, child in model.named_children() if any(True for _ in child.parameters())]
    done = []
    for name in names:
        if name not in modules:
            raise ValidationError("checkpoint module", name, f"one of {sorted(k for k in modules if k)}", "launcher")
        module = modules[name]
        if getattr(module, _MARK, False):
            continue
        module.forward = functools.partial(_checkpointed_forward, module.forward)
        setattr(module, _MARK, True)
        done.append(name)
    log.info("activation checkpointing on %d modules", len(done))
    return done
