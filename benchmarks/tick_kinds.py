"""Where a simulation's CPU goes, by kind of tick and by stage: what issue 27's speed work measures first.

    python benchmarks/tick_kinds.py --days 2                     # bench_sim's trace under LAS
    python benchmarks/tick_kinds.py --days 1 --site              # bench_site_history's month, first day, flagship
    python benchmarks/tick_kinds.py --days 30 --site --fit       # the whole month (the runs each benchmark times)

The trace is the benchmark's own (``bench_sim.scenario``, ``bench_site_history.scenario``): the site's month at its
offered load of 0.8 (before the twenty-fifth session ``--site`` kept the generator's durations, 1.87x the cluster;
``--load 0`` gives that trace back).

Every tick of the run is put in one of four kinds: a round (the policy's LP or search ran), a tick between rounds
that sent actions (an arrival started, a freed GPU refilled), one that sent none, and one between rounds whose
jobs are the same as the tick before's and that sent nothing (nothing at all changed). For each kind it prints
the ticks, their CPU seconds (``time.process_time``: what a machine shared with other work inflates least) and
the CPU of each stage inside and around ``decide``, timed by wrapping the stage functions where the tick calls
them (``replay`` includes the ``plan_round`` and ``deficits`` it calls for refills). Then how many of the rows
between rounds were *steady*: a running job kept on the same Cell and nodes as the tick before, with no action
(the rows a tick that took only the changed jobs would not touch).
The timers add about a microsecond a call, so the stages' sum is a little above the run's CPU.

``--fit`` also fits each tick between rounds' CPU, and each stage's, as a fixed part plus a cost per steady row
and a cost per other row (least squares over the ticks; the timers' cost per call falls in the fixed part): what
a steady row costs, stage by stage, and so how much a tick that skipped its steady rows (issue 27's incremental
tick) could save at most.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from dataclasses import replace

import bench_sim
import bench_site_history
import numpy as np

import slurmplan.mechanism.engine as engine
import slurmplan.pipeline as pipeline
from slurmplan.domain import Reason
from slurmplan.policy.registry import load_policy
from slurmplan.sim.engine import Simulation
from slurmplan.sim.workload import build_workloads
from slurmplan.tick_types import TickOutput

_ENGINE_STAGES = (
    "advance", "build_problem", "running_info", "_allocate", "start_epoch", "align", "received_share", "priorities",
    "plan_round", "replay", "place_round", "assign", "row_notes", "settle", "deficits",
)  # fmt: skip
_PIPELINE_STAGES = ("managed_jobs", "prune", "shape_actions")


class _Timers:
    """CPU seconds per stage label for the tick now running."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()

    def wrap(self, owner: object, name: str, label: str | None = None) -> None:
        inner, key, now = getattr(owner, name), label or name, self.now

        def timed(*args, **kwargs):
            t = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                now[key] += time.process_time() - t

        setattr(owner, name, timed)


