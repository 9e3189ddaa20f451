"""Traces small enough to work out by hand: the simulator must get exactly those numbers."""

from __future__ import annotations

import math

import pytest

from slurmplan.sim.metrics import summarize

from .simkit import RESNET, hours_job, run


def by_id(result):
    return {j.job_id: j for j in result.jobs}


def test_one_job_runs_alone_at_its_table_throughput(table):
    res = run(table, [hours_job(table, 0, 1.0)], "v100:1", "las")
    job = by_id(res)[0]
    assert job.state == "completed"
    assert job.first_start_s == 0.0
    assert job.jct_s == pytest.approx(3600.0, rel=1e-9)
    assert job.restarts == 0
    assert summarize(res)["utilization"] == pytest.approx(1.0)


def test_one_job_on_a_slower_type_takes_the_ratio_longer(table):
    res = run(table, [hours_job(table, 0, 1.0)], "k80:1", "las")
    ratio = table.throughput(RESNET, 1, "v100") / table.throughput(RESNET, 1, "k80")
    assert by_id(res)[0].jct_s == pytest.approx(3600.0 * ratio, rel=1e-9)


def test_two_jobs_contending_under_fifo_run_one_after_the_other(table):
    jobs = [hours_job(table, 0, 1.0), hours_job(table, 1, 1.0, arrival=10.0)]
    res = run(table, jobs, "v100:1", "slurm_fifo")
    got = by_id(res)
    assert got[0].finish_s == pytest.approx(3600.0)
    # the second starts the moment the first completes (the completion is an event tick)
    assert got[1].first_start_s == pytest.approx(3600.0)
    assert got[1].finish_s == pytest.approx(7200.0)
    assert summarize(res)["avg_jct_h"] == pytest.approx((3600 + 7190) / 2 / 3600)


def test_two_jobs_contending_under_las_share_the_gpu(table):
    jobs = [hours_job(table, 0, 1.0), hours_job(table, 1, 1.0)]
    free = run(table, jobs, "v100:1", "las", cost=0.0)
    # with no reconfiguration cost the GPU is never idle: 2 h of work ends at 2 h
    assert max(j.finish_s for j in free.jobs) == pytest.approx(7200.0)
    # time sharing means both finish late (FIFO would finish one at 1 h)
    assert min(j.finish_s for j in free.jobs) > 3600.0
    assert sum(j.restarts for j in free.jobs) >= 2
    costly = run(table, jobs, "v100:1", "las", cost=78.0)
    restarts = sum(j.restarts for j in costly.jobs)
    # each restart costs 78 s of GPU time with no progress
    assert max(j.finish_s for j in costly.jobs) == pytest.approx(7200.0 + 78.0 * restarts, abs=1.0)


def test_a_job_that_fits_nowhere_stays_pending_and_the_rest_completes(table):
    jobs = [hours_job(table, 0, 1.0, gpus=8), hours_job(table, 1, 0.5)]
    res = run(table, jobs, "v100:4", "las")
    got = by_id(res)
    assert got[0].state == "pending" and got[0].first_start_s is None
    assert got[0].last_reason == "unschedulable"
    assert got[1].finish_s == pytest.approx(1800.0)
    summary = summarize(res)
    assert summary["unfinished"] == 1 and summary["finished"] == 1


def test_an_unmeetable_deadline_is_counted_as_missed(table):
    jobs = [
        hours_job(table, 0, 2.0, deadline_s=3600.0),  # needs 2 h, has 1 h
        hours_job(table, 1, 0.5, deadline_s=36000.0),
    ]
    res = run(table, jobs, "v100:1,p100:1", "las")
    summary = summarize(res)
    assert summary["deadline_jobs"] == 2
    assert summary["deadline_misses"] == 1
    assert by_id(res)[0].finish_s > 3600.0


def test_every_finished_job_did_exactly_its_work(table):
    jobs = [hours_job(table, i, 0.5 + 0.25 * i, arrival=600.0 * i) for i in range(6)]
    res = run(table, jobs, "v100:2,k80:2", "las", cost=0.0)
    for j in res.jobs:
        assert j.finished
        # never faster than alone on the fastest type
        assert j.jct_s >= j.dedicated_s * (1 - 1e-9)
    assert not math.isnan(summarize(res)["ftf_mean"])


def test_the_daemon_tick_grid_delays_starts_but_not_completions(table):
    jobs = [hours_job(table, 0, 1.0), hours_job(table, 1, 0.5, arrival=10.0), hours_job(table, 2, 1.0, arrival=20.0)]
    res = run(table, jobs, "v100:1", "slurm_fifo", tick_s=45.0)
    got = by_id(res)
    assert got[0].finish_s == pytest.approx(3600.0)  # completions are exact
    # job 1 is seen at the first tick after 3600 on the 45 s grid (3600 = 80 x 45, so at once)
    assert got[1].first_start_s == pytest.approx(3600.0)
    assert got[1].finish_s == pytest.approx(5400.0)
    # job 1 ends at 5400 = 120 x 45: again on the grid; job 2 follows it at once
    assert got[2].first_start_s == pytest.approx(5400.0)


