"""``slurmplan replay --trace FILE --policy NAME [--speedup K] [--faults SPEC] [--json] [--out DIR]``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
from pathlib import Path

from slurmplan.domain import ValidationError
from slurmplan.tick_types import DAEMON_INTERVAL_S, TickConfig

DEFAULT_SPEEDUP = 30.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "replay", help="run a trace on the Slurm cluster in $SLURM_CONF with the real daemon; measure JCT"
    )
    p.add_argument("--trace", required=True, help="JSON-lines trace of model (hint) jobs")
    p.add_argument("--policy", required=True, help="policy name or YAML file; slurm_fifo = plain Slurm, no daemon")
    p.add_argument(
        "--speedup", type=float, default=DEFAULT_SPEEDUP, help="trace seconds per wall second (default %(default)g)"
    )
    p.add_argument("--faults", default=None, help="kill-daemon=N,restart-slurmctld=M[,fail-scontrol=P]")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", default=None, help="folder for summary, per-job CSV, plots, logs (default: a temp dir)")
    p.add_argument("--partition", default=None, help="submit to this partition (default: the cluster's default)")
    p.add_argument(
        "--round", type=float, default=TickConfig.round_s, help="round length in trace seconds (default %(default)g)"
    )
    p.add_argument(
        "--tick",
        type=float,
        default=DAEMON_INTERVAL_S,
        help="daemon tick interval in trace seconds (default %(default)g)",
    )
    p.add_argument("--max-wall", type=float, default=3600.0, help="give up after this many wall seconds")
    p.add_argument(
        "--start-latency",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Slurm's launch latency in wall seconds (release to the job's script running), charged K times at "
        "every start by the prediction (default: 3.5, measured on the local dev cluster)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fault times")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    import os
    import tempfile

    from slurmplan.replay.faults import parse_faults
    from slurmplan.replay.harness import ReplayConfig, run_replay
    from slurmplan.sim.report import write_outputs

    if not Path(args.trace).is_file():
        raise ValidationError("trace", args.trace, "a readable trace file", "replay")
    faults = parse_faults(args.faults)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="slurmplan-replay-"))
    cfg = ReplayConfig(
        Path(args.trace), args.policy, out, speedup=args.speedup, faults=faults, round_s=args.round, tick_s=args.tick,
        max_wall_s=args.max_wall, partition=args.partition, seed=args.seed,
        **({} if args.start_latency is None else {"start_latency_wall_s": args.start_latency}),
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k.startswith("SLURM_CONF")}
    progress = _progress_bar() if sys.stderr.isatty() else None
    before = signal.signal(signal.SIGTERM, _interrupt)  # a kill or timeout cancels the jobs too, like Ctrl-C
    try:
        outcome = run_replay(cfg, env, on_progress=progress)
    finally:
        signal.signal(signal.SIGTERM, before)  # called in-process (tests, a notebook): the caller's handler again
        if progress is not None:
            progress.close()
    write_outputs([outcome.measured], [outcome.summary], out, plots=False)
    (out / "predicted_summary.json").write_text(json.dumps(_predicted(outcome), indent=1, default=str))
    try:
        predicted = dataclasses.replace(outcome.predicted, policy=f"{args.policy} (predicted)")
        write_outputs([outcome.measured, predicted], [outcome.summary], out / "plots", plots=True)
    except ImportError:
        print("note: plots need matplotlib (pip install 'slurmplan[plots]'); CSVs are written", file=sys.stderr)
    if args.json:
        print(json.dumps(outcome.summary, indent=1, default=str))
    else:
        for key, value in outcome.summary.items():
            print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    print(f"outputs in {out}", file=sys.stderr)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _predicted(outcome) -> dict[str, object]:
    from slurmplan.sim.metrics import summarize

    return summarize(outcome.predicted)


class _Bar:
    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=0, unit="job", desc="replay", file=sys.stderr)

    def __call__(self, counts: dict[str, int], elapsed: float) -> None:
        self.bar.total = counts["jobs"]
        self.bar.n = counts["done"]
        self.bar.set_postfix(submitted=counts["submitted"], running=counts["running"], wall=f"{elapsed:.0f}s")

    def close(self) -> None:
        self.bar.close()


def _progress_bar() -> _Bar | None:
    try:
        return _Bar()
    except ImportError:
        return None
