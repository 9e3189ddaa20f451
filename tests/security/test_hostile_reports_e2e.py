"""Issue 24 item 3 end to end on the site cluster: a user's job writes hostile report lines (``Infinity``, ``1e308``,
another job's id, a framework (``stack``) the model does not know, a report in another user's job's name), and the
daemon keeps scheduling that model's jobs.
"""

from __future__ import annotations

import json
import shlex

import pytest

from slurmplan.control.journal import Journal
from slurmplan.control.reports import load_measurements

pytestmark = pytest.mark.slurm

MODEL = "bert-large"
LINE = {"model": MODEL, "gpu_type": "a100", "gpus": 1, "nodes": 1, "plan": {"dp": 1}, "samples_per_s": 10.0}


def _script(path: str, *lines: str) -> str:
    body = "".join(f"printf '%s\\n' {shlex.quote(line)} >> {path}\n" for line in lines)
    return body + "sleep 2\n"


def test_a_hostile_report_neither_stalls_nor_skews_its_model(hostile) -> None:
    cluster = hostile.job(hostile.sbatch("--comment", "x", script="true"))["cluster"]
    infinity = json.dumps(LINE).replace("10.0", "Infinity")
    huge = json.dumps({**LINE, "samples_per_s": 1e308})
    other_job = json.dumps({**LINE, "job_id": 1})
    bad_stack = json.dumps({**LINE, "stack": "megatron'; drop table measurements; --"})
    victim = hostile.site.sbatch("sleep 300", "--comment", "x")  # root's job: the user must not report for it
    hostile.cancel(victim)
    reports = hostile.reports
    bad = hostile.sbatch(
        "--comment",
        "x",
        script=_script(
            f"{reports}/{cluster}.$SLURM_JOB_ID.jsonl", infinity, huge, other_job, bad_stack, json.dumps(LINE)
        )
        + _script(f"{reports}/{cluster}.{victim}.jsonl", json.dumps({**LINE, "samples_per_s": 99999.0})),
    )
    hostile.wait_state(bad, "COMPLETED", timeout=60)
    job_id = hostile.sbatch("--comment", f"slurmplan:model={MODEL};gpus=1", "--gres=gpu:1")
    job = hostile.ticks_until(job_id, ("RUNNING",))  # priced and started: not "bad hints", not held
    assert "bad hints" not in job["admin_comment"]
    with Journal(hostile.site.journal) as journal:
        measured = [(m.job_id, m.samples_per_s) for m in load_measurements(journal, MODEL)]
    assert measured == [(bad, 10.0)], measured  # only the sound line of the user's own job
    hostile.cancel(job_id)
