"""The tick's bookkeeping on an in-memory cluster: classification, journal, roll-forward, modes, the lock.

The backend is the simulator's (Slurm's rules, see ``memcluster``), the decision function a simple stand-in for
the mechanism; the same scenarios run against real Slurm in ``test_e2e_slurm.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from slurmplan.control.config import DaemonConfig
from slurmplan.control.journal import ActionStatus, Journal
from slurmplan.control.lock import TickLock, TickLocked
from slurmplan.control.runner import Daemon
from slurmplan.control.state_store import load_state
from slurmplan.domain import ActionKind, Job, JobState
from slurmplan.formats import BAD_HINTS_PREFIX
from tests.control.memcluster import MemBackend, candidates, simple_decide


def _jobs() -> list[Job]:
    return [
        Job(1, "managed", partition="gpu", admin_comment="slurmplan:model=m;gpus=2"),
        Job(2, "plain", partition="cpu", comment="just a comment"),
        Job(3, "broken", partition="cpu", admin_comment="slurmplan:gpus=zero"),
        Job(4, "by-comment", partition="cpu", comment="slurmplan:gpus=1", held=True),  # held by job_submit.lua
        Job(5, "by-partition", partition="gpu", held=True),  # likewise (a managed partition)
        Job(6, "unpriceable", partition="cpu", admin_comment="slurmplan:model=unknown-model"),
    ]


UNMANAGED = (2, 3, 6)
"""Jobs the daemon leaves alone; submitted with ``--begin`` later, so Slurm itself does not start them either."""


def _cluster(jobs: list[Job]) -> MemBackend:
    return MemBackend(jobs, later=UNMANAGED)


def _daemon(tmp_path: Path, backend: MemBackend, **cfg: object) -> Daemon:
    config = DaemonConfig(
        managed_partitions=("gpu",), database=tmp_path / "j.db", report_dir=tmp_path / "reports", round_s=60, **cfg
    )  # type: ignore[arg-type]
    return Daemon(config, backend=backend, policy="test", candidates_fn=candidates, decide_fn=simple_decide)


def test_tick_manages_only_managed_jobs_and_annotates_bad_hints(tmp_path: Path) -> None:
    backend = _cluster(_jobs())
    plain_before = backend.snapshot().jobs[1]
    assert plain_before.job_id == 2
    report = _daemon(tmp_path, backend).tick()
    assert report.managed == 3 and report.unmanaged == 1
    assert {o.job.job_id for o in report.refused} == {3, 6}
    jobs = backend.jobs
    for job_id in (1, 4, 5):
        assert jobs[job_id].state is JobState.RUNNING and jobs[job_id].nodes == ("a1",)
    assert jobs[1].admin_comment.startswith("slurmplan:model=m;gpus=2 || slurmplan: a100x2 dp2")
    assert backend.snapshot().jobs[1] == plain_before  # unmanaged: untouched
    assert jobs[3].state is JobState.PENDING and not jobs[3].held
    assert jobs[3].admin_comment.startswith(f"slurmplan:gpus=zero || {BAD_HINTS_PREFIX}")
    assert "gpus" in jobs[3].admin_comment
    assert "unknown-model" in jobs[6].admin_comment
    with Journal(tmp_path / "j.db") as j:
        assert [e["event"] for e in j.events.of(3)] == ["bad-hints"]
        assert {a.status for a in j.intents.rows()} == {ActionStatus.APPLIED}
        assert j.jobs.get(3)["hint_error"] and j.jobs.get(1)["managed"] == 1 and j.jobs.get(2)["managed"] == 0

    # second tick: applied actions confirmed, no new annotation, the error not journaled again
    backend.advance(backend.now + 30)
    report = _daemon(tmp_path, backend).tick()
    assert report.actions == ()
    with Journal(tmp_path / "j.db") as j:
        assert {a.status for a in j.intents.rows()} == {ActionStatus.CONFIRMED}
        assert len(j.events.of(3)) == 1


def test_failed_scontrol_stops_the_job_and_is_rolled_forward(tmp_path: Path) -> None:
    backend = _cluster(_jobs()[:1])
    backend.fail = {ActionKind.UPDATE}
    _daemon(tmp_path, backend).tick()
    assert backend.jobs[1].held and backend.jobs[1].state is JobState.PENDING  # not released with a wrong GRES
    with Journal(tmp_path / "j.db") as j:
        statuses = [(a.action.kind, a.status) for a in j.intents.rows()]
    assert statuses[0] == (ActionKind.HOLD, ActionStatus.APPLIED)
    assert all(s == ActionStatus.INTENT for _, s in statuses[1:])

    backend.fail = set()
    backend.advance(backend.now + 5)
    report = _daemon(tmp_path, backend).tick()
    assert report.rolled_forward.applied == 3
    assert backend.jobs[1].state is JobState.RUNNING and backend.jobs[1].nodes == ("a1",)


def test_unreadable_cluster_skips_the_tick(tmp_path: Path) -> None:
    backend = _cluster(_jobs())
    backend.down = True
    report = _daemon(tmp_path, backend).tick()
    assert "Unable to contact" in report.skipped and report.actions == ()
    with Journal(tmp_path / "j.db") as j:
        assert "Unable to contact" in j.ticks.recent()[0]["error"]
        assert load_state(j).round_index == 0


def _killed_child(tmp_path: Path) -> None:
    """Runs in a child: the backend dies by SIGKILL at the first apply, after the intents are committed."""
    backend = _cluster(_jobs()[:1])

    def die(actions: object) -> object:
        os.kill(os.getpid(), signal.SIGKILL)

    backend.apply = die  # type: ignore[method-assign]
    _daemon(tmp_path, backend).tick()


def test_sigkill_between_intent_and_apply_is_rolled_forward(tmp_path: Path) -> None:
    child = multiprocessing.get_context("fork").Process(target=_killed_child, args=(tmp_path,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    with Journal(tmp_path / "j.db") as j:
        assert [a.status for a in j.intents.rows()] == [ActionStatus.INTENT] * 4
        assert load_state(j).jobs[1].current is not None
    backend = _cluster(_jobs()[:1])  # Slurm's view: nothing was applied
    backend.advance(backend.now + 10)
    report = _daemon(tmp_path, backend).tick()
    assert report.rolled_forward.applied == 4
    assert report.actions == ()  # the decision was not taken twice
    assert backend.jobs[1].state is JobState.RUNNING


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    backend = _cluster(_jobs())
    report = _daemon(tmp_path, backend, dry_run=True).tick()
    assert any(a.kind is ActionKind.RELEASE for a in report.actions)
    assert backend.applied == [] and not (tmp_path / "j.db").exists()


def test_shadow_journals_without_acting(tmp_path: Path) -> None:
    backend = _cluster(_jobs())
    report = _daemon(tmp_path, backend, shadow=True).tick()
    assert report.actions and backend.applied == []
    with Journal(tmp_path / "j.db") as j:
        assert {a.status for a in j.intents.rows()} == {ActionStatus.SHADOW}
        assert j.decisions.of(1)[0]["reason"] == "scheduled"


def test_second_tick_is_refused_while_one_runs(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path, _cluster(_jobs()))
    with TickLock(daemon.config.lock_path), pytest.raises(TickLocked, match="another slurmplan tick"):
        daemon.tick()


def test_finished_jobs_leave_the_state(tmp_path: Path) -> None:
    backend = _cluster(_jobs()[:1])
    _daemon(tmp_path, backend).tick()
    backend.complete(1)
    backend.advance(backend.now + 30)
    _daemon(tmp_path, backend).tick()
    with Journal(tmp_path / "j.db") as j:
        assert 1 not in load_state(j).jobs
        assert j.jobs.get(1)["finished_at"] == backend.now and j.jobs.get(1)["state"] == "completed"


def test_loop_survives_a_failing_tick_and_the_next_one_works(tmp_path: Path) -> None:
    backend = _cluster(_jobs()[:1])
    calls: list[int] = []

    def flaky(inp, policy, state):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("solver crashed")
        return simple_decide(inp, policy, state)

    daemon = _daemon(tmp_path, backend)
    daemon.decide_fn = flaky
    seen = []
    assert daemon.run(0.01, max_ticks=2, on_tick=seen.append) == 2
    assert len(seen) == 1 and backend.jobs[1].state is JobState.RUNNING
    with Journal(tmp_path / "j.db") as j:
        ticks = j.ticks.recent()
        assert len(ticks) == 2 and "solver crashed" in ticks[-1]["error"] and not ticks[0]["error"]
