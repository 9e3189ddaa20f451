"""Measured jobs (a site's history without a model) in the trace format and the simulator."""

from __future__ import annotations

import json

import pytest

from slurmplan.sim.cluster import parse_cluster
from slurmplan.sim.trace import TraceError, TraceJob, job_from_dict
from slurmplan.sim.workload import build_workloads

SPEEDS = {"a100": 3.0, "v100": 1.0, "t4": 0.5}


def test_a_measured_job_round_trips_through_its_json_line():
    job = TraceJob(7, 12.0, 2, gpu_type="v100", duration_s=600.0, speeds=SPEEDS, name="train", user="u",
                   partition="gpu", time_limit_s=3600.0)  # fmt: skip
    back = job_from_dict(json.loads(json.dumps(job.to_dict())))
    assert back == job and back.is_measured_job and back.kind == "measured on v100"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"job_id": 1, "gpus": 1, "duration_s": 60}, "job_type"),  # no kind at all
        ({"job_id": 1, "gpus": 1, "duration_s": 60, "speeds": SPEEDS}, "gpu_type"),  # where did it run?
        ({"job_id": 1, "gpus": 1, "gpu_type": "v100", "duration_s": 60, "speeds": {"v100": -1}}, "speeds.v100"),
    ],
)
def test_bad_measured_lines_name_the_field(line, field):
    with pytest.raises(TraceError) as err:
        job_from_dict(line, "t.jsonl:1")
    assert err.value.field == field


def test_time_on_another_type_follows_the_speed_table():
    job = TraceJob(1, 0.0, 2, gpu_type="v100", duration_s=600.0, speeds=SPEEDS)
    (w,) = build_workloads([job], parse_cluster("a100:1x4,v100:1x2,t4:1x1"), None).values()
    by_type = {c.cell.gpu_type: w.work_total / c.throughput for c in w.candidates}
    assert by_type == {"a100": pytest.approx(200.0), "v100": pytest.approx(600.0)}  # t4: one GPU, the job needs 2
    assert w.dedicated_s == pytest.approx(600.0) and w.fastest_s == pytest.approx(200.0)
