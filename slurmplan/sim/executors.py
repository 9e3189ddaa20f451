"""Where ``compare`` runs its simulations: here (``local``: worker processes) or elsewhere (``slurm``).

A registry, so that the simulator never imports Slurm code: the Slurm room's executor (``slurm/sweep.py``)
is registered by the command module the CLI loads, and ``compare --executor slurm`` finds it by name. Every
executor takes the same ``RunSpec``s and returns the same ``SimResult``s in input order: the table and the
plots are built the same way whatever ran them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from slurmplan.domain import ValidationError


@dataclass(frozen=True)
class ExecutorOptions:
    """What a remote executor may need; ``local`` reads only ``workers``."""

    workers: int | None = None
    partition: str | None = None
    folder: str | None = None
    """Where a remote executor keeps job scripts, logs and pickled results (on a shared file system)."""
    progress: bool = False
    timeout_min: int = 60
    """Each simulation job's time limit (a partition's MaxTime above it leaves the jobs pending for ever)."""


Executor = Callable[[Sequence[object], ExecutorOptions], list]
_LOADERS: dict[str, Callable[[], Executor]] = {}


def register_executor(name: str, loader: Callable[[], Executor]) -> None:
    """``loader()`` returns the executor; called only when a run asks for it (imports stay lazy)."""
    _LOADERS[name] = loader


def _local() -> Executor:
    from slurmplan.sim.runner import compare

    return lambda specs, options: compare(specs, workers=options.workers)


register_executor("local", _local)


def executor_names() -> tuple[str, ...]:
    return tuple(sorted(_LOADERS))


def get_executor(name: str, where: str = "compare") -> Executor:
    loader: Mapping[str, Callable[[], Executor]] = _LOADERS
    if name not in loader:
        raise ValidationError("--executor", name, f"one of {', '.join(executor_names())}", where)
    return loader[name]()