def _simulation(days: float, site: bool, policy: str, load: float | None) -> Simulation:
    """The benchmark's own run: ``bench_sim``'s fortnight or, with ``site``, ``bench_site_history``'s month at its
    offered load (``load`` overrides it; 0: the generator's durations), cut to its first ``days``."""
    scene = bench_site_history.scenario(days, policy) if site else bench_sim.scenario(days, policy)
    scene = scene if load is None else replace(scene, load=load)
    jobs, spec, _ = bench_sim.scenario_trace(scene)
    return Simulation(build_workloads(jobs, spec, None), spec, load_policy(policy), scene.options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=2.0)
    parser.add_argument("--site", action="store_true", help="bench_site_history's cluster and rate")
    parser.add_argument("--policy", default=None, help="default: las, or the flagship with --site")
    parser.add_argument("--fit", action="store_true", help="fit the ticks' and stages' CPU to their rows")
    parser.add_argument(
        "--load", type=float, default=None,
        help="the trace's offered load (default: the benchmark's own; 0: the generator's durations)",
    )  # fmt: skip
    args = parser.parse_args()
    timers = _Timers()
    for name in _ENGINE_STAGES:
        timers.wrap(engine, name)
    for name in _PIPELINE_STAGES:
        timers.wrap(pipeline, name)
    sim = _simulation(args.days, args.site, args.policy or ("slurmplan" if args.site else "las"), args.load)
    timers.wrap(sim.backend, "snapshot", "sim snapshot")
    timers.wrap(sim.journal, "apply", "apply (journal + sim)")
    between: list[tuple[float, int, int, dict[str, float]]] = []  # between rounds: CPU, steady, other, stages
    kinds: dict[str, list] = defaultdict(lambda: [0, 0.0, Counter(), 0])
    rows: Counter[str] = Counter()
    step, last = sim.step, {"ids": None, "out": {}}

    def timed_step() -> TickOutput:
        timers.now.clear()
        t = time.process_time()
        out = step()
        spent = time.process_time() - t
        ids = tuple(a.job_id for a in out.assignments)
        kind = "round" if out.new_round else "between, actions" if out.actions else "between, no action"
        if kind == "between, no action" and ids == last["ids"]:
            kind = "between, nothing changed"
        if not out.new_round:
            steady, every = rows["steady"], rows["all"]
            _count_rows(out, last["out"], rows)
            steady, every = rows["steady"] - steady, rows["all"] - every
            between.append((spent, steady, every - steady, dict(timers.now)))
        last["ids"], last["out"] = ids, {a.job_id: a for a in out.assignments}
        entry = kinds[kind]
        entry[0] += 1
        entry[1] += spent
        entry[2].update(timers.now)
        entry[3] += len(ids)
        return out

    sim.step = timed_step  # type: ignore[method-assign]
    cpu = time.process_time()
    result = sim.run()
    total = time.process_time() - cpu
    in_ticks = sum(k[1] for k in kinds.values())
    print(f"{result.ticks} ticks, {result.rounds} rounds, CPU {total:.1f} s (in ticks {in_ticks:.1f} s)")
    for kind, (n, spent, stages, jobs) in sorted(kinds.items()):
        share, per_tick = 100 * spent / total, 1000 * spent / n
        print(f"\n{kind}: {n} ticks, {spent:.2f} s CPU ({share:.0f} %), {per_tick:.2f} ms a tick, ", end="")
        print(f"{jobs / n:.0f} jobs a tick")
        for label, s in stages.most_common():
            if s >= 0.005 * spent:
                print(f"   {label:24s} {s:7.2f} s  {1000 * s / n:6.3f} ms a tick")
    steady = rows["steady"]
    print(f"\nrows between rounds: {rows['all']}, steady {steady} ({100 * steady / max(1, rows['all']):.1f} %)")
    if args.fit and len(between) > 3:
        _print_fit(between, total)


def fit_rows(cpu: np.ndarray, steady: np.ndarray, other: np.ndarray) -> tuple[float, float, float]:
    """``(fixed, per steady row, per other row)``: the least-squares fit of ``cpu`` (one value a tick)."""
    design = np.column_stack([np.ones_like(cpu), steady, other])
    (fixed, per_steady, per_other), *_ = np.linalg.lstsq(design, cpu, rcond=None)
    return float(fixed), float(per_steady), float(per_other)


def _print_fit(ticks: list[tuple[float, int, int, dict[str, float]]], total: float) -> None:
    """CPU of a tick between rounds (and of each stage in it) = fixed + per steady row x steady rows + per other
    row x other rows, fitted by least squares over the ticks."""
    cpu = np.array([t[0] for t in ticks])
    steady, other = np.array([t[1] for t in ticks], dtype=float), np.array([t[2] for t in ticks], dtype=float)
    fixed, per_steady, per_other = fit_rows(cpu, steady, other)
    on_steady = per_steady * steady.sum()
    print(f"\nfit over {len(cpu)} ticks between rounds ({cpu.sum():.2f} s CPU): fixed {1e3 * fixed:.3f} ms a tick,")
    print(f"   {1e6 * per_steady:.1f} us a steady row, {1e6 * per_other:.1f} us another row;")
    print(f"   the steady rows' part {on_steady:.2f} s: {100 * on_steady / cpu.sum():.0f} % of those ticks,", end="")
    print(f" {100 * on_steady / total:.0f} % of the run")
    stages = sorted({name for t in ticks for name in t[3]})
    fits = []
    for name in stages:
        f0, f1, f2 = fit_rows(np.array([t[3].get(name, 0.0) for t in ticks]), steady, other)
        fits.append((f1, f0, f2, name))
    print("   by stage (fixed ms a tick, us a steady row, us another row):")
    for f1, f0, f2, name in sorted(fits, reverse=True):
        if abs(f1) * steady.sum() >= 0.005 * on_steady:
            print(f"   {name:24s} {1e3 * f0:7.3f} {1e6 * f1:7.2f} {1e6 * f2:7.1f}")


def _count_rows(out: TickOutput, before: dict, rows: Counter[str]) -> None:
    """Count the tick's rows, and the steady ones: kept on the same Cell and nodes as the tick before, no action."""
    acted = {a.job_id for a in out.actions}
    for a in out.assignments:
        rows["all"] += 1
        b = before.get(a.job_id)
        same = b is not None and b.reason is Reason.KEPT and b.cell == a.cell and b.nodes == a.nodes
        rows["steady"] += a.reason is Reason.KEPT and same and a.job_id not in acted


if __name__ == "__main__":
    main()
