"""``generate.at_load``: a generated history scaled to the work its cluster could have run (issue 27's month)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmplan.domain import ValidationError
from slurmplan.sim.generate import LlmTraceConfig, at_load, llm_trace
from slurmplan.sim.trace import TraceJob, read_trace

DAY_S = 86_400.0


def asked(jobs: list[TraceJob]) -> float:
    return sum(j.gpus * j.duration_s for j in jobs)


def test_the_jobs_ask_for_the_load_and_keep_every_other_draw():
    jobs = llm_trace(LlmTraceConfig(num_jobs=400, rate_per_h=400 / 24, seed=3))
    assert asked(jobs) / (64 * DAY_S) > 1.5  # the generator's mix overloads 64 GPUs: the case this is for
    out = at_load(jobs, 64, DAY_S, 0.8)
    assert asked(out) / (64 * DAY_S) == pytest.approx(0.8, rel=1e-12)
    factor = out[0].duration_s / jobs[0].duration_s
    assert factor < 1
    for a, b in zip(jobs, out, strict=True):
        assert b.duration_s == pytest.approx(a.duration_s * factor, rel=1e-12)
        assert (b.job_id, b.arrival_s, b.gpus, b.model, b.gpu_type, b.extra_hints, b.job_class) == (
            a.job_id, a.arrival_s, a.gpus, a.model, a.gpu_type, a.extra_hints, a.job_class,
        )  # fmt: skip
        if a.deadline_s is None:
            assert b.deadline_s is None
        else:  # the same slack in units of the job's own duration
            slack = (a.deadline_s - a.arrival_s) / a.duration_s
            assert (b.deadline_s - b.arrival_s) / b.duration_s == pytest.approx(slack, rel=1e-9)
    assert any(j.deadline_s is not None for j in jobs)


def test_a_light_trace_is_scaled_up_as_well():
    jobs = [TraceJob(1, 0.0, 2, model="gpt2", duration_s=600.0), TraceJob(2, 10.0, 1, model="gpt2", duration_s=300.0)]
    out = at_load(jobs, 8, 3_600.0, 0.5)
    assert asked(out) == pytest.approx(0.5 * 8 * 3_600.0)
    assert out[0].duration_s / out[1].duration_s == pytest.approx(2.0)


@pytest.mark.parametrize("load", [0.0, -0.5, float("nan"), float("inf")])
def test_a_load_that_is_not_a_positive_share_is_refused_by_name(load: float):
    jobs = [TraceJob(1, 0.0, 1, model="gpt2", duration_s=60.0)]
    with pytest.raises(ValidationError, match="load"):
        at_load(jobs, 8, DAY_S, load)


def test_jobs_given_in_steps_are_refused_by_id():
    jobs = [TraceJob(1, 0.0, 1, model="gpt2", duration_s=60.0), TraceJob(7, 5.0, 1, job_type="A3C", total_steps=1e4)]
    with pytest.raises(ValidationError, match=r"duration_s.*\[7\]"):
        at_load(jobs, 8, DAY_S, 0.8)


def _generate(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "slurmplan.cli", "trace", "generate", *args], capture_output=True, text=True, env=env
    )


def test_trace_generate_load_writes_a_history_that_asks_for_that_share(tmp_path: Path):
    cluster = "a100:2x8,v100:2x8"
    plain, loaded = tmp_path / "plain.jsonl", tmp_path / "loaded.jsonl"
    common = ("llm", "--jobs", "300", "--rate", "30", "--seed", "4", "--cluster", cluster)
    assert _generate(*common, "--out", str(plain)).returncode == 0
    done = _generate(*common, "--load", "0.7", "--out", str(loaded))
    assert done.returncode == 0, done.stderr
    assert f"offered load 0.70 of the 32 GPUs of {cluster}" in done.stdout  # the summary reads the load back
    a, b = read_trace(plain), read_trace(loaded)
    assert [(j.job_id, j.arrival_s, j.gpus, j.model) for j in a] == [
        (j.job_id, j.arrival_s, j.gpus, j.model) for j in b
    ]
    assert asked(list(b)) / asked(list(a)) != pytest.approx(1.0)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("gavel-single", "--jobs", "5", "--load", "0.8"), "--load 0.8: llm or replay-like traces"),
        (("llm", "--jobs", "5", "--load", "-1"), "--load -1.0: a share of the cluster's GPU-hours > 0"),
        (("replay-like", "--jobs", "5", "--cluster", "a100:two"), "a100:two"),
    ],
)
def test_trace_generate_load_refuses_what_it_cannot_scale_and_writes_nothing(args, said, tmp_path: Path):
    out = tmp_path / "t.jsonl"
    done = _generate(*args, "--out", str(out))
    assert done.returncode != 0 and said in done.stderr, done.stderr
    assert not out.exists()
