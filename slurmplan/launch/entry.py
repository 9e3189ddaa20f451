"""Ways into the launcher from outside Python code: a target string, submitit, ``python -m slurmplan.launch``.

A *target* names a function that builds the ``TrainSpec`` from a list of command-line arguments:
``path/to/train.py:make_spec`` or ``package.module:make_spec`` (``make_spec`` is the default name).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import submitit

from slurmplan.domain import ValidationError
from slurmplan.launch.spec import TrainResult, TrainSpec
from slurmplan.launch.trainer import run

log = logging.getLogger(__name__)

SpecFactory = Callable[[list[str]], TrainSpec]


def load_target(target: str) -> SpecFactory:
    """``file.py[:func]`` or ``module[:func]`` -> the spec factory it names."""
    where, _, name = target.partition(":")
    name = name or "make_spec"
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ValidationError("target", target, "an existing .py file, optionally :function", "launcher")
        module_name = f"_slurmplan_target_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ValidationError("target", target, f"an importable module ({exc})", "launcher") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValidationError("target", target, f"a module defining a callable {name}(argv) -> TrainSpec", "launcher")
    return factory


def ensure_logging(level: int = logging.INFO) -> None:
    """Send the launcher's progress to stderr (the job's log) unless the program configured logging itself."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def run_target(target: str, argv: Sequence[str] = (), log_level: int = logging.INFO) -> TrainResult:
    """Build the spec from ``target`` and train it in this process."""
    ensure_logging(log_level)
    return run(load_target(target)(list(argv)))


class ElasticTraining(submitit.helpers.Checkpointable):
    """A submitit ``Checkpointable`` that trains a target with the launcher.

    ``executor.submit(ElasticTraining("train.py:make_spec", ["--steps", "100"]))``. On submitit's preemption
    signal the launcher's own handler (installed inside ``run``) lets the step finish, all ranks stop together,
    rank 0 saves, and then submitit's handler runs: it calls :meth:`checkpoint` and requeues. The training state
    is already on disk by then, so resubmitting ``self`` unchanged resumes it.
    """

    def __init__(self, target: str, argv: Sequence[str] = ()) -> None:
        self.target = target
        self.argv = list(argv)

    def __call__(self) -> TrainResult:
        return run_target(self.target, self.argv)

    def checkpoint(self, *args: object, **kwargs: object) -> submitit.helpers.DelayedSubmission:
        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)
