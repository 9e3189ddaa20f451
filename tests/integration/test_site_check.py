"""``slurmplan site check`` against two real controllers: one set up the way slurmplan needs, one set up badly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.slurm.devcluster import DevCluster
from slurmplan.slurm.devconf import ClusterPaths
from slurmplan.slurm.devlayout import load_layout
from slurmplan.slurm.reader import show_config
from slurmplan.slurm.site import SiteLayout, hook_env, render_job_submit
from slurmplan.slurm.site_check import site_check
from tests.conftest import ClusterHandle, _require_slurm

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODES_NO_FEATURES = [
    {"name": "a100n1", "gpu_type": "a100", "gpus": 2, "cpus": 8, "memory_mb": 16000},
    {"name": "cpun1", "cpus": 8, "memory_mb": 16000},
]
PARTITIONS_BAD = [
    {"name": "gpu", "nodes": "ALL", "default": True},
    {"name": "cpu", "nodes": "cpun1"},
]


def _check(handle: ClusterHandle, config: Path, user: str = "root") -> tuple[int, dict[str, dict]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurmplan.cli",
            "site",
            "check",
            "--config",
            str(config),
            "--json",
            "--daemon-user",
            user,
        ],
        env={**os.environ, **handle.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout, proc.stderr
    return proc.returncode, {f["check"]: f for f in json.loads(proc.stdout)}


def test_parse_show_config_keeps_first_keys() -> None:
    text = "Configuration data as of x\nAuthInfo                = socket=/s,cred_expire=10\nJobRequeue = 1\n"
    assert show_config(text) == {"AuthInfo": "socket=/s,cred_expire=10", "JobRequeue": "1"}


def test_badly_configured_cluster(tmp_path: Path) -> None:
    _require_slurm()
    root = (tmp_path / "cluster").resolve()
    sock = ClusterPaths(root).munge_socket
    extra = [f"AuthInfo=socket={sock},cred_expire=120", "JobRequeue=0"]
    cluster = DevCluster(load_layout(None, {"nodes": NODES_NO_FEATURES, "partitions": PARTITIONS_BAD,
                                            "slurm_conf_extra": extra}), root)  # fmt: skip
    try:
        cluster.up(timeout=120)
        _bad_findings(ClusterHandle(cluster), tmp_path)
    finally:
        cluster.down()


def _bad_findings(handle: ClusterHandle, tmp_path: Path) -> None:
    config = tmp_path / "slurmplan.yaml"
    config.write_text("managed_partitions: [gpu, cpu]\n")
    rc, found = _check(handle, config, user="nobody")
    assert rc == 1
    bad = {name for name, f in found.items() if not f["ok"]}
    assert bad == {
        "gpu-type-features", "cred-expire", "job-submit-lua", "spank-plugin", "job-requeue", "admin-comment",
        "prolog-epilog", "partition:cpu",
    }, found  # fmt: skip
    assert "a100n1" in found["gpu-type-features"]["detail"] and "Features=" in found["gpu-type-features"]["fix"]
    assert "120" in found["cred-expire"]["detail"] and "cred_expire=" in found["cred-expire"]["fix"]
    assert "nobody" in found["admin-comment"]["detail"] and found["partition:gpu"]["ok"]
    assert all(f["fix"] for f in found.values() if not f["ok"])


def test_well_configured_cluster(tmp_path: Path) -> None:
    """Set up as `slurmplan site install` does (the prolog paths must be known before the cluster starts)."""
    _require_slurm()
    subprocess.run(["make", "-C", str(ROOT / "spank")], check=True, capture_output=True, timeout=120)
    root = tmp_path / "cluster"
    conf_dir = ClusterPaths(root.resolve()).conf_dir
    files = tmp_path / "files"
    files.mkdir()
    (files / "plugstack.conf").write_text(f"optional {ROOT / 'spank/slurmplan_spank.so'} plan_dir={files}\n")
    (files / "job_submit.lua").write_text(render_job_submit((ROOT / "site/job_submit.lua").read_text(), ()))
    (files / "slurmplan-hook.env").write_text(hook_env(SiteLayout(database=files / "journal.db")))
    sock = ClusterPaths(root.resolve()).munge_socket
    overrides = {
        "slurm_conf_extra": [
            f"AuthInfo=socket={sock},cred_expire=10",
            "JobSubmitPlugins=lua",
            f"PrologSlurmctld={conf_dir / 'prolog_slurmctld.sh'}",
            f"EpilogSlurmctld={conf_dir / 'epilog_slurmctld.sh'}",
        ],
        "conf_files": {
            "job_submit.lua": str(files / "job_submit.lua"),
            "plugstack.conf": str(files / "plugstack.conf"),
            "prolog_slurmctld.sh": str(ROOT / "prolog/prolog_slurmctld.sh"),
            "epilog_slurmctld.sh": str(ROOT / "prolog/epilog_slurmctld.sh"),
            "slurmplan-hook.env": str(files / "slurmplan-hook.env"),
        },
    }
    cluster = DevCluster(load_layout(None, overrides), root)
    try:
        cluster.up(timeout=120)
        handle = ClusterHandle(cluster)
        config = tmp_path / "slurmplan.yaml"
        config.write_text("managed_partitions: [gpu]\n")
        rc, found = _check(handle, config)
        assert rc == 0, {k: f for k, f in found.items() if not f["ok"]}
        assert set(found) >= {"gpu-type-features", "cred-expire", "spank-plugin", "prolog-epilog", "partition:gpu"}
        # The same checks as a library call, with the cluster's environment.
        assert all(f.ok for f in site_check(("gpu",), "root", env=handle.env))
    finally:
        cluster.down()
