"""Never worse than plain Slurm, where it is replayed (issue 23): many fresh replay-like traces, each predicted as
``slurmplan replay`` predicts it on the dev cluster.

    python benchmarks/bench_replay_batch.py                        # seeds 1001-1230, plain Slurm vs the preset
    python benchmarks/bench_replay_batch.py --seeds 3101:3201      # a held-out draw (see below)
    python benchmarks/bench_replay_batch.py --flagship-params '{"protect_pushed": false}'   # a candidate too
    python benchmarks/bench_replay_batch.py --json                 # one JSON object per seed, then the summary
    python benchmarks/bench_replay_batch.py --seeds 3200:3400 --leads 4 [--rate 30]   # over the rounds' phase

A replay on real Slurm takes about 6 minutes and its runs spread by several per cent, so five fresh traces were
all the sessions could replay; the simulator matched those replays within 3 % (README, "Replay on real Slurm").
This runs the replay's own prediction (``replay.harness.predict``: the trace as ``slurmplan trace generate
replay-like --jobs 28 --seed S`` writes it, the dev cluster ``a100:2x4,v100:2x4,t4:2x2``, K = 30, the daemon's
ticks and rounds, Slurm's start latency and its requeue delay with the default ``cred_expire``) on hundreds of
them, about 1.5 s a trace and policy, to count how often the flagship would lose to plain Slurm there.

Per seed: plain Slurm's avg JCT (``slurm_fifo``), the preset's, and each candidate's (the preset plus
``--flagship-params``), with restarts per job. The summary: per policy, the median and worst ratio to plain Slurm
and the traces it loses (ratio above 1). Seeds: 1001-1230 were drawn in the sixteenth session and looked into
(development now); draw fresh ones for a held-out check, once per candidate, and say so here: 3001-3100 were
drawn in the seventeenth session (dropping ``protect_pushed``, RESULTS.md section 7); 1000-1499 (20/h) and
3000-3199 (30/h), overlapping both, were run with ``--leads 4`` in the twentieth session for the preset and
``arrival_round`` (1231-1499 and 3101-3199 new then); 3200-3299 in the twenty-first session (``restart_escalation``
and ``restart_cap``, RESULTS.md section 7), so the next draw starts at 3300.

``--leads N`` (twentieth session): where a trace's arrivals fall between the daemon's rounds is chance
(``phase_spread.py``: up to 24 % on one trace), so each flagship runs with the daemon started ``k * 360 / N`` s
before the first arrival (k = 0..N-1) and its figures are the means over them; plain Slurm decides at every 30-s
tick, so it does not depend on the phase and runs once. The summary then also counts the traces a policy loses at
one phase or more. ``--rate R``: the same recipe at R jobs an hour (a busier site), instead of 20. ``--leads 1`` and
``--rate 20`` (the defaults) are the benchmark as it was.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_robust import flagship_variant, lead_offsets  # noqa: E402

from slurmplan.replay.harness import ReplayConfig, predict  # noqa: E402
from slurmplan.sim.cluster import DEV_CLUSTER  # noqa: E402
from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace  # noqa: E402
from slurmplan.sim.metrics import summarize  # noqa: E402
from slurmplan.sim.trace import write_trace  # noqa: E402
from slurmplan.slurm.replay_ops import auth_cred_expire_s  # noqa: E402

JOBS = 28


def predicted(
    seed: int, policies: dict[str, str], folder: str, offsets: tuple[float, ...] = (0.0,), rate_per_h: float = 20.0
) -> dict:
    """One seed: its trace written as the CLI writes it, then each policy's replay prediction (avg JCT h,
    restarts per job), a flagship's the mean over ``offsets`` (``by_lead_h``: each offset's avg JCT, with several);
    plain Slurm runs once, at offset 0 (it decides every tick: the phase does not move it)."""
    trace = Path(folder) / f"replay-like-{seed}.jsonl"
    write_trace(replay_like_trace(ReplayTraceConfig(num_jobs=JOBS, rate_per_h=rate_per_h, seed=seed)), trace)
    row: dict = {"seed": seed}
    for name, policy in policies.items():
        cfg = ReplayConfig(trace=trace, policy=policy, out_dir=Path(folder))
        # Slurm's default cred_expire, as the replays ran: a requeued job waits cred_expire + 1 s on a node just left
        delay = (auth_cred_expire_s(None) + 1.0) * cfg.speedup
        runs = [
            summarize(predict(cfg, DEV_CLUSTER, delay, lead_s=lead))
            for lead in (offsets[:1] if name == "plain" else offsets)
        ]
        row[name] = {
            "avg_jct_h": statistics.mean(r["avg_jct_h"] for r in runs),
            "restarts_per_job": statistics.mean(r["restarts_per_job"] for r in runs),
        }
        if len(runs) > 1:
            row[name]["by_lead_h"] = [r["avg_jct_h"] for r in runs]
    return row


def summary(rows: list[dict], names: list[str]) -> dict:
    """Per policy other than plain Slurm: median and worst avg JCT over plain Slurm's, and the seeds it loses."""
    out = {}
    for name in names:
        ratios = {r["seed"]: r[name]["avg_jct_h"] / r["plain"]["avg_jct_h"] for r in rows}
        out[name] = {
            "traces": len(ratios),
            "median_ratio": statistics.median(ratios.values()),
            "worst_ratio": max(ratios.values()),
            "losses": {s: round(v, 4) for s, v in ratios.items() if v > 1.0},
            "median_restarts_per_job": statistics.median(r[name]["restarts_per_job"] for r in rows),
        }
        if all("by_lead_h" in r[name] for r in rows):
            plain = {r["seed"]: r["plain"]["avg_jct_h"] for r in rows}
            lost = [r["seed"] for r in rows if max(r[name]["by_lead_h"]) > plain[r["seed"]]]
            out[name]["losses_at_one_phase_or_more"] = len(lost)
    return out


