"""One hash of every tick's decisions on ``bench_sim.py``'s trace: how a speed change shows it decides the same.

    python benchmarks/decision_hash.py --days 1                     # LAS, as bench_sim (2,197 ticks)
    python benchmarks/decision_hash.py --days 0.5 --policy slurmplan # the flagship
    python benchmarks/decision_hash.py --days 1 --site               # bench_site_history's first day, flagship

Run it on two checkouts (``PYTHONPATH`` set to each) and compare the printed hash: it covers every tick's actions
and assignments (their ``repr``) and the allocation's job ids and X (its bytes), so any changed decision, reason,
detail or share changes it. Issue 27's speed work keeps decisions byte-identical except where equal optima may
be broken differently (``tests/sim/test_equal_optima.py``); this is the check for the identical part.

``--no-details`` hashes the decisions without their words: each assignment's ``detail``, each action's ``reason``
and the why at the end of a held job's comment (``held_text``) are blanked, so a change to what the details say
(issue 23: the flagship's notes between rounds) can show that placements, sizes, starts and stops stay identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
import time

from slurmplan.domain import Action, Assignment
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.metrics import summarize
from slurmplan.sim.workload import build_workloads
from slurmplan.tick_types import TickOutput

_SITE_CLUSTER = "a100:50x8,a40:100x4,v100:25x8"  # bench_site_history.SITE_CLUSTER
_HELD_WHY = re.compile(r"(slurmplan: held \([^)]*\) \| round \d+ \| ).*\Z", re.DOTALL)
"""A held job's decision in its comment (``actions.held_text``): what comes after the round is the detail."""


def bare_assignment(a: Assignment) -> Assignment:
    """The assignment without its words (``detail``): what ``--no-details`` hashes."""
    return dataclasses.replace(a, detail="")


def bare_action(a: Action) -> Action:
    """The action without its words: no ``reason``, and a held job's comment cut after its round."""
    comment = a.admin_comment if a.admin_comment is None else _HELD_WHY.sub(r"\1", a.admin_comment)
    return dataclasses.replace(a, reason="", admin_comment=comment)


def tick_bytes(out: TickOutput, details: bool = True) -> bytes:
    """One tick's decisions as hashed: its actions and assignments (``repr``), the allocation's job ids and X."""
    actions, assignments = out.actions, out.assignments
    if not details:
        actions, assignments = tuple(map(bare_action, actions)), tuple(map(bare_assignment, assignments))
    parts = [repr(actions).encode(), repr(assignments).encode()]
    if out.allocation is not None:
        parts += [repr(out.allocation.job_ids).encode(), out.allocation.x.tobytes()]
    return b"".join(parts) + b"|"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--policy", default="las")
    parser.add_argument("--jobs-per-day", type=float, default=None, help="default 13,000/14, or 50,000/30 with --site")
    parser.add_argument(
        "--site", action="store_true", help="bench_site_history's cluster, rate and 360-s rounds (its busy rounds)"
    )
    parser.add_argument(
        "--no-details", action="store_true", help="hash decisions without their words (details, action reasons)"
    )
    args = parser.parse_args()
    if args.site and args.policy == "las":
        args.policy = "slurmplan"  # bench_site_history's policy
    per_day = args.jobs_per_day or (50_000 / 30 if args.site else 13_000 / 14)
    cluster = _SITE_CLUSTER if args.site else CRIUS_CLUSTER
    config = LlmTraceConfig(num_jobs=int(per_day * args.days), rate_per_h=per_day / 24, seed=0)
    jobs = llm_trace(config, perf_feasible(cluster))
    spec = parse_cluster(cluster)
    options = SimOptions(round_s=360.0 if args.site else 300.0, tick_s=30.0)
    sim = Simulation(build_workloads(jobs, spec, None), spec, load_policy(args.policy), options)
    digest = hashlib.sha256()
    step = sim.step

    def hashed_step() -> TickOutput:
        out = step()
        digest.update(tick_bytes(out, not args.no_details))
        return out

    sim.step = hashed_step  # type: ignore[method-assign]
    cpu = time.process_time()
    result = sim.run()
    print(
        f"{args.policy}{' (site)' if args.site else ''}, {args.days:g} days: "
        f"{result.ticks} ticks ({result.rounds} rounds), avg JCT {summarize(result)['avg_jct_h']!r} h, "
        f"decisions{' (no details)' if args.no_details else ''} {digest.hexdigest()[:16]}, "
        f"CPU {time.process_time() - cpu:.1f} s"
    )


if __name__ == "__main__":
    main()
