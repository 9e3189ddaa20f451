"""SchedulerState survives the journal unchanged, so a restarted daemon decides as if it never stopped."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
from pathlib import Path

import numpy as np

from slurmplan.control.codec import action_from_dict, action_to_dict
from slurmplan.control.journal import Journal
from slurmplan.control.reports import ingest_reports, load_measurements
from slurmplan.control.state_store import load_state, save_state
from slurmplan.domain import Action, ActionKind, Allocation, Assignment, Cell, Job, Plan, Reason
from slurmplan.tick import JobState, SchedulerState


def _state() -> SchedulerState:
    a100 = Cell("a100", 4, 2)
    running = Assignment(
        job_id=7,
        reason=Reason.MOVED,
        cell=a100,
        plan=Plan(dp=2, pp=2, micro_batch=2, grad_accum=8, checkpointing=True),
        nodes=("a1", "a2"),
        gpus_per_node=2,
        throughput=123.5,
        priority=1.5,
        share=0.75,
        detail="gain 1.4x beat cost",
    )
    extra: dict[str, object] = {}
    names = {f.name for f in dataclasses.fields(SchedulerState)}
    if "allocation" in names:
        extra["allocation"] = Allocation((7, 8), (a100, Cell("v100", 1)), np.array([[0.75, 0.0], [0.0, 1.0]]), "las")
    if "last_tick" in names:
        extra["last_tick"] = 99.5
    if "epoch_start" in names:
        extra["epoch_start"] = 640.0
    if "finished_lengths" in names:  # issue 23: what the expected remaining time is learned from
        extra["finished_lengths"] = (600.0, 3630.5)
    return SchedulerState(
        round_index=17,
        last_round_start=1000.0,
        jobs={
            7: JobState(
                attained_s=360.0,
                attained_by_cell={a100: 300.0, Cell("v100", 1): 60.0},
                epoch_by_cell={a100: 120.0},
                deficit_by_cell={Cell("v100", 1): -45.5, a100: 12.0},
                rounds_scheduled=3,
                current=running,
                signalled_at=1200.0,
                first_seen=10.0,
                reconfigurations=1,
            ),
            8: JobState(first_seen=20.0),
        },
        **extra,  # type: ignore[arg-type]
    )


def test_state_round_trip(tmp_path: Path) -> None:
    state = _state()
    with Journal(tmp_path / "j.db") as j:
        assert load_state(j) == SchedulerState()
        save_state(j, state)
    with Journal(tmp_path / "j.db") as j:
        back = load_state(j)
    assert back.round_index == 17 and back.last_round_start == 1000.0
    assert getattr(back, "epoch_start", 640.0) == 640.0
    assert getattr(back, "finished_lengths", (600.0, 3630.5)) == (600.0, 3630.5)
    assert back.jobs == state.jobs
    if hasattr(state, "allocation"):
        assert back.allocation is not None
        assert back.allocation.job_ids == (7, 8) and np.array_equal(back.allocation.x, state.allocation.x)


def test_saving_forgets_dropped_jobs(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        save_state(j, _state())
        save_state(j, dataclasses.replace(_state(), jobs={8: JobState(first_seen=20.0)}))
        assert set(load_state(j).jobs) == {8}


def test_action_round_trip() -> None:
    a = Action(ActionKind.UPDATE, 3, "a100", 2, 2, ("a1", "a2"), "slurmplan: a100x4 dp4", None, "start")
    assert action_from_dict(json.loads(json.dumps(action_to_dict(a)))) == a


def test_reports_ingested_once_and_bad_lines_skipped(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    line = {"model": "resnet50", "gpu_type": "A100", "gpus": 2, "nodes": 1, "plan": {"dp": 2}, "samples_per_s": 900.0}
    second = json.dumps({**line, "gpus": 1, "plan": {"dp": 1}, "samples_per_s": 470.0})
    (reports / "41.jsonl").write_text(json.dumps(line) + "\nnot json\n" + second[:20])
    jobs = {41: Job(41, user=pwd.getpwuid(os.getuid()).pw_name)}  # the file's owner runs job 41
    with Journal(tmp_path / "j.db") as j:
        assert ingest_reports(j, reports, jobs) == 1
        assert ingest_reports(j, reports, jobs) == 0  # nothing new; the half line waits
        with (reports / "41.jsonl").open("a") as f:
            f.write(second[20:] + "\n")
        assert ingest_reports(j, reports, jobs) == 1
        ms = load_measurements(j, "resnet50")
    assert [(m.gpu_type, m.gpus, m.job_id, m.plan.dp) for m in ms] == [("a100", 2, 41, 2), ("a100", 1, 41, 1)]


def test_a_reports_stack_reaches_the_refit_and_a_journal_from_before_gains_the_column(tmp_path: Path) -> None:
    """The launcher's reports say which framework ran the plan (issue 28); a journal written before the column
    existed gains it on its next insert, and a line naming an unknown framework is skipped like any bad line."""
    reports = tmp_path / "reports"
    reports.mkdir()
    line = {"model": "gpt2-1.5b", "gpu_type": "a100", "gpus": 2, "plan": {"dp": 2}, "samples_per_s": 9.0}
    lines = [{**line, "stack": "ddp"}, {**line, "stack": "jax"}, line]
    (reports / "41.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    jobs = {41: Job(41, user=pwd.getpwuid(os.getuid()).pw_name)}
    with Journal(tmp_path / "j.db") as j:
        j.db.execute("ALTER TABLE measurements DROP COLUMN stack")  # as a journal from before this column
        assert ingest_reports(j, reports, jobs) == 2
        ms = load_measurements(j, "gpt2-1.5b")
    assert [m.stack for m in ms] == ["ddp", None]


def test_report_progress_fields_reach_the_job_source(tmp_path: Path) -> None:
    """Issue 23: ``step``/``checkpoint_step``/``total_steps`` on a report line become the job's progress; a bad
    value skips that one line (named in the log), the others are ingested."""
    from slurmplan.control.observe import SlurmJobSource
    from slurmplan.domain import Job
    from slurmplan.domain import JobState as SlurmState

    reports = tmp_path / "reports"
    reports.mkdir()
    line = {"model": "gpt2", "gpu_type": "t4", "gpus": 1, "plan": {}, "samples_per_s": 5.0, "time": 1.0}
    rows = [{**line, "step": 40, "checkpoint_step": 30, "total_steps": 100}, {**line, "step": "many"},
            {**line, "step": 55, "checkpoint_step": 50, "time": 2.0}]  # fmt: skip
    (reports / "7.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    jobs = {7: Job(7, user=pwd.getpwuid(os.getuid()).pw_name)}  # the file's owner runs job 7
    with Journal(tmp_path / "j.db") as j:
        assert ingest_reports(j, reports, jobs) == 2
        assert j.measurements.progress()[7]["step"] == 55.0
        source = SlurmJobSource((), progress=j.measurements.progress)
        running = Job(job_id=7, name="x", state=SlurmState.RUNNING)
        assert source.progress(running) == 55.0
        pending = dataclasses.replace(running, state=SlurmState.PENDING)
        assert source.progress(pending) == 50.0  # it resumes from its checkpoint
        assert source.progress(dataclasses.replace(running, job_id=8)) == 0.0
