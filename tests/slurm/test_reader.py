"""Golden tests of the one versioned reader on output captured from real Slurm 22.05, 24.11 and 26.05.

The files in ``data/`` come from ``tests/slurm/data/capture.sh`` (the same five jobs on each version: a running
a100x2 job with a comment, a running 2-node v100x4 job with a 30-minute limit, a held t4 job, a running job
without GPUs, a held untyped job constrained to t4). Each difference between the versions the reader absorbs is
pinned by one test here; the list is in ``Reader24``'s docstring.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from pathlib import Path

import pytest

from slurmplan.domain import JobState, NodeState
from slurmplan.slurm.backend import snapshot_from_json
from slurmplan.slurm.reader import (
    Reader24,
    SlurmOutputError,
    find_job,
    parse_version,
    read_jobs,
    read_nodes,
    read_records,
    reader_for,
    show_config,
)

DATA = Path(__file__).parent / "data"
VERSIONS = {"22.05": "sinfo_22.05.json", "24.11": "show_nodes_24.11.json", "26.05": "show_nodes_26.05.json"}


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _docs(version: str) -> tuple[dict, dict]:
    return _load(VERSIONS[version]), _load(f"squeue_{version}.json")


@pytest.mark.parametrize("version", VERSIONS)
def test_reader_is_chosen_by_the_format_the_document_names(version):
    nodes, squeue = _docs(version)
    assert reader_for(squeue, "squeue --json").name == version
    assert reader_for(nodes, "nodes").name == version
    assert parse_version((DATA / f"version_{version}.txt").read_text()) == tuple(map(int, version.split(".")))


def test_unknown_format_is_refused_naming_the_field():
    _, squeue = _docs("24.11")
    squeue["meta"]["plugin"]["data_parser"] = "data_parser/v0.0.99"
    with pytest.raises(SlurmOutputError, match=r"meta\.plugin\.data_parser.*v0\.0\.99.*v0\.0\.42 \(Slurm 24\.11\)"):
        read_jobs(squeue)


def _comparable(snapshot):
    """What must not depend on the Slurm version: everything but clock times and the (generated) cluster name."""
    jobs = [dataclasses.replace(j, submit_time=0.0, start_time=j.start_time and 1.0, cluster="") for j in snapshot.jobs]
    return snapshot.cluster.nodes, sorted(jobs, key=lambda j: j.job_id)


@pytest.mark.parametrize("later", ["24.11", "26.05"])
def test_same_jobs_read_the_same_on_both_versions(later):
    """The same cluster and jobs captured on 22.05 and on a later version give equal domain values (26.05, Debian
    forky's, names data_parser v0.0.45 and is read as 24.11's: ``Reader26``)."""
    old = snapshot_from_json(*_docs("22.05"), now=0.0)
    new = snapshot_from_json(*_docs(later), now=0.0)
    assert _comparable(old) == _comparable(new)
    jobs = {j.job_id: j for j in new.jobs}
    assert (jobs[1].state, jobs[1].gpu_type, jobs[1].gpus_per_node, jobs[1].comment) == (
        JobState.RUNNING,
        "a100",
        2,
        "hello",
    )
    assert (jobs[2].node_count, jobs[2].gpus, jobs[2].time_limit_s, jobs[2].nodes) == (
        2,
        8,
        1800,
        ("v100n1", "v100n2"),
    )
    assert jobs[3].held and jobs[3].state is JobState.PENDING and jobs[3].start_time is None
    assert jobs[4].gpus == 0 and jobs[4].memory_mb == 1024
    assert jobs[5].gpu_type == "t4" and jobs[5].gpu_type_preferred
    assert new.cluster.gpus_by_type() == {"a100": 8, "v100": 8, "t4": 4}
    assert new.cluster.node("v100n1").gpus_used == 4 and new.cluster.node("a100n1").state is NodeState.MIXED


def test_24_11_sinfo_lists_node_names_only_and_is_refused_for_nodes():
    """Difference 1: 24.11's ``sinfo --json`` is grouped by partition with node names only."""
    sinfo = _load("sinfo_24.11.json")
    assert isinstance(sinfo["sinfo"][0]["nodes"]["nodes"][0], str)
    assert Reader24.nodes_argv == ("scontrol", "show", "nodes", "--json")
    with pytest.raises(SlurmOutputError, match="scontrol show nodes --json"):
        read_nodes(sinfo)


