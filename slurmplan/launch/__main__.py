"""``python -m slurmplan.launch [--nproc N] TARGET [-- ARGS...]``: run a training target with the launcher.

Under ``srun`` (one task per GPU) or torchrun, leave ``--nproc`` at 1: each task is one process of the job.
``--nproc N`` starts N local processes itself, for a single-node job launched without srun.
"""

from __future__ import annotations

import argparse
import logging
import sys

from slurmplan.domain import SlurmplanError
from slurmplan.launch.entry import run_target
from slurmplan.launch.local import WorkerFailed, run_local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmplan.launch", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="file.py[:make_spec] or module[:make_spec], a function argv -> TrainSpec")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the target (after --)")
    parser.add_argument("--nproc", type=int, default=1, help="local processes to start (default 1)")
    parser.add_argument("-v", "--verbose", action="count", default=1)
    ns = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(ns.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rest = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    try:
        if ns.nproc > 1:
            run_local(run_target, ns.nproc, (ns.target, rest, level))
        else:
            run_target(ns.target, rest, level)
    except (SlurmplanError, WorkerFailed) as exc:
        print(f"slurmplan.launch: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
