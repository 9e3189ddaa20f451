"""Fixtures for the daemon's end-to-end tests: a real local Slurm cluster and a daemon wired to it.

The cluster is the default dev layout (a100, v100 and t4 nodes) with the site's job_submit.lua (hinted jobs
are held at submit, bad hints refused) and one change: ``cred_expire=10`` in ``AuthInfo``, which is what sets
how long Slurm keeps a requeued job pending ("BeginTime", 120 s by default), so a move between GPU types
completes within a test's patience. Everything else is Slurm as a site runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import Journal
from slurmplan.control.runner import Daemon, TickReport
from tests.conftest import ClusterHandle, _require_slurm

REPO = Path(__file__).resolve().parents[2]
ROUND_S = 20.0
GRACE_S = 5.0

SIGNAL_AWARE = """
trap 'echo "checkpoint at $(date +%s)"; scontrol requeuehold $SLURM_JOB_ID; exit 0' USR2
echo "start $(date +%s) on $SLURMD_NODENAME restarts=${{SLURM_RESTART_COUNT:-0}}"
for i in $(seq 1 {seconds}); do sleep 1; done
echo finished
"""
"""A job that honours the checkpoint signal the way the launcher does: checkpoint, requeue-hold itself."""

SIGNAL_DEAF = """
trap '' USR2
for i in $(seq 1 {seconds}); do sleep 1; done
"""


@pytest.fixture(scope="package")
def daemon_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    _require_slurm()
    from slurmplan.slurm.devcluster import DevCluster
    from slurmplan.slurm.devconf import ClusterPaths
    from slurmplan.slurm.devlayout import load_layout

    root = tmp_path_factory.mktemp("daemon-cluster").resolve()
    sock = ClusterPaths(root).munge_socket
    overrides = {
        "slurm_conf_extra": [f"AuthInfo=socket={sock},cred_expire=10", "JobSubmitPlugins=lua"],
        "conf_files": {"job_submit.lua": str(REPO / "site" / "job_submit.lua")},
    }
    cluster = DevCluster(load_layout(None, overrides), root)
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        yield handle
        handle.cancel_all()
    finally:
        cluster.down()


@dataclass
class Rig:
    """A daemon on the test cluster with its own journal; ``tick()`` runs one real tick."""

    handle: ClusterHandle
    config: DaemonConfig
    path: Path

    def daemon(self, backend: Any = None) -> Daemon:
        from slurmplan.slurm.backend import SlurmBackend

        return Daemon(self.config, backend=backend or SlurmBackend(env=self.handle.env))

    def tick(self, backend: Any = None) -> TickReport:
        return self.daemon(backend).tick()

    def journal(self) -> Journal:
        return Journal(self.config.database)

    def submit(self, body: str, *opts: str, seconds: int = 300) -> int:
        out = str(self.path / "%j.out")
        return self.handle.sbatch(body.format(seconds=seconds), "-o", out, "--open-mode=append", *opts)

    def until(self, cond: Callable[[], bool], timeout: float = 40.0, what: str = "", tick: bool = False) -> None:
        """Wait for ``cond``; with ``tick`` the daemon ticks every second meanwhile (as ``daemon`` would)."""
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached in {timeout} s")
            if tick:
                self.tick()
            time.sleep(1.0)

    def job(self, job_id: int) -> dict[str, Any]:
        rec = self.handle.squeue_job(job_id)
        assert rec is not None, f"job {job_id} unknown to squeue"
        return rec

    def scontrol(self, *args: str) -> None:
        self.handle.run("scontrol", *args, check=True)


@pytest.fixture
def rig(daemon_cluster: ClusterHandle, tmp_path: Path) -> Iterator[Rig]:
    config = DaemonConfig(
        database=tmp_path / "journal.db",
        report_dir=tmp_path / "reports",
        round_s=ROUND_S,
        grace_s=GRACE_S,
        policy="las",
    )
    r = Rig(daemon_cluster, config, tmp_path)
    before = len(daemon_cluster.submitted)
    yield r
    mine = daemon_cluster.submitted[before:]
    if mine:
        daemon_cluster.run("scancel", *map(str, mine))
    drained = daemon_cluster.run("sinfo", "-h", "-N", "-t", "drain,draining,drained", "-o", "%N").stdout.split()
    for node in sorted(set(drained)):
        daemon_cluster.run("scontrol", "update", f"nodename={node}", "state=resume", check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # resumed nodes answer pings a moment later ("idle*" until then)
        states = daemon_cluster.run("sinfo", "-h", "-N", "-o", "%t").stdout.split()
        if all(st in ("idle", "mix", "alloc") for st in states):
            break
        time.sleep(1.0)