def test_24_11_node_state_is_a_list_with_flags():
    """Difference 2: node ``state`` is a list (base state, then flags) and ``state_flags`` is gone."""
    doc = _load("show_nodes_24.11.json")
    assert "state_flags" not in doc["nodes"][0] and isinstance(doc["nodes"][0]["state"], list)
    doc["nodes"][1]["state"] = ["IDLE", "DRAIN"]
    doc["nodes"][2]["state"] = ["MIXED", "PLANNED"]
    nodes = read_nodes(doc)
    assert (nodes[1].state, nodes[1].flags) == ("IDLE", frozenset({"DRAIN"}))
    snap = snapshot_from_json(doc, _load("squeue_24.11.json"), 0.0)
    assert snap.cluster.nodes[1].state is NodeState.DRAINED
    assert snap.cluster.nodes[2].state is NodeState.MIXED


def test_24_11_numbers_are_set_infinite_number_objects():
    """Difference 3: counts, times, priority and limits are ``{set, infinite, number}``; unset/infinite is None."""
    doc = _load("squeue_24.11.json")
    raw = doc["jobs"][0]
    assert raw["time_limit"] == {"set": True, "infinite": False, "number": 10080}
    assert raw["memory_per_node"]["set"] is False
    raw["time_limit"] = {"set": True, "infinite": True, "number": 0}
    job = read_jobs(doc)[0]
    assert (job.time_limit, job.memory_per_node, job.memory_per_cpu, job.node_count) == (None, None, 1024, 1)
    assert find_job(read_jobs(doc), 3).priority == 0  # held: priority 0 on both versions
    assert find_job(read_jobs(_load("squeue_22.05.json")), 3).priority == 0


def test_24_11_job_state_is_a_list():
    """Difference 4: ``job_state`` is a list (``['RUNNING']``); extra entries are state flags."""
    doc = _load("squeue_24.11.json")
    assert doc["jobs"][0]["job_state"] == ["RUNNING"]
    doc["jobs"][2]["job_state"] = ["PENDING", "REQUEUED"]
    jobs = read_jobs(doc)
    assert jobs[0].job_state == "RUNNING" and (jobs[2].job_state, jobs[2].state_flags) == ("REQUEUED", ("REQUEUED",))


def test_24_11_job_being_requeued_reads_as_completing_as_on_22_05():
    """Difference 16: a job whose requeue is not done yet is ``['PENDING', 'COMPLETING']`` on 24.11 (seen in the
    Debian 13 root right after ``scontrol requeuehold``: priority 0, its node still listed) and ``COMPLETING`` on
    22.05; both read as COMPLETING, so no tick takes it for a held pending job before Slurm sets its begin time."""
    doc = _load("squeue_24.11.json")
    doc["jobs"][0]["job_state"] = ["PENDING", "COMPLETING"]
    job = read_jobs(doc)[0]
    assert (job.job_state, job.state_flags) == ("COMPLETING", ("COMPLETING",))
    snap = snapshot_from_json(_load("show_nodes_24.11.json"), doc, 0.0)
    assert {j.job_id: j.state for j in snap.jobs}[job.job_id] is JobState.COMPLETING
    doc["jobs"][0]["job_state"] = ["PENDING"]
    assert read_jobs(doc)[0].job_state == "PENDING"


@pytest.mark.parametrize("version", VERSIONS)
def test_tres_per_node_reads_in_one_spelling(version):
    """Difference 5: 24.11 prints ``gres/gpu:a100:2``; both read as 22.05's ``gres:gpu:a100:2``."""
    raw = {j["job_id"]: j["tres_per_node"] for j in _load(f"squeue_{version}.json")["jobs"]}
    assert raw[1] == ("gres:gpu:a100:2" if version == "22.05" else "gres/gpu:a100:2")
    jobs = {j.job_id: j for j in read_jobs(_load(f"squeue_{version}.json"))}
    read = (jobs[1].tres_per_node, jobs[5].tres_per_node, jobs[4].tres_per_node)
    assert read == ("gres:gpu:a100:2", "gres:gpu:1", "")


