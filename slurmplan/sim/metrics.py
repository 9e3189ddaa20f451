"""Metrics of one simulation, computed from its SimResult alone.

Definitions (the papers' where they agree, stated here where they do not):
- JCT = finish - arrival; average, median and p99 over the measured jobs that finished (the ``in_window`` jobs
  when the trace marks a window, as Gavel's README does; every job otherwise). Unfinished jobs are counted apart.
- makespan = last finish among the measured jobs, from t = 0 (Gavel's definition).
- queueing delay = first start - arrival.
- utilization = busy GPU-seconds / (GPUs x time), time-weighted, from the first arrival to the end of the run.
- finish-time fairness (Themis/Gavel rho) = JCT / T_isolated, where T_isolated is the job's dedicated time on its
  requested configuration stretched to a 1/N share of the cluster, N being the time-averaged number of active
  jobs over the job's life: ``T_iso = dedicated * max(1, gpus / (total_gpus / N))``. rho <= 1 is fair.
- reconfigurations per job = restarts (every requeue costs one reconfiguration); type/count changes apart.
- SLA miss = a guaranteed job whose average progress rate over its JCT, ``work / JCT``, is below 95% of its
  requested configuration's throughput, i.e. ``JCT > dedicated / 0.95`` (Rubick's SLA), or that never finished.
- deadline miss = a job with a deadline that finished after it or not at all.
- lower bound = mean over the measured jobs of (wait to the first instant the job can start + its steps / its
  throughput on its fastest GPU type at its own GPU count). Under Gavel's rules (round ticks only) a job can
  first start at the round boundary after its arrival (rounds counted from the first arrival); with the
  daemon's ticks, at its next tick. For fixed-size jobs (Gavel's traces) no schedule, however clairvoyant, beats
  it; an elastic job that scales past its request can (the LLM trace's excess can be negative). *excess* = avg
  JCT - bound is what a policy can still win (nan while any measured job is unfinished).
- elastic bound = the same with each job alone at its fastest candidate of *any* size, type and plan (a model
  job's candidates span N/2..2N GPUs, Crius's counts): the limit for a scheduler that resizes jobs, which the
  fixed-size bound is not (crius beats it on the LLM trace). nan when no measured job can run faster at
  another size (Gavel's table jobs: the two bounds are the same). Like the fixed one it ignores contention:
  every job gets its best configuration the moment it may start. *elastic excess* = avg JCT - elastic bound.
- where the excess goes (finished jobs, hours per job, summing to avg JCT - elastic bound, or - fixed bound
  when no job is elastic): ``lost_queue_h`` waiting past the first start instant, ``lost_off_h`` off GPUs
  between a requeue and the next start, ``lost_restart_h`` restarts x the reconfiguration cost (paid while
  holding GPUs), ``lost_config_h`` running slower than the job's best configuration (size, type, plan).
- arrivals cover the window = jobs kept arriving until the last measured job finished. Gavel keeps adding jobs
  until its window (jobs 4000-5000) is done; a trace that ends with its window lets the cluster drain under the
  window's last jobs, which flatters a saturated policy most. Always true without a window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slurmplan.sim.result import JobRecord, SimResult

SLA_TOLERANCE = 0.95
HOUR = 3600.0


def measured_jobs(result: SimResult) -> list[JobRecord]:
    """The window jobs when the trace marks a window, else all jobs."""
    jobs = list(result.jobs)
    window = [j for j in jobs if j.in_window]
    return window if 0 < len(window) < len(jobs) else jobs


def _step_integral(times: Sequence[float], values: Sequence[float]):
    """A function t -> integral of the step function (times, values) from times[0] to t."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if len(t) == 0:
        return lambda x: 0.0
    cum = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])

    def integral(x: float) -> float:
        i = int(np.searchsorted(t, x, side="right")) - 1
        if i < 0:
            return 0.0
        return float(cum[i] + v[i] * (x - t[i]))

    return integral


def utilization(result: SimResult, start: float | None = None, end: float | None = None) -> float:
    if not result.times or result.total_gpus <= 0:
        return 0.0
    start = result.times[0] if start is None else start
    end = result.end_s if end is None else end
    if end <= start:
        return 0.0
    busy = _step_integral(result.times, result.busy_gpus)
    return (busy(end) - busy(start)) / (result.total_gpus * (end - start))


def fairness(result: SimResult, jobs: Sequence[JobRecord]) -> np.ndarray:
    """Finish-time fairness rho of every finished job (see the module docstring)."""
    active = _step_integral(result.times, result.active_jobs)
    out = []
    for j in jobs:
        if not j.finished or not math.isfinite(j.dedicated_s) or j.jct_s <= 0:
            continue
        n_avg = max(1.0, (active(j.finish_s) - active(j.arrival_s)) / j.jct_s)
        share = result.total_gpus / n_avg
        t_iso = j.dedicated_s * max(1.0, j.gpus / share)
        out.append(j.jct_s / t_iso)
    return np.asarray(out, dtype=float)


def first_wait_s(result: SimResult, jobs: Sequence[JobRecord]) -> np.ndarray:
    """Each job's wait from its arrival to the first instant it can start (the next point of the start grid,
    counted from the first arrival; 0 without a grid)."""
    if not jobs:
        return np.zeros(0)
    origin = min(j.arrival_s for j in result.jobs)
    grid = result.start_grid_s
    if grid <= 0:
        return np.zeros(len(jobs))
    return np.array([origin + math.ceil((j.arrival_s - origin) / grid - 1e-9) * grid - j.arrival_s for j in jobs])


def lower_bound_s(result: SimResult, jobs: Sequence[JobRecord]) -> np.ndarray:
    """Each job's physical limit on its JCT at its own GPU count (see the module docstring), in seconds."""
    return first_wait_s(result, jobs) + np.array([j.fastest_s for j in jobs], dtype=float)


