"""The local development cluster: starts, runs GPU jobs on the right node types, restarts idempotently, stops
everything it started, and refuses bad layouts and taken ports clearly."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmplan.domain import ValidationError
from slurmplan.slurm import procs
from slurmplan.slurm.backend import SlurmBackend
from slurmplan.slurm.devcluster import _READY_STATES, DevCluster, DevClusterError, daemon_version
from slurmplan.slurm.devlayout import load_layout, parse_layout
from slurmplan.slurm.run import SlurmCommandError

pytestmark = pytest.mark.slurm


def test_default_cluster_nodes_idle_with_gpus(devcluster):
    proc = devcluster.run("sinfo", "-h", "-N", "-o", "%N %T %G", check=True)
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}
    layout = devcluster.cluster.layout
    assert set(rows) == set(layout.node_names())
    for node in layout.nodes:
        state, gres = rows[node.name]
        assert state in _READY_STATES  # up (completing: an earlier test's job)
        assert gres.startswith(f"gpu:{node.gpu_type}:{node.gpus}")


def test_own_munge_and_unique_cluster_name(devcluster):
    conf = Path(devcluster.env["SLURM_CONF"]).read_text()
    root = devcluster.cluster.paths.root
    assert f"AuthInfo=socket={root}/munge/munge.socket," in conf
    assert f"ClusterName={devcluster.cluster.cluster_name}" in conf
    assert devcluster.cluster.cluster_name != DevCluster(state_dir=root / "other").cluster_name


def test_typed_gpu_job_lands_on_that_type(devcluster):
    job = devcluster.sbatch("echo hi; sleep 1", "--gres=gpu:t4:1", "--time=1")
    record = devcluster.wait_state(job, "RUNNING", "COMPLETED")
    assert record["nodes"].startswith("t4n")


def test_up_is_idempotent(devcluster):
    before = {d.name: d.pid for d in devcluster.cluster.status().daemons}
    again = DevCluster(devcluster.cluster.layout, devcluster.cluster.paths.root)
    status = again.up(timeout=30)
    assert status.running
    assert {d.name: d.pid for d in status.daemons} == before


def test_down_stops_every_process_and_job_of_its_own_only(devcluster, devcluster_factory):
    """Two clusters side by side (same node names); stopping one leaves the other and its jobs running."""
    other_job = devcluster.sbatch("sleep 300", "--gres=gpu:a100:1")
    devcluster.wait_state(other_job, "RUNNING")
    handle = devcluster_factory({"nodes": [{"name": "a100n[1-2]", "gpu_type": "a100", "gpus": 2, "cpus": 4}]})
    assert handle.cluster.cluster_name != devcluster.cluster.cluster_name
    job = handle.sbatch("sleep 300", "--gres=gpu:a100:1")
    handle.wait_state(job, "RUNNING")
    pids = [d.pid for d in handle.cluster.status().daemons]
    steps = handle.cluster._job_step_pids()
    assert steps, "the running job has a slurmstepd"  # 24.11: found by its open files, its environment is empty
    job_processes = procs.descendants(steps)
    assert any(procs.comm(p) == "sleep" for p in job_processes), job_processes
    handle.cluster.down()
    assert not [p for p in pids + job_processes if procs.is_alive(p)]  # the job's `sleep 300` too
    assert not handle.cluster.status().running
    with pytest.raises(SlurmCommandError, match="is slurmctld running for .*slurm.conf"):
        SlurmBackend(handle.env).snapshot()
    assert devcluster.cluster.status().running
    assert devcluster.squeue_job(other_job)["job_state"] == "RUNNING"
    devcluster.run("scancel", str(other_job))


def test_requested_port_taken_is_refused(tmp_path):
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        port = sock.getsockname()[1]
        layout = parse_layout({"nodes": [{"name": "n1"}], "slurmctld_port": port})
        with pytest.raises(DevClusterError, match=f"port {port}"):
            DevCluster(layout, tmp_path).up(timeout=10)
    assert not (tmp_path / "run" / "slurmctld.pid").exists()


def test_layout_with_bad_field_names_file_field_allowed(tmp_path):
    bad = tmp_path / "layout.yaml"
    bad.write_text(json.dumps({"nodes": [{"name": "n1", "gpu_type": "a100", "gpus": "four"}]}))
    with pytest.raises(ValidationError) as info:
        load_layout(bad)
    message = str(info.value)
    assert str(bad) in message and "gpus" in message and "integer" in message
    bad.write_text(json.dumps({"nodes": [{"name": "n1", "gpu": 2}]}))
    with pytest.raises(ValidationError, match="node key 'gpu'.*one of .*gpus"):
        load_layout(bad)


def _processes_naming(text: str) -> list[str]:
    """Live processes whose command line names ``text`` (the keeper, the daemons and their job steps do)."""
    return [f"{pid} {procs.cmdline(pid)}" for pid in procs.all_pids() if text in procs.cmdline(pid)]


def test_cli_up_down_leaves_nothing(tmp_path):
    """The CLI starts the daemons through a keeper process, so `down` leaves neither process nor zombie."""
    layout = tmp_path / "small.yaml"
    layout.write_text(json.dumps({"nodes": [{"name": "c[1-2]", "gpu_type": "t4", "gpus": 1}]}))
    state = tmp_path / "state"
    cli = [sys.executable, "-m", "slurmplan.cli", "devcluster"]
    args = ["--layout", str(layout), "--state-dir", str(state), "--json"]
    up = subprocess.run([*cli, "up", *args], capture_output=True, text=True, timeout=180)
    try:
        assert up.returncode == 0, up.stderr
        assert [n["state"] for n in json.loads(up.stdout)["nodes"]] == ["idle", "idle"]
    finally:
        down = subprocess.run([*cli, "down", *args], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not json.loads(down.stdout)["running"]
    time_left = 50
    while _processes_naming(str(state)) and time_left:
        time.sleep(0.1)
        time_left -= 1
    assert _processes_naming(str(state)) == []


def test_up_with_a_daemon_that_cannot_start_names_it_and_stops_the_rest(tmp_path):
    """A slurmctld that exits at start (a bad slurm.conf line) makes `up` fail within its timeout, naming the
    daemon with its last log lines, and leaves no process of this cluster running (it used to hang for ever:
    the keeper waited for munged, the CLI for the keeper)."""
    layout = tmp_path / "broken.yaml"
    nodes = [{"name": "c1", "gpu_type": "t4", "gpus": 1}]
    layout.write_text(json.dumps({"nodes": nodes, "slurm_conf_extra": ["SelectType=select/no-such-plugin"]}))
    state = tmp_path / "state"
    args = ["--layout", str(layout), "--state-dir", str(state), "--timeout", "30"]
    t0 = time.monotonic()
    up = subprocess.run([sys.executable, "-m", "slurmplan.cli", "devcluster", "up", *args], capture_output=True,
                        text=True, timeout=150)  # fmt: skip
    assert time.monotonic() - t0 < 120
    assert up.returncode != 0
    assert "slurmctld" in up.stderr and "last lines of" in up.stderr
    assert "stopped what this start had started: munged, slurmctld" in up.stderr
    time_left = 50
    while _processes_naming(str(state)) and time_left:
        time.sleep(0.1)
        time_left -= 1
    assert _processes_naming(str(state)) == []


def test_config_fits_the_installed_slurm(devcluster):
    """24.11 (not 22.05) needs cgroup.conf with CgroupPlugin=disabled to start slurmd without a cgroup
    filesystem, and logs an error unless UnkillableStepTimeout >= 5 x MessageTimeout; 22.05 has no such plugin
    setting, so its cluster has no cgroup.conf."""
    version = daemon_version()
    cgroup = devcluster.cluster.paths.cgroup_conf
    assert cgroup.exists() == (version >= (23, 2))
    if cgroup.exists():
        assert "CgroupPlugin=disabled" in cgroup.read_text()
    log_text = (devcluster.cluster.paths.log_dir / "slurmctld.log").read_text(errors="replace")
    assert "UnkillableStepTimeout must be" not in log_text
