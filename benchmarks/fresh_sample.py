"""Hundreds of fresh replay-like traces: how often the preset loses to plain Slurm, and by how much (issue 23).

    python benchmarks/fresh_sample.py                           # seeds 1000-1499, drawn in the twentieth session
    python benchmarks/fresh_sample.py --seeds 2000:2200 --json  # a range no session has used
    python benchmarks/fresh_sample.py --seeds 2000:2200 --flagship-params '{"arrival_round": true}'
    python benchmarks/fresh_sample.py --seeds 3000:3200 --rate 30   # a busier site: the same recipe, 30 jobs/h

Issue 23 judges the flagship on traces that are not in the repository. ``bench_robust.py`` covers many families
with a few seeds each; this covers one family with many seeds: issue 23's own "fresh trace" recipe (28 jobs, 1-4
GPUs on one node, 6-70 min, 60 % elastic 1-4, Poisson 20 jobs/h: ``slurmplan trace generate replay-like --jobs 28
--seed N``), each run through the prediction ``slurmplan replay`` makes for the dev cluster (``a100:2x4,v100:2x4,
t4:2x2``, K = 30, Slurm's requeue delay with the default ``cred_expire``; ``phase_spread.spread``). The seeds are
drawn, not chosen, so the share of losses is an estimate of what a site replaying its own fresh traces would see.

Where a trace's arrivals fall between the daemon's rounds is chance (``phase_spread.py``: up to 24 % on one
trace), so the flagship runs at ``--leads`` phases spread over one 360-s round (0, 90, 180, 270 s for 4) and its
avg JCT is their mean; plain Slurm decides at every tick, so its result does not depend on the phase (0.0-0.2 %
over twelve phases on four traces) and it runs once. Per seed: the ratio of the two, the lowest and highest ratio
over the phases, the flagship's restarts per job. Then the median and quartiles of the ratio, the traces lost
(ratio above 1), the worst, and the traces with two restarts per job or more.

Seeds used so far (a candidate measured on a range makes that range development data; draw a new one for the next
held-out check): 1000-1499 (twentieth session, the preset only). Results: ``slurmplan/sim/RESULTS.md`` section 7,
"Twentieth session".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_robust import flagship_variant  # noqa: E402
from phase_spread import spread  # noqa: E402

from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace  # noqa: E402
from slurmplan.sim.trace import write_trace  # noqa: E402

ROUND_S = 360.0


def leads(n: int) -> list[float]:
    """``n`` daemon start offsets spread evenly over one round."""
    return [k * ROUND_S / n for k in range(n)]


def seed_row(seed: int, n_leads: int, flagship: str = "slurmplan", rate_per_h: float = 20.0) -> dict:
    """One fresh trace: plain Slurm's avg JCT, the flagship's at each phase, and their ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace = folder / "trace.jsonl"
        write_trace(replay_like_trace(ReplayTraceConfig(num_jobs=28, rate_per_h=rate_per_h, seed=seed)), trace)
        plain = spread(trace, "slurm_fifo", [0.0], folder)[0][0]
        ours = spread(trace, flagship, leads(n_leads), folder)
    jct = [o[0] for o in ours]
    return {
        "seed": seed,
        "plain_h": plain,
        "flagship_h": statistics.mean(jct),
        "flagship_by_lead_h": jct,
        "ratio": statistics.mean(jct) / plain,
        "ratio_min": min(jct) / plain,
        "ratio_max": max(jct) / plain,
        "restarts_per_job": statistics.mean(o[1] for o in ours),
    }


def summary(rows: list[dict]) -> dict:
    """What the sample says: the ratio's median and quartiles, the losses and the restart flags."""
    ratios = sorted(r["ratio"] for r in rows)
    q1, median, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {
        "traces": len(rows),
        "median": median,
        "q1": q1,
        "q3": q3,
        "best": ratios[0],
        "worst": ratios[-1],
        "losses": [r["seed"] for r in rows if r["ratio"] > 1.0],
        "losses_any_phase": sum(r["ratio_max"] > 1.0 for r in rows),
        "restart_flags": [r["seed"] for r in rows if r["restarts_per_job"] >= 2.0],
    }


def parse_seeds(text: str) -> list[int]:
    """``A:B`` (A to B-1) or a comma list."""
    if ":" in text:
        first, _, end = text.partition(":")
        seeds = list(range(int(first), int(end)))
    else:
        seeds = [int(v) for v in text.split(",") if v.strip()]
    if not seeds:
        raise SystemExit(f"--seeds: {text!r} names no seed; allowed: A:B (B > A) or a comma list of integers")
    return seeds


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1000:1500", help="A:B (A to B-1) or a comma list (default 1000:1500)")
    ap.add_argument("--leads", type=int, default=4, help="phases of the rounds per trace (default 4)")
    ap.add_argument("--rate", type=float, default=20.0, help="arrivals per hour (default 20: issue 23's recipe)")
    ap.add_argument("--flagship-params", help="a candidate: the preset plus these flagship parameters (JSON)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2: the machine's cores)")
    ap.add_argument("--json", action="store_true", help="rows and summary as JSON")
    args = ap.parse_args(argv)
    if args.leads < 1:
        raise SystemExit(f"--leads: {args.leads}; allowed: 1 or more")
    if not args.rate > 0:
        raise SystemExit(f"--rate: {args.rate}; allowed: arrivals per hour above 0")
    seeds = parse_seeds(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        flagship = flagship_variant(args.flagship_params, Path(tmp))
        one = partial(seed_row, n_leads=args.leads, flagship=flagship, rate_per_h=args.rate)
        rows: list[dict] = []
        with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
            for row in pool.map(one, seeds):
                rows.append(row)
                if not args.json:
                    print(
                        f"seed {row['seed']}: plain Slurm {row['plain_h']:.3f} h, flagship {row['flagship_h']:.3f} h, "
                        f"ratio {row['ratio']:.3f} ({row['ratio_min']:.3f}-{row['ratio_max']:.3f} over the phases), "
                        f"restarts/job {row['restarts_per_job']:.2f}" + ("  <-- LOSS" if row["ratio"] > 1.0 else ""),
                        flush=True,
                    )
    result = {"leads_s": leads(args.leads), "rate_per_h": args.rate, "flagship_params": args.flagship_params}
    result["rows"] = rows
    result["summary"] = s = summary(rows)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(
            f"{s['traces']} traces: flagship / plain Slurm median {s['median']:.3f} (quartiles {s['q1']:.3f}-"
            f"{s['q3']:.3f}, best {s['best']:.3f}, worst {s['worst']:.3f}); lost {len(s['losses'])} "
            f"({len(s['losses']) / s['traces']:.1%}: {', '.join(map(str, s['losses'])) or 'none'}); lost at one "
            f"phase or more {s['losses_any_phase']}; restarts >= 2 a job: {len(s['restart_flags'])}"
        )
    return result


if __name__ == "__main__":
    main()
