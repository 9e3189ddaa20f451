"""Fuzz: random bytes in every field of the jobs' and nodes' JSON that a user controls never stop the snapshot, on
the recorded output of each Slurm version the reader knows (22.05's ``sinfo``, 24.11's and 26.05's ``scontrol show
nodes``).

A user names jobs, writes comments, picks account, partition and work directory, and (through a hostile site
or a Slurm bug) may put anything there. The bytes are fed through the same path as real output: encoded into
the JSON document, decoded as :func:`slurmplan.slurm.run.decode` does, parsed, and turned into a snapshot by
:func:`snapshot_from_json`. Property: the snapshot never fails as a whole; every other job is still there; a
record that cannot be read is skipped and logged once (a second snapshot of the same document logs nothing).
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.slurm.backend import snapshot_from_json
from slurmplan.slurm.run import decode

DATA = Path(__file__).resolve().parents[1] / "slurm" / "data"
SINFO = json.loads((DATA / "sinfo_22.05.json").read_text())
SQUEUE = json.loads((DATA / "squeue_22.05.json").read_text())
DOCUMENTS = {
    "22.05": (SINFO, SQUEUE),
    # 24.11: the nodes from ``scontrol show nodes --json`` (``Reader.nodes_argv``), the jobs in 24.11's shapes
    "24.11": (
        json.loads((DATA / "show_nodes_24.11.json").read_text()),
        json.loads((DATA / "squeue_24.11.json").read_text()),
    ),
    "26.05": (
        json.loads((DATA / "show_nodes_26.05.json").read_text()),
        json.loads((DATA / "squeue_26.05.json").read_text()),
    ),
}
"""Recorded output of each Slurm version the reader knows: each version's records take their own path through it."""
DOCUMENTS_ORDER = sorted(DOCUMENTS)

USER_JOB_FIELDS = ("name", "comment", "account", "partition", "current_working_directory", "admin_comment")
"""What a user sets on a job (``admin_comment`` too: job_submit.lua copies user text there)."""
USER_NODE_FIELDS = ("partitions", "features", "active_features", "reason")

_values = st.one_of(
    st.binary(max_size=64),  # raw bytes, as Slurm prints them into its JSON
    st.text(max_size=64),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _through_the_wire(doc: dict, patches: list[tuple[str, int, str, object]]) -> dict:
    """The document as the daemon reads it: bytes values spliced into the JSON text raw, then decoded."""
    doc = copy.deepcopy(doc)
    raw: dict[str, bytes] = {}
    for i, (key, index, field, value) in enumerate(patches):
        if isinstance(value, bytes):
            marker = f"@@RAW{i}@@"
            raw[marker] = _slurm_escaped(value)
            value = marker
        doc[key][index % len(doc[key])][field] = value
    text = json.dumps(doc).encode()
    for marker, value in raw.items():
        text = text.replace(marker.encode(), value)
    return json.loads(decode(text))


def _slurm_escaped(value: bytes) -> bytes:
    """Bytes as Slurm 22.05 prints them in a JSON string: quote, backslash and control bytes escaped
    (``\\u001b``, seen on the dev cluster), every other byte raw, valid UTF-8 or not."""
    out = bytearray()
    for b in value:
        if b < 0x20 or b == 0x7F:
            out += f"\\u{b:04x}".encode()
        elif b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        else:
            out.append(b)
    return bytes(out)


_job_patch = st.tuples(st.just("jobs"), st.integers(0, 3), st.sampled_from(USER_JOB_FIELDS), _values)
_node_patch = st.tuples(st.just("nodes"), st.integers(0, 3), st.sampled_from(USER_NODE_FIELDS), _values)


@pytest.mark.parametrize("version", DOCUMENTS_ORDER)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(_job_patch, max_size=4), nodes=st.lists(_node_patch, max_size=2))
def test_user_bytes_never_stop_the_snapshot(version, jobs, nodes, caplog):
    SINFO, SQUEUE = DOCUMENTS[version]  # noqa: N806 (the module's names, per version)
    patches = jobs + nodes
    squeue = _through_the_wire(SQUEUE, [p for p in patches if p[0] == "jobs"])
    sinfo = _through_the_wire(SINFO, [p for p in patches if p[0] == "nodes"])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slurmplan.slurm.backend"):
        snap = snapshot_from_json(sinfo, squeue, now=1.0)
    touched_jobs = {p[1] % len(SQUEUE["jobs"]) for p in jobs}
    untouched = {j["job_id"] for i, j in enumerate(SQUEUE["jobs"]) if i not in touched_jobs}
    seen = {j.job_id for j in snap.jobs}
    assert untouched <= seen, "a job nobody touched was dropped"
    skipped = len(SQUEUE["jobs"]) - len(snap.jobs) + len(SINFO["nodes"]) - len(snap.cluster.nodes)
    first = [r for r in caplog.records if "skipping record" in r.getMessage()]
    assert len(first) <= skipped
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slurmplan.slurm.backend"):
        again = snapshot_from_json(sinfo, squeue, now=2.0)
    assert [r for r in caplog.records if "skipping record" in r.getMessage()] == [], "logged twice"
    assert {j.job_id for j in again.jobs} == seen
    for job in snap.jobs:
        for text in (job.name, job.comment, job.account, job.partition, job.admin_comment):
            assert isinstance(text, str)
            text.encode("utf-8")  # no lone surrogates: the journal (SQLite) must be able to store it


@pytest.mark.parametrize("version", DOCUMENTS_ORDER)
def test_invalid_utf8_in_a_name_decodes_with_replacement(version):
    SINFO, SQUEUE = DOCUMENTS[version]  # noqa: N806
    squeue = _through_the_wire(SQUEUE, [("jobs", 0, "name", b"ok\xffbad")])
    snap = snapshot_from_json(SINFO, squeue, now=0.0)
    assert snap.jobs[0].name == "ok\ufffdbad"
    assert len(snap.jobs) == len(SQUEUE["jobs"])


@pytest.mark.parametrize(
    ("version", "bad_tres"), [("22.05", "gres:gpu:a100:x"), ("24.11", "gres/gpu:a100:x"), ("26.05", "gres/gpu:a100:x")]
)
def test_bad_record_is_skipped_and_named_once(version, bad_tres, caplog):
    SINFO, SQUEUE = DOCUMENTS[version]  # noqa: N806
    squeue = copy.deepcopy(SQUEUE)
    squeue["jobs"][1]["tres_per_node"] = bad_tres
    # an id of its own per version: a record's problem is logged once per process (``reader.log_skipped``)
    squeue["jobs"][1]["job_id"] = 90000 + DOCUMENTS_ORDER.index(version)
    with caplog.at_level(logging.WARNING, logger="slurmplan.slurm.backend"):
        snap = snapshot_from_json(SINFO, squeue, now=0.0)
        snapshot_from_json(SINFO, squeue, now=0.0)
    bad = squeue["jobs"][1]["job_id"]
    assert bad not in {j.job_id for j in snap.jobs}
    assert len(snap.jobs) == len(SQUEUE["jobs"]) - 1
    logged = [r.getMessage() for r in caplog.records if "skipping record" in r.getMessage()]
    assert len(logged) == 1 and f"squeue --json:{bad}" in logged[0] and "tres_per_node" in logged[0]
