"""How much a replay's prediction depends on the rounds' phase (issue 23, nineteenth session).

    python benchmarks/phase_spread.py                                   # the shipped trace, preset and plain Slurm
    python benchmarks/phase_spread.py --seeds 107,149,163               # fresh replay-like traces instead
    python benchmarks/phase_spread.py --flagship-params '{"arrival_round": true}'  # a candidate too

A real daemon ticks from its own start, so where its 360-s rounds fall relative to the jobs' arrivals is chance: on
the shipped trace the real runs of the preset spread 0.670-0.810 h, and were all slower than the prediction, which
opened round 1 at the first arrival (``slurmplan replay`` now predicts with the daemon's own phase,
``predicted_lead_s``). This runs the replay's own prediction (``replay.harness.predict``: the
dev cluster ``a100:2x4,v100:2x4,t4:2x2``, K = 30, Slurm's requeue delay with the default ``cred_expire``) with the
daemon started ``lead_s`` trace seconds before the first arrival (``SimOptions.lead_s``), for offsets 0, 30, ...,
330 s (the daemon's tick grid over one round). Per policy: the avg JCT at each offset, then min, median, max and the
spread (max / min - 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_robust import flagship_variant  # noqa: E402

from slurmplan.replay.harness import ReplayConfig, predict  # noqa: E402
from slurmplan.sim.cluster import DEV_CLUSTER  # noqa: E402
from slurmplan.sim.generate import ReplayTraceConfig, replay_like_trace  # noqa: E402
from slurmplan.sim.metrics import summarize  # noqa: E402
from slurmplan.sim.trace import write_trace  # noqa: E402
from slurmplan.slurm.replay_ops import auth_cred_expire_s  # noqa: E402

SHIPPED = Path(__file__).resolve().parent.parent / "site" / "devcluster" / "replay-trace.jsonl"


def spread(trace: Path, policy: str, offsets: list[float], folder: Path) -> list[tuple[float, float]]:
    """(avg JCT h, restarts per job) of ``policy`` on ``trace`` at each offset of the daemon's start."""
    cfg = ReplayConfig(trace=trace, policy=policy, out_dir=folder)
    delay = (auth_cred_expire_s(None) + 1.0) * cfg.speedup
    out = []
    for lead in offsets:
        s = summarize(predict(cfg, DEV_CLUSTER, delay, lead_s=lead))
        out.append((float(s["avg_jct_h"]), float(s["restarts_per_job"])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", help="replay-like seeds (28 jobs each) instead of the shipped trace, e.g. 107,149")
    ap.add_argument("--flagship-params", help="a candidate: the preset plus these flagship parameters (JSON)")
    ap.add_argument("--offsets", default=",".join(str(30 * k) for k in range(12)), help="lead_s values, comma list")
    ap.add_argument("--no-fifo", action="store_true", help="skip plain Slurm (slurm_fifo)")
    args = ap.parse_args()
    offsets = [float(v) for v in args.offsets.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        policies = {} if args.no_fifo else {"slurm_fifo": "slurm_fifo"}
        policies["preset"] = "slurmplan"
        if args.flagship_params:
            (folder / "cand").mkdir()
            policies["candidate"] = flagship_variant(args.flagship_params, folder / "cand")
        traces = [("shipped", SHIPPED)]
        if args.seeds:
            traces = []
            for seed in [int(v) for v in args.seeds.split(",")]:
                path = folder / f"replay-like-{seed}.jsonl"
                write_trace(replay_like_trace(ReplayTraceConfig(num_jobs=28, seed=seed)), path)
                traces.append((f"seed {seed}", path))
        print("offsets (s):", " ".join(f"{o:g}" for o in offsets))
        for label, trace in traces:
            for name, policy in policies.items():
                got = spread(trace, policy, offsets, folder)
                jct = [g[0] for g in got]
                rst = statistics.median(g[1] for g in got)
                cells = " ".join(f"{v:.3f}" for v in jct)
                print(
                    f"{label:9s} {name:10s} min {min(jct):.3f} med {statistics.median(jct):.3f} max {max(jct):.3f} "
                    f"spread {max(jct) / min(jct) - 1:5.1%} restarts/job (median) {rst:.2f} | {cells}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
