"""``--faults kill-daemon=N,restart-slurmctld=M[,fail-scontrol=P]``: what to inject and when.

Kills and restarts are spread at random over the part of the run where jobs are active (5%-85% of the wall time
the prediction expects), so they land at random points of the daemon's ticks. ``fail-scontrol`` is a probability
applied to every scontrol call the daemon makes (a wrapper on its PATH, see ``slurm.replay_ops``).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from slurmplan.domain import ValidationError

ALLOWED = "kill-daemon=N,restart-slurmctld=M,fail-scontrol=P (N, M integers >= 0; P in [0, 1))"


@dataclass(frozen=True)
class FaultPlan:
    kill_daemon: int = 0
    restart_slurmctld: int = 0
    fail_scontrol: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.kill_daemon or self.restart_slurmctld or self.fail_scontrol)

    def schedule(self, expected_wall_s: float, rng: random.Random) -> FaultSchedule:
        lo, hi = 0.05 * expected_wall_s, 0.85 * expected_wall_s
        times = [(rng.uniform(lo, hi), "kill_daemon") for _ in range(self.kill_daemon)]
        times += [(rng.uniform(lo, hi), "restart_slurmctld") for _ in range(self.restart_slurmctld)]
        return FaultSchedule(sorted(times))


@dataclass
class FaultSchedule:
    times: list[tuple[float, str]] = field(default_factory=list)

    def due(self, now: float) -> list[str]:
        """The faults whose time has come (each returned once)."""
        out = []
        while self.times and self.times[0][0] <= now:
            out.append(self.times.pop(0)[1])
        return out

    def again(self, kind: str, now: float) -> None:
        """A fault that came due when it could not be injected (the daemon was down, being started again): due
        again at the next pass, so that a kill is never dropped for landing between two starts."""
        self.times.insert(0, (now, kind))

    def left(self) -> dict[str, int]:
        """The faults not injected, by kind: the replay ended before their time came (its jobs ran faster than
        predicted), or a kill's came only while the daemon was down. The summary reports them, so that fewer faults
        than asked for is never silent."""
        return dict(Counter(kind for _, kind in self.times))


def parse_faults(spec: str | None) -> FaultPlan:
    """Parse the ``--faults`` value; an error names the part, its value and what is allowed."""
    if not spec:
        return FaultPlan()
    values: dict[str, float] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in ("kill-daemon", "restart-slurmctld", "fail-scontrol"):
            raise ValidationError("faults", part, ALLOWED, "replay")
        if name in values:
            raise ValidationError("faults", part, "each fault kind once", "replay")
        try:
            number = float(raw) if name == "fail-scontrol" else int(raw)
        except ValueError:
            raise ValidationError(f"faults.{name}", raw, ALLOWED, "replay") from None
        if number < 0 or (name == "fail-scontrol" and number >= 1):
            raise ValidationError(f"faults.{name}", raw, ALLOWED, "replay")
        values[name] = number
    return FaultPlan(
        int(values.get("kill-daemon", 0)), int(values.get("restart-slurmctld", 0)), values.get("fail-scontrol", 0.0)
    )
