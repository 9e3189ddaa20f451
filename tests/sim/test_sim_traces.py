"""Trace files: Gavel's dump is read as-is, our generators are reproducible, bad lines name line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmplan.domain import JobClass, ValidationError
from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.generate import LlmTraceConfig, gavel_trace, llm_trace
from slurmplan.sim.trace import TraceError, TraceJob, parse_lines, read_trace, write_trace

GAVEL_DUMP = Path(__file__).resolve().parents[2].parent / "shared/data/gavel/trace_single-gpu_rate1.5_seed0.jsonl"
"""The shared data beside the checkout (``../shared``), where CI and every session have it."""


def errors(lines: list[str]) -> TraceError:
    with pytest.raises(TraceError) as info:
        list(parse_lines(lines, "t.jsonl"))
    return info.value


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"job_id": 1, "arrival_time_s": -5, "job_type": "A3C", "total_steps": 10}', "arrival_time_s"),
        ('{"job_id": 1, "job_type": "A3C"}', "total_steps"),
        ('{"job_id": 1, "job_type": "A3C", "total_steps": "ten"}', "total_steps"),
        ('{"job_id": 1, "total_steps": 10}', "job_type"),
        ('{"job_id": 1, "job_type": "A3C", "total_steps": 10, "job_class": "gold"}', "job_class"),
        ('{"job_id": 1, "job_type": "A3C", "total_steps": 10, "gpuz": 2}', "gpuz"),
        ('{"job_id": 1, "model": "gpt", "duration_s": 10, "hints": {"min_gpus": 0}}', "hints.min_gpus"),
        ('{"job_id": 1, "model": "gpt", "duration_s": 10, "hints": {"stack": "jax"}}', "hints.stack"),
        ('{"job_id": 1, "model": "gpt", "duration_s": 10, "hints": {"stack": 3}}', "hints.stack"),
        ('{"job_id": 1, "job_type": "A3C", "total_steps": 10, "scale_factor": true}', "scale_factor"),
        ('{"job_id": 1, "job_type": "A3C", "total_steps": 10', "line"),
    ],
)
def test_a_bad_line_is_reported_with_its_number_and_field(line: str, field: str):
    good = '{"job_id": 0, "job_type": "A3C", "total_steps": 10}'
    err = errors([good, "", "# a comment", line])
    assert err.field == field
    assert err.where == "t.jsonl:4"
    assert "t.jsonl:4" in str(err) and field in str(err)


def test_duplicate_ids_are_refused():
    line = '{"job_id": 0, "job_type": "A3C", "total_steps": 10}'
    assert errors([line, line]).field == "job_id"


def test_round_trip_is_exact(tmp_path: Path):
    jobs = [
        TraceJob(0, 0.1 + 0.2, 2, job_type="LM (batch size 5)", total_steps=1 / 3, in_window=False),
        TraceJob(
            1,
            5.0,
            8,
            model="gpt3-1.3b",
            gpu_type="a100",
            duration_s=3600.0,
            account="nlp",
            job_class=JobClass.GUARANTEED,
            deadline_s=9000.5,
            extra_hints={"min_gpus": 4, "max_gpus": 16, "stack": "deepspeed"},
        ),
    ]
    write_trace(jobs, tmp_path / "t.jsonl")
    assert read_trace(tmp_path / "t.jsonl") == tuple(jobs)
    # the stack reaches the hints the simulated daemon plans with, as a user's stack= hint does
    assert read_trace(tmp_path / "t.jsonl")[1].hints().stack == "deepspeed"


def test_a_bad_stack_names_the_field_and_the_allowed_frameworks():
    err = errors(['{"job_id": 1, "model": "gpt", "duration_s": 10, "hints": {"stack": "Megatron-LM"}}'])
    assert err.field == "hints.stack" and "megatron, deepspeed, ddp, fsdp" in str(err)


@pytest.mark.skipif(not GAVEL_DUMP.exists(), reason="shared Gavel data not present")
def test_gavel_generator_reproduces_gavels_own_dump_bit_for_bit(table):
    dump = read_trace(GAVEL_DUMP)
    ours = gavel_trace(table, len(dump), 1.5, seed=0, window=(0, 100))
    assert tuple(ours) == dump
    assert sum(j.in_window for j in dump) == 100


def test_continuous_multiple_has_gavels_scale_factor_mix(table):
    jobs = gavel_trace(table, 4000, 3.0, multi_gpu=True, seed=1)
    share = {k: sum(j.gpus == k for j in jobs) / len(jobs) for k in (1, 2, 4, 8)}
    assert share[1] == pytest.approx(0.70, abs=0.03)
    assert share[2] + share[4] == pytest.approx(0.25, abs=0.03)
    assert share[8] == pytest.approx(0.05, abs=0.015)
    distributed = set(table.distributed_types())
    assert all(j.job_type in distributed for j in jobs if j.gpus > 1)


def test_llm_trace_is_deterministic_and_mixes_accounts_and_classes():
    config = LlmTraceConfig(num_jobs=300, models=("m1", "m2"), seed=7)
    a, b = llm_trace(config), llm_trace(config)
    assert a == b
    assert len({j.account for j in a}) == 4
    assert any(j.job_class is JobClass.GUARANTEED for j in a)
    assert any(j.deadline_s is not None for j in a)
    assert all(j.model in ("m1", "m2") and j.duration_s > 0 for j in a)
    assert llm_trace(LlmTraceConfig(num_jobs=300, models=("m1", "m2"), seed=8)) != a


def test_cluster_spec(tmp_path: Path):
    spec = parse_cluster("a100:80x4,a40:160x2,a10:160x2,v100:20x16")
    assert spec.total_gpus == 1280 and spec.gpus_by_type()["v100"] == 320
    assert len(spec.nodes()) == 420
    for bad in ("a100", "a100:0", "a100:2,a100:3", "a100:2y4"):
        with pytest.raises(ValidationError):
            parse_cluster(bad)


def test_gavel_table_rejects_what_it_cannot_read(tmp_path: Path):
    from slurmplan.perf.gavel_table import load_gavel_table

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"v100": {"('A3C', 1)": -1}}))
    with pytest.raises(ValidationError, match="non-negative"):
        load_gavel_table(bad)
