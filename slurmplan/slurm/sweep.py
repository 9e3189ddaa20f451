"""``compare --executor slurm``: each (trace, policy) simulation as a Slurm job, submitted with submitit.

One job array per sweep; each task runs ``slurmplan.sim.runner.simulate`` on its ``RunSpec`` (pickled by
submitit into the sweep folder, which must be on a file system the compute nodes share) and returns its
``SimResult``. The results are those of ``--executor local``: the same function on the same values; only where
it runs differs. Without Slurm accounting submitit warns that sacct failed and reads job states from squeue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from slurmplan.domain import SlurmplanError
from slurmplan.sim.executors import ExecutorOptions

log = logging.getLogger(__name__)

POLL_S = 1.0


class SweepError(SlurmplanError):
    """A simulation job failed on the cluster; the message names the policy and its log."""


def _folder(options: ExecutorOptions) -> Path:
    base = Path(options.folder or ".slurmplan-sweep")
    return (base / time.strftime("%Y%m%d-%H%M%S")).resolve()


def run_on_slurm(specs: Sequence[object], options: ExecutorOptions) -> list:
    """Submit every spec as one task of a job array, wait (with a progress bar), return results in order."""
    import submitit

    from slurmplan.sim.runner import simulate

    _submitit_logs_to_stderr()
    folder = _folder(options)
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params: dict[str, object] = {"timeout_min": options.timeout_min, "cpus_per_task": 1, "name": "slurmplan-sim"}
    if options.partition:
        params["slurm_partition"] = options.partition
    executor.update_parameters(**params)
    jobs = executor.map_array(simulate, list(specs))
    log.info("submitted %d simulations as job array %s (logs in %s)", len(jobs), jobs[0].job_id, folder)
    _wait(jobs, options.progress)
    results = []
    for spec, job in zip(specs, jobs, strict=True):
        try:
            results.append(job.result())
        except Exception as exc:  # submitit raises its own FailedJobError/UncompletedJobError
            policy = getattr(spec, "policy", "?")
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            where = f"Slurm job {job.job_id}, log {job.paths.stderr}"
            raise SweepError(f"simulation of {policy} failed ({where}): {last}") from exc
    return results


def _submitit_logs_to_stderr() -> None:
    """submitit logs to stdout (its warning that sacct failed, without accounting), which would corrupt
    ``compare --json``; its handlers are pointed at stderr."""
    import sys

    for handler in logging.getLogger("submitit").handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def _wait(jobs: Sequence[object], progress: bool) -> None:
    """Poll until every job is done. submitit reads states from sacct, else squeue; a job that can never start
    (a time limit above its partition's) is reported once, as Slurm gives its reason, and waited for."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), unit="sim", desc="simulations on Slurm", leave=False)
    done = 0
    try:
        while done < len(jobs):
            now_done = sum(1 for j in jobs if j.done())
            if bar is not None and now_done > done:
                bar.update(now_done - done)
            done = now_done
            if done < len(jobs):
                time.sleep(POLL_S)
    finally:
        if bar is not None:
            bar.close()