def elastic_bound_s(result: SimResult, jobs: Sequence[JobRecord]) -> np.ndarray:
    """Each job's physical limit on its JCT at its best size of any candidate (see the module docstring)."""
    best = [j.fastest_s if math.isnan(j.best_s) else min(j.best_s, j.fastest_s) for j in jobs]
    return first_wait_s(result, jobs) + np.array(best, dtype=float)


def excess_parts(result: SimResult, jobs: Sequence[JobRecord], elastic: bool) -> dict[str, float]:
    """Mean hours per finished job lost to queueing, time off GPUs, restarts and a slower configuration."""
    done = [j for j in jobs if j.finished and j.first_start_s is not None]
    if not done:
        return {k: math.nan for k in ("lost_queue_h", "lost_off_h", "lost_restart_h", "lost_config_h")}
    wait = first_wait_s(result, done)
    limit = elastic_bound_s(result, done) if elastic else lower_bound_s(result, done)
    queue = np.array([j.queue_s for j in done]) - wait
    off = np.array([j.finish_s - j.first_start_s - j.run_s for j in done])
    restart = np.array([min(j.restarts * result.reconfig_cost_s, j.run_s) for j in done])
    config = np.array([j.run_s for j in done]) - restart - (limit - wait)
    return {
        "lost_queue_h": float(queue.mean()) / HOUR,
        "lost_off_h": float(off.mean()) / HOUR,
        "lost_restart_h": float(restart.mean()) / HOUR,
        "lost_config_h": float(config.mean()) / HOUR,
    }


def _is_elastic(jobs: Sequence[JobRecord]) -> bool:
    """True when some measured job can run faster at another size than at its own (the bounds differ)."""
    return any(not math.isnan(j.best_s) and j.best_s < j.fastest_s * (1 - 1e-9) for j in jobs)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def summarize(result: SimResult) -> dict[str, float | int | str]:
    """One flat dict of every metric (hours for times), ready for JSON, CSV and tables."""
    jobs = measured_jobs(result)
    done = [j for j in jobs if j.finished]
    jct = np.array([j.jct_s for j in done]) / HOUR
    queue = np.array([j.queue_s for j in jobs if j.first_start_s is not None]) / HOUR
    rho = fairness(result, done)
    guaranteed = [j for j in jobs if j.job_class == "guaranteed"]
    sla_miss = sum(1 for j in guaranteed if not j.finished or j.jct_s > j.dedicated_s / SLA_TOLERANCE)
    with_deadline = [j for j in jobs if j.deadline_s is not None]
    deadline_miss = sum(1 for j in with_deadline if not j.finished or j.finish_s > j.deadline_s)
    makespan = max((j.finish_s for j in done), default=math.nan) / HOUR
    windowed = len(jobs) < len(result.jobs)
    window_end = result.end_s if len(done) < len(jobs) else max((j.finish_s for j in done), default=0.0)
    bound = lower_bound_s(result, jobs) / HOUR
    bound_h = float(bound.mean()) if len(bound) else math.nan
    avg = float(jct.mean()) if len(jct) else math.nan
    excess = avg - bound_h if len(done) == len(jobs) else math.nan
    elastic = _is_elastic(jobs)
    elastic_h = float(elastic_bound_s(result, jobs).mean()) / HOUR if elastic else math.nan
    elastic_excess = avg - elastic_h if len(done) == len(jobs) else math.nan
    covered = not windowed or max(j.arrival_s for j in result.jobs) >= window_end
    return {
        "policy": result.policy,
        "cluster": result.cluster,
        "reconfig_cost_s": result.reconfig_cost_s,
        "round_s": result.round_s,
        "jobs": len(jobs),
        "finished": len(done),
        "unfinished": len(jobs) - len(done),
        "avg_jct_h": avg,
        "bound_h": bound_h,
        "excess_h": excess,
        "elastic_bound_h": elastic_h,
        "elastic_excess_h": elastic_excess,
        **excess_parts(result, jobs, elastic),
        "median_jct_h": _pct(jct, 50),
        "p99_jct_h": _pct(jct, 99),
        "makespan_h": makespan,
        "avg_queue_h": float(queue.mean()) if len(queue) else math.nan,
        "utilization": utilization(result),
        "ftf_mean": float(rho.mean()) if len(rho) else math.nan,
        "ftf_max": float(rho.max()) if len(rho) else math.nan,
        "ftf_unfair_share": float((rho > 1).mean()) if len(rho) else math.nan,
        "restarts_per_job": float(np.mean([j.restarts for j in jobs])) if jobs else 0.0,
        "type_changes_per_job": float(np.mean([j.reconfigurations for j in jobs])) if jobs else 0.0,
        "guaranteed_jobs": len(guaranteed),
        "sla_misses": sla_miss,
        "deadline_jobs": len(with_deadline),
        "deadline_misses": deadline_miss,
        "arrivals_cover_window": covered,
        "sim_end_h": result.end_s / HOUR,
        "ticks": result.ticks,
        "rounds": result.rounds,
        "refused_actions": result.refused_actions,
        "wall_s": result.wall_s,
        "decide_s": result.decide_s,
    }


def utilization_series(result: SimResult, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Busy fraction averaged over ``points`` equal bins from the first event to the end (for plots)."""
    if not result.times or result.end_s <= result.times[0]:
        return np.zeros(0), np.zeros(0)
    edges = np.linspace(result.times[0], result.end_s, points + 1)
    busy = _step_integral(result.times, result.busy_gpus)
    cum = np.array([busy(e) for e in edges])
    frac = np.diff(cum) / (np.diff(edges) * max(1, result.total_gpus))
    return (edges[:-1] + edges[1:]) / 2, frac
