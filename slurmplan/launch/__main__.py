"""``python -m slurmplan.launch [--nproc N] TARGET [-- ARGS...]``: run a training target with the launcher.

Under ``srun`` (one task per GPU) or torchrun, leave ``--nproc`` at 1: each task is one process of the job.
``--nproc N`` starts N local processes itself, for a single-node job launched without srun; this parent
catches the checkpoint signal, forwards it to its workers, waits for their checkpoint and exits as they do.
Exit status: 0 finished (or checkpointed and requeued), 75 checkpointed but not requeued, 1 error (one line on
stderr); see ``slurmplan.launch.spec.Outcome``.
"""

from __future__ import annotations

from slurmplan.launch import early

early.catch_early()  # before the slow imports below: a checkpoint signal now is remembered, not fatal

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    early.catch_early()
    parser = argparse.ArgumentParser(prog="python -m slurmplan.launch", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="file.py[:make_spec] or module[:make_spec], a function argv -> TrainSpec")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the target (after --)")
    parser.add_argument("--nproc", type=int, default=1, help="local processes to start (default 1)")
    parser.add_argument("-v", "--verbose", action="count", default=1)
    ns = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(ns.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rest = ns.args[1:] if ns.args[:1] == ["--"] else ns.args

    from slurmplan.domain import SlurmplanError
    from slurmplan.launch.entry import load_target, parent_status, run_target, run_worker, worker_errors
    from slurmplan.launch.local import supervise
    from slurmplan.launch.signals import resolve_signal
    from slurmplan.launch.trainer import ReportedByAnotherRank

    try:
        if ns.nproc > 1:
            load_target(ns.target)  # a bad target fails here once, not once per worker
            with tempfile.TemporaryDirectory(prefix="slurmplan-launch-") as errors:
                args = (ns.target, rest, level, errors)
                codes = supervise(run_worker, ns.nproc, args, signum=resolve_signal(), ok=(0, 75))
                for message in worker_errors(errors):
                    print(f"slurmplan.launch: error: {message}", file=sys.stderr)
            status, line = parent_status(codes)
            if line:
                print(f"slurmplan.launch: error: {line}", file=sys.stderr)
            return status
        return run_target(ns.target, rest, level).outcome.exit_code
    except ReportedByAnotherRank:
        return 1  # rank 0 printed the error; one line per job, not one per process
    except SlurmplanError as exc:
        print(f"slurmplan.launch: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
