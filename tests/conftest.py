"""Shared fixtures: a real local Slurm cluster for the tests that need one.

``devcluster`` starts one cluster per test session in a temporary state directory (its own munged, ports and
cluster name, so it never collides with another engineer's cluster on the same host); ``devcluster_factory``
starts extra clusters with a changed layout. Both cancel what they submitted and stop every daemon at the
end. Without root or without Slurm the tests that use them are skipped with the reason, except in CI
(``CI=true``), where that is a failure: CI must run them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from slurmplan.slurm import devaccounting
from slurmplan.slurm.devcluster import REQUIRED_BINARIES, DevCluster
from slurmplan.slurm.devlayout import load_layout
from slurmplan.slurm.reader import find_job, read_jobs

pytest_plugins = ["sigterm_teardown"]

# Property tests run on shared, busy machines (and CI): a slow example is not a failure.
settings.register_profile("slurmplan", deadline=None)
settings.load_profile("slurmplan")


def _unusable_reason() -> str | None:
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root"
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if missing:
        return f"Slurm binaries missing: {', '.join(missing)} (run `bash site/quickstart/test.sh` to install)"
    return None


def _require_slurm() -> None:
    reason = _unusable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the Slurm tests, but {reason}")
    pytest.skip(reason)


class ClusterHandle:
    """A started dev cluster plus helpers to submit, inspect and clean up jobs."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster
        self.env: dict[str, str] = cluster.env
        self.jobs_dir = cluster.paths.root / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.submitted: list[int] = []
        self._scripts = 0

    def run(self, *args: str, check: bool = False, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a command (e.g. ``"squeue", "--json"``) against this cluster."""
        return subprocess.run(
            list(args),
            env={**os.environ, **self.env},
            capture_output=True,
            encoding="utf-8",
            errors="replace",  # job names and comments are users' bytes
            check=check,
            timeout=timeout,
            cwd=self.jobs_dir,
        )

    def sbatch(self, script_text: str, *opts: str) -> int:
        """Submit ``script_text`` (a ``#!/bin/bash`` line is added if missing); returns the job id."""
        if not script_text.startswith("#!"):
            script_text = "#!/bin/bash\n" + script_text
        self._scripts += 1
        script = self.jobs_dir / f"script{self._scripts}.sh"
        script.write_text(script_text)
        # `--hold` stands for job_submit.lua's hold, which Slurm shows as a user hold (JobHeldUser); root's own
        # `sbatch --hold` would be an admin hold, which slurmplan never lifts (issue 24). So: submit it waiting on
        # a begin time, hold it as a user hold, then clear the begin time.
        hold = "--hold" in opts
        if hold:
            opts = tuple(o for o in opts if o != "--hold") + ("--begin=now+3600",)
        proc = self.run("sbatch", "--parsable", *opts, str(script))
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(opts)} failed ({proc.returncode}): {proc.stderr.strip()}")
        job_id = int(proc.stdout.strip().split(";")[0])
        self.submitted.append(job_id)
        if hold:
            self.run("scontrol", "uhold", str(job_id), check=True)
            self.run("scontrol", "update", f"jobid={job_id}", "StartTime=now", check=True)
        return job_id

    def squeue_job(self, job_id: int) -> dict[str, Any] | None:
        """The job's record from ``squeue --json`` as the versioned reader gives it (22.05's field names and
        value shapes on every Slurm version), or None once Slurm has forgotten it."""
        proc = self.run("squeue", "--json", "--states=all", check=True)
        record = find_job(read_jobs(json.loads(proc.stdout)), job_id)
        return record.as_dict() if record is not None else None

    def wait_for(
        self, job_id: int, pred: Callable[[dict[str, Any]], bool], timeout: float = 30, what: str = "condition"
    ) -> dict[str, Any]:
        """Poll ``squeue --json`` until ``pred(job)`` holds; returns the job record."""
        deadline = time.monotonic() + timeout
        job: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            job = self.squeue_job(job_id)
            if job is not None and pred(job):
                return job
            time.sleep(0.3)
        state = None if job is None else (job.get("job_state"), job.get("state_reason"))
        raise AssertionError(f"job {job_id}: {what} not reached in {timeout} s (last state {state})")

    def wait_state(self, job_id: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        """Wait until the job's ``job_state`` is one of ``states`` (e.g. ``"RUNNING"``)."""
        return self.wait_for(job_id, lambda j: j.get("job_state") in states, timeout, f"state in {states}")

    def cancel_all(self) -> None:
        if self.submitted:
            self.run("scancel", *map(str, self.submitted))


@pytest.fixture(scope="session")
def devcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """One local cluster (default layout) for the whole test session."""
    _require_slurm()
    cluster = DevCluster(load_layout(), tmp_path_factory.mktemp("devcluster"))
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        yield handle
        handle.cancel_all()
    finally:
        cluster.down()


@pytest.fixture
def devcluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ClusterHandle]]:
    """Start a cluster whose layout is the default one with top-level keys replaced by ``layout_overrides``."""
    started: list[tuple[DevCluster, ClusterHandle]] = []

    def start(
        layout_overrides: Mapping[str, Any] | None = None, layout_file: str | Path | None = None
    ) -> ClusterHandle:
        _require_slurm()
        cluster = DevCluster(load_layout(layout_file, layout_overrides), tmp_path_factory.mktemp("devcluster"))
        handle = ClusterHandle(cluster)
        started.append((cluster, handle))
        cluster.up(timeout=120)
        return handle

    yield start
    for cluster, handle in started:
        try:
            handle.cancel_all()
        finally:
            cluster.down()


@pytest.fixture(scope="session")
def acctcluster() -> Iterator[ClusterHandle]:
    """One cluster with accounting (MariaDB + slurmdbd, the default layout's ``accounts:``) for the whole session.

    Its state directory is world-readable (not under pytest's 0700 temporary directory) so the layout's
    unprivileged users (``tests/unixusers.py``) can read slurm.conf and submit."""
    _require_slurm()
    missing = devaccounting.missing_binaries()
    if missing:
        reason = f"accounting needs {', '.join(missing)} (apt-get install {' '.join(devaccounting.DEBIAN_PACKAGES)})"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the accounting tests, but {reason}")
        pytest.skip(reason)
    import unixusers

    layout = load_layout()
    for name in layout.accounts.user_names() if layout.accounts else ():
        if name != "root":
            unixusers.ensure_user(name)
    root = Path(tempfile.mkdtemp(prefix="slurmplan-acct-"))
    os.chmod(root, 0o755)
    cluster = DevCluster(layout, root, accounting=True)
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        os.chmod(handle.jobs_dir, 0o777)
        yield handle
        handle.cancel_all()
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)
