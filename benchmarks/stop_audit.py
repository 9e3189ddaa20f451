"""Audit of the flagship's priced stops against what they really cost (issue 23, thirteenth session).

    python benchmarks/stop_audit.py u-replay-tiny 6 102          # one bench_robust family, load and seed
    python benchmarks/stop_audit.py u-replay-tiny 6 302 --each   # and every stop on its own line
    python benchmarks/stop_audit.py llm-dev 8 1 --policy PRESET.yaml --json

Every stop the move pricing kept (``flagship_moves.guard_moves``: a running job stopped because the waiting it
saves the jobs that take its GPUs exceeds its own delay and its restart cost) is priced on two bets: the stopped
job's remaining time (for a job of unknown length, as long again as it has run) and its own delay until it runs
again. The audit puts each next to what the simulation then did: the job's true remaining work at its rate when it
was stopped, and the time it really spent off GPUs until its next start. The priced figures are read from the
stop's note (``mechanism.pricing.price_change``'s wording). RESULTS.md section 7, "Thirteenth session", has the
table for the tiny cluster's losses and the LLM families, and why the two bets go wrong in opposite directions
there. Same trace, cluster, costs and preset as ``bench_robust.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bench_robust import audit_parser, audited

from slurmplan.domain import ActionKind
from slurmplan.sim.engine import Simulation

_UNIT = {"s": 1.0, "min": 60.0, "h": 3600.0}
_PRICE = re.compile(
    r"gains (-?[\d.]+) (s|min|h) for itself over its ([\d.]+) (s|min|h) left"
    r"(?: and ([\d.]+) (s|min|h) of waiting for the jobs it makes room for)?"
)


@dataclass(frozen=True)
class Stop:
    """One priced stop: what was priced and what happened (seconds)."""

    at_s: float
    job_id: int
    priced_left_s: float
    true_left_s: float
    priced_delay_s: float
    off_gpus_s: float
    priced_gain_s: float


def priced(note: str) -> tuple[float, float, float] | None:
    """(own delay, remaining, gain for others) in seconds from a stop's note; None when the note prices no stop."""
    m = _PRICE.search(note)
    if m is None:
        return None
    own = float(m[1]) * _UNIT[m[2]]
    gain = float(m[5]) * _UNIT[m[6]] if m[5] else 0.0
    return -own, float(m[3]) * _UNIT[m[4]], gain


class _Audited(Simulation):
    """The simulation, remembering each kept stop with the job's true remaining work at the moment."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stops: list[tuple[float, int, float, float, float, float]] = []

    def step(self):
        left = {k: (j.work_total - j.work_done) / j.rate for k, j in self.backend.jobs.items() if j.rate > 0}
        out = super().step()
        notes = {a.job_id: a for a in out.assignments}
        for action in out.actions:
            a = notes.get(action.job_id)
            if action.kind is not ActionKind.SIGNAL or a is None or a.cell is not None or action.job_id not in left:
                continue
            price = priced(a.detail)
            if price is not None:
                self.stops.append((self.backend.now, action.job_id, price[1], left[action.job_id], price[0], price[2]))
        return out


def audit(family: str, load: float, seed: int, policy: str = "slurmplan") -> list[Stop]:
    """Every priced stop of ``policy`` on ``bench_robust``'s trace (family, load, seed), in time order."""
    sim, result = audited(_Audited, family, load, seed, policy)
    records = {j.job_id: j for j in result.jobs}
    out = []
    for at, job, left, true_left, delay, gain in sim.stops:
        rec = records[job]
        later = [c[0] for c in rec.configs if c[0] > at + 1.0]
        back = min(later) if later else (rec.finish_s if rec.finish_s is not None else result.end_s)
        out.append(Stop(at, job, left, true_left, delay, back - at, gain))
    return out


def main() -> None:
    args = audit_parser(__doc__, "stop").parse_args()
    stops = audit(args.family, args.load, args.seed, args.policy)
    if args.json:
        print(json.dumps([s.__dict__ for s in stops], indent=1))
        return
    for s in stops if args.each else ():
        print(
            f"t {s.at_s / 60:6.1f} min job {s.job_id:4d}: remaining priced {s.priced_left_s / 60:6.1f} true "
            f"{s.true_left_s / 60:6.1f} min; own delay priced {s.priced_delay_s / 60:6.1f}, off GPUs "
            f"{s.off_gpus_s / 60:6.1f} min; gain priced for others {s.priced_gain_s / 60:6.1f} min"
        )
    n = max(len(stops), 1)
    mean = {f: sum(getattr(s, f) for s in stops) / n / 60 for f in Stop.__dataclass_fields__ if f.endswith("_s")}
    print(
        f"{args.family} {args.load:g}/{args.seed}: {len(stops)} priced stops; remaining priced "
        f"{mean['priced_left_s']:.0f} / true {mean['true_left_s']:.0f} min; own delay priced "
        f"{mean['priced_delay_s']:.0f} / off GPUs {mean['off_gpus_s']:.0f} min; gain priced for others "
        f"{mean['priced_gain_s']:.0f} min (means per stop)"
    )


if __name__ == "__main__":
    main()
