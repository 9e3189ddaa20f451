"""One hash of every tick's decisions on ``bench_sim.py``'s trace: how a speed change shows it decides the same.

    python benchmarks/decision_hash.py --days 1                     # LAS, as bench_sim (2,197 ticks)
    python benchmarks/decision_hash.py --days 0.5 --policy slurmplan # the flagship

Run it on two checkouts (``PYTHONPATH`` set to each) and compare the printed hash: it covers every tick's actions
and assignments (their ``repr``) and the allocation's job ids and X (its bytes), so any changed decision, reason,
detail or share changes it. Issue 27's speed work keeps decisions byte-identical except where equal optima may
be broken differently (``tests/sim/test_equal_optima.py``); this is the check for the identical part.
"""

from __future__ import annotations

import argparse
import hashlib
import time

from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.metrics import summarize
from slurmplan.sim.workload import build_workloads
from slurmplan.tick_types import TickOutput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--policy", default="las")
    parser.add_argument("--jobs-per-day", type=float, default=13000 / 14)
    args = parser.parse_args()
    config = LlmTraceConfig(num_jobs=int(args.jobs_per_day * args.days), rate_per_h=args.jobs_per_day / 24, seed=0)
    jobs = llm_trace(config, perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0)
    sim = Simulation(build_workloads(jobs, spec, None), spec, load_policy(args.policy), options)
    digest = hashlib.sha256()
    step = sim.step

    def hashed_step() -> TickOutput:
        out = step()
        digest.update(repr(out.actions).encode())
        digest.update(repr(out.assignments).encode())
        if out.allocation is not None:
            digest.update(repr(out.allocation.job_ids).encode())
            digest.update(out.allocation.x.tobytes())
        digest.update(b"|")
        return out

    sim.step = hashed_step  # type: ignore[method-assign]
    cpu = time.process_time()
    result = sim.run()
    print(
        f"{args.policy}, {args.days:g} days: {result.ticks} ticks, avg JCT {summarize(result)['avg_jct_h']!r} h, "
        f"decisions {digest.hexdigest()[:16]}, CPU {time.process_time() - cpu:.1f} s"
    )


if __name__ == "__main__":
    main()