@pytest.mark.parametrize("version", VERSIONS)
def test_show_config_reads_indexed_keys_by_their_plain_name(version):
    """Difference 6: 24.11 prints list-valued keys indexed (``PrologSlurmctld[0] = ...``)."""
    text = (DATA / f"show_config_{version}.txt").read_text()
    v = parse_version((DATA / f"version_{version}.txt").read_text())
    conf = show_config(text, v)
    assert "cred_expire=10" in conf["AuthInfo"] and conf["JobRequeue"] == "1"
    hooks = "PrologSlurmctld[0] = /etc/a.sh\nPrologSlurmctld[1] = /etc/b.sh\nEpilogSlurmctld = /etc/c.sh\n"
    conf = show_config(text + hooks, v)
    if version != "22.05":
        assert conf["PrologSlurmctld"] == "/etc/a.sh,/etc/b.sh" and "SlurmctldHost" in conf
    else:
        assert conf["PrologSlurmctld"] == "(null)" and "SlurmctldHost[0]" in conf  # 22.05 prints unset keys
    assert conf["EpilogSlurmctld"] == ("(null)" if version == "22.05" else "/etc/c.sh")


@pytest.mark.parametrize("version", VERSIONS)
def test_one_bad_record_can_be_skipped(version, caplog):
    """A record that cannot be read is reported by field and, when the caller asks, left out (the others stay)."""
    doc = copy.deepcopy(_load(f"squeue_{version}.json"))
    doc["jobs"][1]["tres_per_node"] = f"gres:gpu:a100:x{version}"  # a problem of its own per version: logged once
    with pytest.raises(SlurmOutputError, match=r"jobs\[1\]\.tres_per_node"):
        read_jobs(doc)
    with caplog.at_level(logging.WARNING):
        kept = read_jobs(doc, skip_bad=True)
    assert [j.job_id for j in kept] == [1, 3, 4, 5] and "jobs[1].tres_per_node" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the same bad record read again (jobctl, the next tick): not logged again
        assert [j.job_id for j in read_jobs(doc, skip_bad=True)] == [1, 3, 4, 5]
        snapshot_from_json(_load(VERSIONS[version]), doc, 0.0)
    assert "tres_per_node" not in caplog.text  # the snapshot shares the one once-logger (slurm/reader.log_skipped)
    parsed = read_records(doc, "squeue --json", "jobs", on_bad=lambda exc: None)
    assert len(parsed.records) == 4 and parsed.bad[0].field == "jobs[1].tres_per_node"


def test_slurm_errors_in_the_document_are_raised():
    doc = _load("squeue_24.11.json")
    doc["errors"] = [{"description": "Unable to contact slurm controller"}]
    with pytest.raises(SlurmOutputError, match="Unable to contact"):
        read_jobs(doc)


@pytest.mark.slurm
def test_a_job_name_that_is_not_utf8_does_not_break_the_snapshot(devcluster_factory):
    """Slurm prints a job's name as the user's bytes; they are decoded with replacement at the edge
    (``run_slurm``), so the snapshot reads every job and the name keeps its readable part. On a cluster of its
    own: the job stays in squeue's output for MinJobAge, where a strict decoder elsewhere would trip on it."""
    import os
    import subprocess

    from slurmplan.slurm.backend import SlurmBackend

    devcluster = devcluster_factory({"nodes": [{"name": "c1", "gpu_type": "t4", "gpus": 1, "cpus": 2}]})
    script = devcluster.jobs_dir / "bytes.sh"
    script.write_text("#!/bin/bash\nsleep 60\n")
    name = b"caf\xe9-\xff\xfe-job"
    proc = subprocess.run(
        [b"sbatch", b"--parsable", b"--hold", b"-J", name, str(script).encode()],
        env={**os.environ, **devcluster.env},
        capture_output=True,
        cwd=devcluster.jobs_dir,
    )
    assert proc.returncode == 0, proc.stderr
    job_id = int(proc.stdout.split(b";")[0])
    devcluster.submitted.append(job_id)
    try:
        jobs = {j.job_id: j for j in SlurmBackend(devcluster.env).snapshot().jobs}
        assert job_id in jobs and jobs[job_id].name == "caf\ufffd-\ufffd\ufffd-job"  # seen on 22.05 and 24.11
    finally:
        devcluster.run("scancel", str(job_id))
