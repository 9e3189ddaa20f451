"""A dev cluster configured the way `slurmplan site install` configures a controller, for the integration tests.

The SPANK plugin is built with ``make -C spank`` and loaded (``required``) from plugstack.conf;
``JobSubmitPlugins=lua`` with site/job_submit.lua beside slurm.conf; PrologSlurmctld/EpilogSlurmctld run the
scripts from prolog/ with a hook environment file that points at a journal in the test's directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurmplan.control.journal import Journal
from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devconf import ClusterPaths
from slurmplan.slurm.devlayout import load_layout
from slurmplan.slurm.reader import find_job, read_jobs
from slurmplan.slurm.site import dev_site_overrides

ROOT = Path(__file__).resolve().parents[2]
MANAGED_PARTITIONS = ("debug",)
"""Jobs in the dev cluster's debug partition are managed (held) even without hints."""


def unusable_reason() -> str | None:
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root"
    for tool in ("slurmctld", "slurmd", "sbatch", "make", "gcc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


class SiteCluster:
    """The running cluster plus the paths the hooks and the plugin use, and small job helpers."""

    def __init__(self, tmp: Path, root: Path) -> None:
        self.tmp = tmp
        self.journal = tmp / "journal.db"
        self.jobs_dir = root / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.jobs_dir, 0o777)
        self.submitted: list[int] = []
        conf_dir = ClusterPaths(root.resolve()).conf_dir
        # what `slurmplan devcluster up --site` does (the plugin is built in up())
        overrides, dev = dev_site_overrides(
            tmp,
            conf_dir,
            managed_partitions=MANAGED_PARTITIONS,
            journal=self.journal,
            command=f"{sys.executable} -m slurmplan.cli",
            plugin=ROOT / "spank/slurmplan_spank.so",
        )
        self.plan_dir, self.hook_log = dev.plan_dir, dev.hook_log
        self.cluster = DevCluster(load_layout(None, overrides), root)
        self.env = {**os.environ, **self.cluster.env}

    def up(self) -> None:
        subprocess.run(["make", "-C", str(ROOT / "spank")], check=True, capture_output=True, timeout=120)
        self.cluster.up(timeout=120)

    def down(self) -> None:
        try:
            if self.submitted:
                self.run("scancel", *map(str, self.submitted))
        finally:
            self.cluster.down()

    def run(self, *args: str, check: bool = False, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            env={**self.env, **env},
            capture_output=True,
            encoding="utf-8",
            errors="replace",  # job names and comments are users' bytes
            check=check,
            timeout=timeout,
            cwd=self.jobs_dir,
        )

    def sbatch(self, script: str | Path, *opts: str, **env: str) -> int:
        """Submit a script text (``#!/bin/bash`` added) or a script file; returns the job id."""
        if isinstance(script, str):
            path = self.jobs_dir / f"script{len(self.submitted)}.sh"
            path.write_text(script if script.startswith("#!") else "#!/bin/bash\n" + script)
            script = path
        proc = self.run("sbatch", "--parsable", *opts, str(script), **env)
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(opts)} {script} failed: {proc.stderr.strip()}")
        job_id = int(proc.stdout.strip().split(";")[0])
        self.submitted.append(job_id)
        return job_id

    def job(self, job_id: int) -> dict[str, Any] | None:
        """The job's record as the versioned reader gives it (22.05's field names on every version)."""
        doc = json.loads(self.run("squeue", "--json", "--states=all", check=True).stdout)
        record = find_job(read_jobs(doc), job_id)
        return record.as_dict() if record is not None else None

    def wait_for(self, job_id: int, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        job = None
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job is not None and pred(job):
                return job
            time.sleep(0.3)
        state = job and (job.get("job_state"), job.get("state_reason"))
        raise AssertionError(f"job {job_id}: {what} not reached in {timeout} s (last {state})")

    def wait_state(self, job_id: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(job_id, lambda j: j.get("job_state") in states, timeout, f"state in {states}")

    def events(self, job_id: int) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        with Journal(self.journal) as j:
            return j.events.of(job_id)

    def wait_events(self, job_id: int, *names: str, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.events(job_id)
            if all(any(e["event"] == n for e in events) for n in names):
                return events
            time.sleep(0.3)
        log = self.hook_log.read_text() if self.hook_log.exists() else "<no hook log>"
        raise AssertionError(f"job {job_id}: events {names} not journaled; got {self.events(job_id)}; log: {log}")

    def release_with(self, job_id: int, admin_comment: str) -> None:
        """Do what the daemon does when it starts a job: write its decision, then release it."""
        self.run("scontrol", "update", f"jobid={job_id}", f"AdminComment={admin_comment}", check=True)
        self.run("scontrol", "release", str(job_id), check=True)
