"""Never worse than plain Slurm, where it is replayed (issue 23): many fresh replay-like traces, each predicted as
``slurmplan replay`` predicts it on the dev cluster.

    python benchmarks/bench_replay_batch.py                        # seeds 1001-1230, plain Slurm vs the preset
    python benchmarks/bench_replay_batch.py --seeds 3101:3201      # a held-out draw (see below)
    python benchmarks/bench_replay_batch.py --flagship-params '{"protect_pushed": false}'   # a candidate too
    python benchmarks/bench_replay_batch.py --json                 # one JSON object per seed, then the summary

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
drawn in the seventeenth session (dropping ``protect_pushed``, RESULTS.md section 7), so the next draw starts at
3101.
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

from bench_robust import flagship_variant  # noqa: E402

from slurmplan.replay.harness import ReplayConfig, predict  # noqa: E402
from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace  # noqa: E402
from slurmplan.sim.metrics import summarize  # noqa: E402
from slurmplan.sim.trace import write_trace  # noqa: E402
from slurmplan.slurm.replay_ops import auth_cred_expire_s  # noqa: E402

DEV_CLUSTER = "a100:2x4,v100:2x4,t4:2x2"
JOBS = 28


def predicted(seed: int, policies: dict[str, str], folder: str) -> dict:
    """One seed: its trace written as the CLI writes it, then each policy's replay prediction (avg JCT h,
    restarts per job)."""
    trace = Path(folder) / f"replay-like-{seed}.jsonl"
    write_trace(replay_like_trace(ReplayTraceConfig(num_jobs=JOBS, seed=seed)), trace)
    row: dict = {"seed": seed}
    for name, policy in policies.items():
        cfg = ReplayConfig(trace=trace, policy=policy, out_dir=Path(folder))
        # Slurm's default cred_expire, as the replays ran: a requeued job waits cred_expire + 1 s on a node just left
        s = summarize(predict(cfg, DEV_CLUSTER, (auth_cred_expire_s(None) + 1.0) * cfg.speedup))
        row[name] = {"avg_jct_h": s["avg_jct_h"], "restarts_per_job": s["restarts_per_job"]}
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
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    seeds = seed_range(args.seeds)
    with tempfile.TemporaryDirectory() as folder:
        policies = {"plain": "slurm_fifo", "preset": "slurmplan"}
        for i, params in enumerate(args.flagship_params):
            variant = Path(folder) / f"candidate-{i}"
            variant.mkdir()
            policies[f"candidate {params}"] = flagship_variant(params, variant)
        rows = []
        with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
            futures = [pool.submit(predicted, s, policies, folder) for s in seeds]
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
        )


if __name__ == "__main__":
    main()
