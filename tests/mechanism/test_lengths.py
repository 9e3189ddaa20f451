"""Issue 23, eleventh session: the expected remaining time learned from finished jobs' run lengths.

The pure estimate (``mechanism.lengths``), the flagship's ordering and stop pricing with it, and the plumbing that
gives both backends the same figures: the pipeline (shared by the daemon and the simulator) remembers the run
lengths of the jobs that leave, in the tick's state, which the daemon journals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from slurmplan.domain import AllocationProblem, Assignment, Cell, Hints, Job, Reason
from slurmplan.domain import JobState as SlurmState
from slurmplan.mechanism.lengths import KEEP_FINISHED, learned_prior, mean_residual_s, remember_finished
from slurmplan.pipeline import Observed, prune
from slurmplan.policy.base import PolicyConfig
from slurmplan.policy.registry import build_policy
from slurmplan.tick import JobState, ManagedJob, SchedulerState

RNG = np.random.default_rng(7)
AGES = np.array([0.0, 600.0, 1200.0, 2400.0, 3600.0])


def test_short_tailed_lengths_expect_a_job_that_has_run_long_to_end_soon():
    """Log-uniform 6-70 min (the unseen replay-like traces): the expected remaining time falls with age, so a job
    that has run long goes before a newcomer (first come, first served), where the old prior said the opposite."""
    lengths = np.exp(RNG.uniform(np.log(360.0), np.log(4200.0), 2000))
    left = mean_residual_s(lengths, np.zeros(0), AGES, np.full(AGES.size, -1.0))
    assert np.all(np.diff(left) < 0) and 1300 < left[0] < 1800 and left[-1] < 600


def test_heavy_tailed_lengths_keep_least_attained_service():
    """Pareto lengths (LLM and Gavel traces): the expected remaining time grows with age, as the old prior had it."""
    lengths = 360.0 * (1.0 + RNG.pareto(1.5, 2000))
    left = mean_residual_s(lengths, np.zeros(0), AGES, np.full(AGES.size, -1.0))
    assert np.all(np.diff(left) > 0)


def test_running_jobs_count_as_censored_runs_and_nothing_is_claimed_past_the_longest():
    """A sample of finished jobs alone is biased short (the long ones have not finished yet): jobs still running
    count as runs at least as long as their age, which lengthens the estimate. Past the longest run observed the
    fallback (the old prior) stands."""
    finished = np.array([600.0, 900.0, 1200.0])
    alone = mean_residual_s(finished, np.zeros(0), np.array([0.0]), np.array([-1.0]))[0]
    censored = mean_residual_s(finished, np.array([3000.0, 3000.0]), np.array([0.0]), np.array([-1.0]))[0]
    assert alone == 900.0 and censored > alone
    assert mean_residual_s(finished, np.zeros(0), np.array([5000.0]), np.array([-7.0]))[0] == -7.0


def test_too_few_finished_jobs_keep_the_old_prior():
    attained = np.array([0.0, 100.0])
    assert learned_prior(np.array([600.0] * 4), attained, 360.0, 5) is None
    assert learned_prior(None, attained, 360.0, 5) is None
    assert learned_prior(np.array([600.0] * 5), attained, 360.0, 0) is None  # 0: off
    assert learned_prior(np.array([600.0] * 5), attained, 360.0, 5) is not None
    assert len(remember_finished((1.0,) * KEEP_FINISHED, [2.0])) == KEEP_FINISHED


def _two_jobs(finished: np.ndarray | None) -> AllocationProblem:
    """One V100: job 0 has run 25 min; job 1 just arrived; neither told its steps."""
    return AllocationProblem(
        job_ids=(0, 1), cells=(Cell("v100", 1),), throughput=np.array([[10.0], [10.0]]), capacity={"v100": 1},
        steps_remaining=np.ones(2), steps_known=np.zeros(2, bool), attained_time=np.array([1500.0, 0.0]),
        current=np.array([0, -1]), restart_cost_s=np.full(2, 183.0), submit_time=np.zeros(2),
        time_since_start=np.array([1500.0, 0.0]), finished_lengths=finished,
    )  # fmt: skip


def test_a_job_near_the_end_of_the_sites_lengths_is_not_stopped_for_a_newcomer():
    """Every job so far ran 30-40 min. The old prior expects the 25-min job to run 25 min more and the newcomer
    6 min, so it stops the first (on the unseen replay-like traces such stops lost up to 1.2x to plain Slurm);
    learned from the finished jobs, the first has ~10 min left and the newcomer ~35 min: it runs on."""
    finished = RNG.uniform(1800.0, 2400.0, 30)
    old = build_policy(PolicyConfig("slurmplan", "slurmplan", params={"hold_s": 0.0}))
    np.testing.assert_array_equal(old.allocate(_two_jobs(finished)).x[:, 0], [0, 1])
    new = build_policy(PolicyConfig("slurmplan", "slurmplan", params={"hold_s": 0.0, "learn_lengths": 20}))
    alloc = new.allocate(_two_jobs(finished))
    np.testing.assert_array_equal(alloc.x[:, 0], [1, 0])
    assert "(finished jobs)" in alloc.notes[0]
    # with fewer finished jobs than learn_lengths it decides as before
    np.testing.assert_array_equal(new.allocate(_two_jobs(finished[:19])).x[:, 0], [0, 1])


def test_the_pipeline_remembers_the_runs_of_jobs_that_leave(tmp_path: Path):
    """``pipeline.prune`` (both backends' tick) keeps each run length of a job that left: to ``now`` for one running
    at the last tick (at most a round more), none for one that never ran or is still there unfinished (turned
    unmanaged); the daemon's
    journal keeps them, so a restarted daemon or a cron tick learns from the same figures."""
    from slurmplan.control.journal import Journal
    from slurmplan.control.state_store import load_state, save_state

    running = Assignment(job_id=1, reason=Reason.KEPT, cell=Cell("v100", 1))
    jobs = {1: JobState(attained_s=600.0, current=running), 2: JobState(), 3: JobState(attained_s=50.0),
            4: JobState(attained_s=70.0), 5: JobState(attained_s=80.0)}  # fmt: skip
    state = SchedulerState(jobs=jobs, last_tick=1000.0, finished_lengths=(5.0,))
    alive, observed = [_managed(5)], [_observed(3), _observed(5), _observed(4, SlurmState.COMPLETED)]
    out = prune(state, alive, observed, now=1030.0)
    assert out.finished_lengths == (5.0, 630.0, 70.0) and set(out.jobs) == {5}
    # a daemon down for hours does not know when its running job ended: at most a round (360 s) is added
    assert prune(state, alive, observed, now=20000.0).finished_lengths == (5.0, 960.0, 70.0)
    with Journal(tmp_path / "j.db") as j:
        save_state(j, out)
        assert load_state(j).finished_lengths == (5.0, 630.0, 70.0)
        j.state.set("finished_lengths", ["x"])  # a hand-edited journal: forgotten, not fatal
        assert load_state(j).finished_lengths == ()


def _managed(job_id: int) -> ManagedJob:
    return ManagedJob(Job(job_id, state=SlurmState.RUNNING), Hints(managed=True), ())


def _observed(job_id: int, state: SlurmState = SlurmState.RUNNING) -> Observed:
    return Observed(Job(job_id, state=state))


def test_the_simulator_learns_every_finished_run():
    """The simulator goes through the same pipeline: after a run, the state holds one length per job, each the
    time it held GPUs (three one-hour V100 jobs on two V100s, one policy that never stops a job)."""
    from slurmplan.perf.gavel_table import load_gavel_table
    from tests.sim.simkit import hours_job, make_sim

    table = load_gavel_table()
    jobs = [hours_job(table, i, 1.0, arrival=10.0 * i) for i in range(3)]
    sim = make_sim(table, jobs, "v100:2", "fifo")
    result = sim.run()
    assert len(result.jobs) == 3
    assert sorted(round(x) for x in sim.state.finished_lengths) == [3600, 3600, 3600]
