"""What Slurm can and cannot change about a job, declared once.

The Slurm backend declares these rules (``SlurmBackend.rules``), the simulated backend enforces the same value
(``SimBackend.rules``, refusing what Slurm refuses with Slurm's message), and the tick pipeline shapes its
actions by them (``slurmplan.pipeline``). Each rule was checked on Slurm 22.05 (``/work/shared/DESIGN.md``):

* a *typed* pending request (``--gres=gpu:a100:2``) keeps its type; its count may change. Slurm accepts an
  update to another type but the job then stays pending for ever (BadConstraints), so it is refused up front;
* typed <-> untyped is refused by Slurm ("with and without type identification");
* an *untyped* request (``--gres=gpu:2``) moves between GPU types through the node feature named after the
  type (``--constraint=t4`` at submission, ``Features=a100`` by update). A type named only in the constraint
  is therefore a preference the daemon may change, unless the job's hints restrict its types (``types=``);
* a requeued batch job may start again only ``cred_expire + 1`` seconds later (121 s by default);
* a running job is moved by a checkpoint signal first, then requeued when its grace period ends.

Imports nothing but the domain: ``sim`` and ``slurm`` both depend on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slurmplan.domain import SLURM_REQUEUE_DELAY_S, GpuType, JobId, ValidationError

MIXED_TYPES_MESSAGE = "Invalid GRES specification (with and without type identification)"
"""Slurm 22.05's refusal of a typed <-> untyped change of a job's GPU request."""


@dataclass(frozen=True)
class SlurmRules:
    """One Slurm version's rules for changing a job; a value, so both backends can hold the same one."""

    name: str = "slurm-22.05"
    version: tuple[int, int] = (22, 5)
    typed_keeps_type: bool = True
    """A pending typed request keeps its type; only its count may change."""
    mixed_type_refused: bool = True
    """A typed request cannot become untyped and an untyped one cannot become typed."""
    untyped_moves_by_feature: bool = True
    """An untyped request changes GPU type through the node feature named after the type (``Features=``)."""
    requeue_waits_cred_expire: bool = True
    """A requeued batch job stays pending (reason BeginTime) until ``cred_expire`` + 1 s have passed."""
    requeue_start_delay_s: float = SLURM_REQUEUE_DELAY_S
    """Seconds after a requeue before the job may start again (``cred_expire`` + 1; 120 s is Slurm's default)."""
    signal_then_grace: bool = True
    """A move of a running job is a checkpoint signal first, a requeue only when the grace period is over."""
    start_now_on_other_nodes: bool = True
    """A requeued job pinned to nodes it was not running on may skip the wait (``StartTime=now``, which the
    daemon sets before releasing it); on a node it just left the new launch would meet the revoked credential."""

    @property
    def label(self) -> str:
        """The version as Slurm writes it (``24.11``)."""
        return f"{self.version[0]}.{self.version[1]:02d}"

    def __post_init__(self) -> None:
        if not self.requeue_start_delay_s >= 0:
            raise ValidationError("requeue_start_delay_s", self.requeue_start_delay_s, "seconds >= 0", "slurm rules")

    def may_skip_requeue_wait(self, ran_on: Iterable[str], target: Iterable[str] | None) -> bool:
        """Whether a requeued job released onto ``target`` may start before ``requeue_start_delay_s`` is over.

        The Slurm backend resets the begin time exactly then (``StartTime=now``), the simulator skips its wait
        then, or it would predict a ``cred_expire`` wait for every move the daemon makes. Only when the job was
        pinned to nodes it was not running on: a node it just left revoked its launch credential, and a new
        launch there within the same second is killed outright ("Killing non-startable batch job: Job credential
        revoked", the job ends FAILED; seen on 22.05). Unknown nodes: keep the wait.
        """
        ran, tgt = frozenset(ran_on), frozenset(target or ())
        return self.start_now_on_other_nodes and bool(ran) and bool(tgt) and not (ran & tgt)

    def type_change_error(
        self, job_id: JobId, typed: bool, current: GpuType | None, wanted: GpuType | None, request: str = ""
    ) -> ValidationError | None:
        """Why Slurm would not let a pending job's GPU request move from ``current`` to ``wanted`` (None: it may).

        ``typed`` says whether the request names its type in the GRES (``--gres=gpu:a100:2``) rather than in a
        constraint; ``wanted`` None means "type unchanged". The message is the one both backends report.
        """
        if wanted is None or wanted == current or not typed or not self.typed_keeps_type:
            return None
        slurm = f"Slurm {self.label}"
        return ValidationError(
            "gpu_type",
            wanted,
            f"{current} only: {slurm} cannot change the GPU type of a job submitted with a typed "
            f"request ({request or f'gres:gpu:{current}'}); submit with --gres=gpu:N --constraint=TYPE to let "
            "slurmplan move it",
            f"update job {job_id}",
        )


SLURM_22_05 = SlurmRules()
"""Slurm 22.05 (Debian 12), each rule checked on the dev cluster by ``tests/slurm/test_rules.py``."""

SLURM_24_11 = SlurmRules(name="slurm-24.11", version=(24, 11), typed_keeps_type=False, mixed_type_refused=False)
"""Slurm 24.11 (Debian 13), each rule checked on the dev cluster in the Debian 13 root by the same tests: a
pending typed request may be retyped (``TresPerNode=gres:gpu:v100:1`` on an a100 job runs it on a V100) and
may become untyped (``TresPerNode=gres:gpu:1`` is accepted); a requeued job still waits ``cred_expire`` + 1 s."""

KNOWN: tuple[SlurmRules, ...] = (SLURM_22_05, SLURM_24_11)
NEWEST = SLURM_24_11


def rules_for(version: tuple[int, int]) -> SlurmRules:
    """The rules of Slurm ``version`` (major, minor): the newest measured one not newer than it.

    A version older than every measured one is refused (its rules are unknown); a newer one gets the newest
    measured rules, since Slurm changes these behaviours rarely and the daemon must keep working on upgrade.
    """
    older = [r for r in KNOWN if r.version <= tuple(version)]
    if not older:
        known = ", ".join(r.label for r in KNOWN)
        raise ValueError(f"Slurm {version[0]}.{version[1]}: no measured rules; slurmplan knows {known} and newer")
    return max(older, key=lambda r: r.version)


def rules_named(name: str) -> SlurmRules:
    """The rules for a version given as text (``24.11``, ``slurm-22.05``), refused by name when unknown."""
    text = name.removeprefix("slurm-").strip()
    for rules in KNOWN:
        if text == rules.label:
            return rules
    allowed = ", ".join(r.label for r in KNOWN)
    raise ValidationError("slurm_version", name, f"one of {allowed}", "slurm rules")
