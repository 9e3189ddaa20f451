"""The security suite's cluster: configured as a site (job_submit.lua, SPANK plugin, controller hooks) and used
by a real unprivileged Unix user, so that every check a user could get around is met as a user meets it.

Jobs are submitted with ``runuser`` as ``slurmplan-t1`` (``tests/unixusers.py``); the daemon's commands
(``slurmplan tick``, ``watchdog``, ``status``) run as root, as they do on a site. The cluster's state directory is
world-readable (0755), as the user's ``sbatch`` must read ``slurm.conf`` and its job scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import unixusers  # noqa: E402
from site_cluster import SiteCluster, unusable_reason  # noqa: E402


class Hostile:
    """The site cluster, its daemon config, and the test user's hands."""

    def __init__(self, site: SiteCluster, user: unixusers.UnixUser) -> None:
        self.site = site
        self.user = user
        self.reports = site.tmp / "reports"
        self.reports.mkdir(exist_ok=True)
        os.chmod(self.reports, 0o1777)  # a shared report folder as the launcher's users write it (sticky, /tmp-like)
        self.config = site.tmp / "slurmplan.yaml"
        self.write_config()

    def write_config(self, **extra: Any) -> Path:
        lines = [
            f"database: {self.site.journal}",
            f"report_dir: {self.reports}",
            "round_s: 1",
            "hints_from_comment: false",
            *(f"{k}: {json.dumps(v)}" for k, v in extra.items()),
        ]
        self.config.write_text("\n".join(lines) + "\n")
        return self.config

    def as_user(self, *argv: str | bytes, check: bool = False) -> subprocess.CompletedProcess:
        proc = unixusers.run_as(self.user, argv, {"SLURM_CONF": self.site.env["SLURM_CONF"]}, cwd=self.site.jobs_dir)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv!r} as {self.user.name} failed: {proc.stderr}")
        return proc

    def sbatch(self, *opts: str | bytes, script: str = "sleep 600") -> int:
        proc = self.as_user("sbatch", "--parsable", "-o", "/dev/null", *opts, "--wrap", script, check=True)
        job_id = int(proc.stdout.strip().split(";")[0])
        self.site.submitted.append(job_id)
        return job_id

    def slurmplan(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "slurmplan.cli", *args],
            env=self.site.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def tick(self) -> dict[str, Any]:
        proc = self.slurmplan("tick", "--config", str(self.config), "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    def ticks_until(self, job_id: int, states: tuple[str, ...], n: int = 8) -> dict[str, Any]:
        job: dict[str, Any] | None = None
        for _ in range(n):
            self.tick()
            job = self.job(job_id)
            if job and job["job_state"] in states:
                return job
            time.sleep(1.1)
        raise AssertionError(f"job {job_id} not in {states} after {n} ticks: {job and job['job_state']}")

    def squeue_bytes(self) -> bytes:
        return subprocess.run(["squeue", "--json", "--states=all"], env=self.site.env, capture_output=True).stdout

    def job(self, job_id: int) -> dict[str, Any] | None:
        """The job's ``squeue --json`` record as the versioned reader gives it, read with invalid bytes replaced
        (users' names may hold any): the site cluster's own reading."""
        return self.site.job(job_id)

    def wait_state(self, job_id: int, *states: str, timeout: float = 30) -> dict[str, Any]:
        return self.site.wait_state(job_id, *states, timeout=timeout)

    def cancel(self, *job_ids: int) -> None:
        self.site.run("scancel", *map(str, job_ids))


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    reason = unusable_reason() or unixusers.unusable_reason()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the security tests, but {reason}")
        pytest.skip(reason)
    user = unixusers.ensure_user()
    root = Path(tempfile.mkdtemp(prefix="slurmplan-security-"))
    os.chmod(root, 0o755)
    (root / "files").mkdir()
    os.chmod(root / "files", 0o755)
    site = SiteCluster(root / "files", root / "cluster")
    try:
        site.up()
        yield Hostile(site, user)
    finally:
        site.down()
        shutil.rmtree(root, ignore_errors=True)
