"""Which rule restarts the flagship's jobs (issue 23, fifteenth session: "restarts < 2 per job on every trace").

    python benchmarks/restart_audit.py u-llm-wide 20 401            # one bench_robust family, load and seed
    python benchmarks/restart_audit.py u-llm-wide 20 401 --each     # and every restart on its own line
    python benchmarks/restart_audit.py llm-dev 8 1 --policy PRESET.yaml --json

Every restart is a checkpoint signal the tick sent (the simulator counts one restart per signal). Each is put
under the rule that produced it, read from the job's note for that round:

- ``move`` / ``resize``: a voluntary change that ``reconfig.judge_move`` found to pay ("a move must reach");
- ``forced move``: its GPUs went to higher-priority jobs and it took its deferred move ("so it moves although");
- ``stop``: it was given no GPUs this round;
- ``re-placed``: moved within its type so that larger jobs fit, or another note.

and, across those, by what the do-no-harm guard (``policy/flagship_moves.guard_moves``) said of it: ``priced``
(its stop or move paid for itself), ``cannot wait`` (made room for a guaranteed, overdue or deadline job),
``unpriced`` (the running jobs that took its GPUs could not simply go back, so the guard could not price it), or
``-`` (the guard had nothing to say). For the moves, also how long the job kept the new configuration before its
next restart (tenure) against the time the move was priced over. RESULTS.md section 7, "Fifteenth session", has
the table for the held-out LLM traces the restart flag fires on. Same trace, cluster, costs and preset as
``bench_robust.py``.
"""

from __future__ import annotations

import collections
import json
import re
from dataclasses import asdict, dataclass

from bench_robust import audit_parser, audited

from slurmplan.domain import ActionKind
from slurmplan.sim.engine import Simulation

_HORIZON = re.compile(r"moving gains [\d.]+x for (\d+) s")


@dataclass(frozen=True)
class Restart:
    """One checkpoint signal: when, which job, the rule, the guard's word, and (moves) priced horizon and tenure."""

    at_s: float
    job_id: int
    rule: str
    guard: str
    horizon_s: float | None
    tenure_s: float | None
    note: str


def rule_of(note: str, stopped: bool, reason: str) -> str:
    """The rule behind one signal, from its note (``reconfig._move_sentence`` and ``round._settle_running``)."""
    if stopped:
        return "stop"
    if "so it moves although" in note:
        return "forced move"
    if "a move must reach" in note:
        return "resize" if reason == "resized" else "move"
    return "re-placed"


def guard_of(note: str) -> str:
    """What the do-no-harm guard said of the change (``flagship_moves.Guarded`` as ``flagship._notes`` words it)."""
    if "running jobs that took its GPUs cannot" in note:
        return "unpriced"
    if "makes room for a job that cannot wait" in note:
        return "cannot wait"
    if "for itself over its" in note:
        return "priced"
    return "-"


class _Audited(Simulation):
    """The simulation, remembering each signal's note."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.signals: list[tuple[float, int, str, bool, str]] = []

    def step(self):
        out = super().step()
        notes = {a.job_id: a for a in out.assignments}
        for action in out.actions:
            a = notes.get(action.job_id)
            if action.kind is ActionKind.SIGNAL and a is not None:
                reason = getattr(a.reason, "value", str(a.reason))
                self.signals.append((self.backend.now, action.job_id, a.detail, a.cell is None, reason))
        return out


def audit(family: str, load: float, seed: int, policy: str = "slurmplan") -> tuple[list[Restart], int, int]:
    """Every restart of ``policy`` on ``bench_robust``'s trace (family, load, seed) in time order, the job count,
    and the restarts the simulator counted (the same number: one per signal)."""
    sim, result = audited(_Audited, family, load, seed, policy)
    records = {j.job_id: j for j in result.jobs}
    out = []
    for i, (at, job, note, stopped, reason) in enumerate(sim.signals):
        rule = rule_of(note, stopped, reason)
        horizon = tenure = None
        m = _HORIZON.search(note)
        if rule in ("move", "resize") and m:
            horizon = float(m[1])
            nxt = next((s[0] for s in sim.signals[i + 1 :] if s[1] == job), None)
            rec = records[job]
            tenure = (nxt if nxt is not None else rec.finish_s if rec.finish_s is not None else result.end_s) - at
        out.append(Restart(at, job, rule, guard_of(note), horizon, tenure, note))
    return out, len(result.jobs), sum(j.restarts for j in result.jobs)


def main() -> None:
    args = audit_parser(__doc__, "restart").parse_args()
    restarts, jobs, _ = audit(args.family, args.load, args.seed, args.policy)
    if args.json:
        print(json.dumps([asdict(r) for r in restarts], indent=1))
        return
    for r in restarts if args.each else ():
        print(f"t {r.at_s / 3600:6.2f} h job {r.job_id:4d} {r.rule:11s} {r.guard:11s} {r.note[:160]}")
    print(f"{args.family} {args.load:g}/{args.seed}: {len(restarts)} restarts, {len(restarts) / max(jobs, 1):.2f}/job")
    kinds = collections.Counter((r.rule, r.guard) for r in restarts)
    for (rule, guard), n in kinds.most_common():
        print(f"  {n:4d}  {rule:11s} guard: {guard}")
    moves = [r for r in restarts if r.tenure_s is not None and r.horizon_s]
    if moves:
        short = sum(r.tenure_s < r.horizon_s for r in moves)
        print(
            f"  moves: priced over {sum(r.horizon_s for r in moves) / len(moves) / 60:.0f} min on average, kept "
            f"{sum(r.tenure_s for r in moves) / len(moves) / 60:.0f} min; {short} of {len(moves)} left sooner"
        )
    per_job = collections.Counter(r.job_id for r in restarts)
    print("  most restarted: " + ", ".join(f"job {j} x{n}" for j, n in per_job.most_common(5)))


if __name__ == "__main__":
    main()