def test_a_start_waits_for_the_next_tick_when_a_job_ends_between_ticks(table):
    jobs = [hours_job(table, 0, 1000 / 3600), hours_job(table, 1, 0.5, arrival=1.0)]
    res = run(table, jobs, "v100:1", "slurm_fifo", tick_s=300.0)
    got = by_id(res)
    assert got[0].finish_s == pytest.approx(1000.0)
    assert got[1].first_start_s == pytest.approx(1200.0)  # next tick of the 300 s grid


def test_a_model_job_runs_at_the_performance_models_throughput():
    from slurmplan.sim.trace import TraceJob

    from .simkit import run_jobs

    job = TraceJob(0, 0.0, 4, model="gpt2-1.5b", gpu_type="a100", duration_s=3600.0)
    res = run_jobs([job], "a100:1x4", "slurm_fifo")
    (rec,) = res.jobs
    assert rec.state == "completed"
    # slurm_fifo runs the user's own request, so the job takes exactly its duration
    assert rec.jct_s == pytest.approx(3600.0, rel=1e-6)
    assert rec.dedicated_s == pytest.approx(3600.0, rel=1e-9)


def test_without_arrival_ticks_an_arrival_waits_for_the_next_round(table):
    jobs = [hours_job(table, 0, 1.0), hours_job(table, 1, 0.5, arrival=100.0)]
    seen = run(table, jobs, "v100:1,k80:1", "las", arrival_ticks=False)
    assert by_id(seen)[1].first_start_s == pytest.approx(360.0)  # the next round boundary
    eager = run(table, jobs, "v100:1,k80:1", "las")
    assert by_id(eager)[1].first_start_s <= 360.0


def test_utilization_counts_gpus_freed_between_ticks_as_idle(table):
    # one job of 1000 s on a 1-GPU cluster, then nothing until a second job arrives at 3000 s
    jobs = [hours_job(table, 0, 1000 / 3600), hours_job(table, 1, 1000 / 3600, arrival=3000.0)]
    res = run(table, jobs, "v100:1", "slurm_fifo", tick_s=300.0)
    got = by_id(res)
    busy = 1000.0 + (got[1].finish_s - got[1].first_start_s)
    assert summarize(res)["utilization"] == pytest.approx(busy / res.end_s, rel=1e-9)


def test_gavel_rule_round_ticks_only_freed_gpus_wait_for_the_round(table, capsys):
    jobs = [hours_job(table, 0, 1000 / 3600), hours_job(table, 1, 0.5, arrival=1.0)]
    res = run(table, jobs, "v100:1", "slurm_fifo", event_ticks=False, progress=True)
    got = by_id(res)
    assert got[0].finish_s == pytest.approx(1000.0)
    assert got[1].first_start_s == pytest.approx(1080.0)  # 3 x 360 s
    assert res.ticks == res.rounds  # every tick was a round tick


def _idle_while_waiting_s(res, gpus: int) -> float:
    """GPU-seconds left idle while at least ``gpus`` jobs were active."""
    ends = [*res.times[1:], res.end_s]
    return sum(
        (gpus - busy) * (end - t)
        for t, end, busy, active in zip(res.times, ends, res.busy_gpus, res.active_jobs, strict=True)
        if active >= gpus
    )


def test_a_moved_job_restarts_at_once_even_with_round_ticks_only(table):
    # LAS moves these jobs between the two types; a move is a signal, then a restart the daemon orders once the
    # job has requeued itself. Ticking only at rounds must not leave the GPUs a round idle in between: only a
    # job finishing mid-round may idle its GPU until the round ends (4 jobs: at most 4 rounds;
    # waiting a round per move left them idle about 3.7 GPU-hours here).
    jobs = [hours_job(table, i, 1.0 + i % 3, arrival=60.0 * i) for i in range(4)]
    res = run(table, jobs, "v100:1,k80:1", "las", event_ticks=False)
    assert sum(j.reconfigurations for j in res.jobs) >= 2
    assert _idle_while_waiting_s(res, 2) <= 4 * 360.0


def test_a_window_that_outlives_the_arrivals_is_flagged(table):
    # Gavel keeps adding jobs until its measured window is done; a trace that stops at the window's end lets the
    # window's last jobs run on a draining cluster. The summary says which case a run was.
    window = [hours_job(table, i, 2.0, arrival=600.0 * i, in_window=i >= 1) for i in range(3)]
    drained = summarize(run(table, window, "v100:1", "las", stop_when_window_done=True))
    assert drained["arrivals_cover_window"] is False
    later = hours_job(table, 3, 1.0, arrival=10 * 3600.0, in_window=False)
    covered = summarize(run(table, [*window, later], "v100:1", "las", stop_when_window_done=True))
    assert covered["arrivals_cover_window"] is True
    assert summarize(run(table, window[:1], "v100:1", "las"))["arrivals_cover_window"] is True  # no window
