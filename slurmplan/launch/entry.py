"""Ways into the launcher from outside Python code: a target string, submitit, ``python -m slurmplan.launch``.

A *target* names a function that builds the ``TrainSpec`` from a list of command-line arguments:
``path/to/train.py:make_spec`` or ``package.module:make_spec`` (``make_spec`` is the default name).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import submitit

from slurmplan.domain import SlurmplanError, ValidationError
from slurmplan.launch.spec import EXIT_ERROR, TrainResult, TrainSpec
from slurmplan.launch.trainer import ReportedByAnotherRank, run

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


WORKER_REPORTED = 3
"""Exit status of a ``--nproc`` worker that stopped on an error it (or rank 0) already printed in one line."""


def run_worker(target: str, argv: Sequence[str], log_level: int, errors_dir: str | None = None) -> None:
    """One worker of ``python -m slurmplan.launch --nproc N``: exits with the outcome's status (``Outcome``).

    A slurmplan error exits with :data:`WORKER_REPORTED` and no traceback; its message goes to ``errors_dir``
    (one file per rank) for the parent, which prints each distinct message once (every rank usually hits the same
    error), or to stderr without one. A rank stopped because rank 0 found an error says nothing.
    """
    try:
        result = run_target(target, argv, log_level)
    except ReportedByAnotherRank:
        sys.exit(WORKER_REPORTED)
    except SlurmplanError as exc:
        if errors_dir:
            Path(errors_dir, f"rank-{os.environ.get('RANK', '0')}").write_text(str(exc))
        else:
            print(f"slurmplan.launch: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(WORKER_REPORTED)
    sys.exit(result.outcome.exit_code)


def worker_errors(errors_dir: str) -> list[str]:
    """The distinct error messages the workers left in ``errors_dir``, in rank order."""
    files = sorted(Path(errors_dir).glob("rank-*"), key=lambda p: int(p.name.split("-")[1]))
    out: list[str] = []
    for f in files:
        text = f.read_text()
        if text not in out:
            out.append(text)
    return out


def parent_status(codes: Sequence[int]) -> tuple[int, str | None]:
    """The ``--nproc`` parent's exit status from its workers' statuses, and a line to print (or None)."""
    if all(c == 0 for c in codes):
        return 0, None
    if all(c in (0, 75) for c in codes):
        return 75, None
    if all(c in (0, 75, WORKER_REPORTED) for c in codes):
        return EXIT_ERROR, None  # the error is already on stderr, in one line
    failed = [
        f"rank {r} {'killed by ' + _signal_name(-c) if c < 0 else f'exited with status {c}'}"
        for r, c in enumerate(codes)
        if c not in (0, 75, WORKER_REPORTED)
    ]
    return EXIT_ERROR, "worker " + ", ".join(failed) + " (its own output above says why)"


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


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
