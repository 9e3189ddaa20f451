"""Layout YAML validation and the rendered slurm.conf/gres.conf, without starting anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from slurmplan.domain import ValidationError
from slurmplan.slurm.devcluster import DevCluster, DevClusterError, check_prerequisites
from slurmplan.slurm.devconf import ClusterPaths, render_gres_conf, render_slurm_conf
from slurmplan.slurm.devlayout import default_layout_path, load_layout, parse_layout


def test_default_layout_is_heterogeneous():
    layout = load_layout()
    assert default_layout_path().name == "default.yaml"
    types = {n.gpu_type: 0 for n in layout.nodes}
    for n in layout.nodes:
        types[n.gpu_type] += n.gpus
    assert types == {"a100": 8, "v100": 8, "t4": 4}
    assert [p.name for p in layout.partitions if p.default] == ["gpu"]
    assert all(n.gpu_type in n.features for n in layout.nodes), "GPU type as a feature lets jobs be retyped"


def test_rendered_conf_has_own_ports_socket_and_extras(tmp_path):
    job_submit = tmp_path / "job_submit.lua"
    job_submit.write_text("-- lua\n")
    layout = load_layout(
        None, {"slurm_conf_extra": ["JobSubmitPlugins=lua"], "conf_files": {"job_submit.lua": str(job_submit)}}
    )
    paths = ClusterPaths(tmp_path / "state")
    ports = {n: 21000 + i for i, n in enumerate(layout.node_names())}
    conf = render_slurm_conf(layout, paths, "devtest", 20999, ports, "vm")
    lines = conf.splitlines()
    assert "SlurmctldPort=20999" in lines and "ClusterName=devtest" in lines
    assert f"AuthInfo=socket={paths.munge_socket},cred_expire=10" in lines
    assert f"StateSaveLocation={paths.state_save}" in lines
    assert any(ln.startswith("NodeName=a100n1 ") and "Port=21000" in ln and "Gres=gpu:a100:4" in ln for ln in lines)
    assert lines[-1] == "JobSubmitPlugins=lua"
    gres = render_gres_conf(layout, paths)
    assert f"NodeName=t4n2 Name=gpu Type=t4 File={paths.gpu_dir}/t4n2/gpu[0-1]" in gres
    assert layout.conf_files["job_submit.lua"] == job_submit.resolve()


@pytest.mark.parametrize(
    ("data", "field", "allowed"),
    [
        ({"nodes": [{"name": "n1", "gpus": 2}]}, "gpu_type", "a GPU type when gpus > 0"),
        ({"nodes": [{"name": "n[1-2]", "port": 7000}]}, "port", "only on an entry naming one node"),
        ({"nodes": [{"name": "n1"}, {"name": "n1"}]}, "nodes.name", "each node name once"),
        ({"nodes": [{"name": "n1"}], "partitions": [{"name": "p", "nodes": "x9"}]}, "nodes", "nodes of this layout"),
        ({"nodes": [{"name": "n1"}], "conf_files": {"slurm.conf": "/etc/hosts"}}, "conf_files name", "other than"),
        ({"nodes": [{"name": "n1"}], "conf_files": {"a.lua": "/no/such"}}, "conf_files.a.lua", "an existing file"),
        ({"nodes": []}, "nodes", "non-empty list"),
        ({"nodes": [{"name": "n1"}], "colour": "red"}, "layout key", "one of accounts, conf_files"),
    ],
)
def test_bad_layout_names_field_and_allowed(tmp_path, data, field, allowed):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError) as info:
        load_layout(path)
    assert info.value.field == field
    assert allowed in str(info.value) and str(path) in str(info.value)


def test_unreadable_layout_file_is_named(tmp_path):
    with pytest.raises(ValidationError, match="readable YAML file"):
        load_layout(tmp_path / "missing.yaml")


@pytest.mark.skipif(os.geteuid() != 0, reason="as non-root the root check refuses first")
def test_missing_slurm_binaries_refused_with_install_hint(monkeypatch, tmp_path):
    """A machine without Slurm on PATH (caused for real by emptying PATH) is refused before anything starts."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DevClusterError, match="--install"):
        check_prerequisites()
    cluster = DevCluster(parse_layout({"nodes": [{"name": "n1"}]}), tmp_path / "state")
    with pytest.raises(DevClusterError, match="missing .*slurmctld"):
        cluster.up(timeout=5)
    assert not Path(tmp_path / "state" / "conf" / "slurm.conf").exists()