def seed_range(text: str) -> range:
    """``A:B`` (A up to B-1), as Python slices read."""
    try:
        first, last = (int(x) for x in text.split(":"))
    except ValueError:
        raise SystemExit(f"--seeds: FIRST:LAST (e.g. 3001:3201), got {text!r}") from None
    if last <= first:
        raise SystemExit(f"--seeds: LAST must be above FIRST, got {text!r}")
    return range(first, last)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1001:1231", help="FIRST:LAST, the seeds FIRST up to LAST-1")
    parser.add_argument("--flagship-params", action="append", default=[], help="a candidate (repeatable)")
    parser.add_argument("--leads", type=int, default=1, help="phases of the rounds per trace, averaged (default 1)")
    parser.add_argument("--rate", type=float, default=20.0, help="arrivals per hour (default 20: issue 23's recipe)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    seeds = seed_range(args.seeds)
    offsets = lead_offsets(args.leads)  # the daemon's starts before the first arrival, as bench_robust's --leads
    if not args.rate > 0:
        raise SystemExit(f"--rate: {args.rate}; allowed: arrivals per hour above 0")
    with tempfile.TemporaryDirectory() as folder:
        policies = {"plain": "slurm_fifo", "preset": "slurmplan"}
        for i, params in enumerate(args.flagship_params):
            variant = Path(folder) / f"candidate-{i}"
            variant.mkdir()
            policies[f"candidate {params}"] = flagship_variant(params, variant)
        rows = []
        with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
            futures = [pool.submit(predicted, s, policies, folder, offsets, args.rate) for s in seeds]
            for n, future in enumerate(futures, 1):
                row = future.result()
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    cells = "  ".join(f"{k} {v['avg_jct_h']:.4f}" for k, v in row.items() if k != "seed")
                    print(f"[{n}/{len(seeds)}] seed {row['seed']}: {cells}", flush=True)
    result = summary(rows, [n for n in policies if n != "plain"])
    if args.json:
        print(json.dumps({"summary": result}))
        return
    for name, s in result.items():
        losses = ", ".join(f"{k} {v:.3f}x" for k, v in s["losses"].items()) or "none"
        print(
            f"{name}: {s['traces']} traces, median {s['median_ratio']:.3f}x plain Slurm, worst {s['worst_ratio']:.3f}x,"
            f" {len(s['losses'])} losses ({losses}); median restarts/job {s['median_restarts_per_job']:.2f}"
            + (f"; lost at one phase or more: {s['losses_at_one_phase_or_more']}" if args.leads > 1 else "")
        )


if __name__ == "__main__":
    main()
