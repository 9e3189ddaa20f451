"""Trace generators: Gavel's continuous traces (bit-for-bit Gavel's stream) and LLM-heavy Crius/Rubick-style ones.

``gavel_trace`` follows Gavel's ``utils.generate_job`` draw for draw (one ``random.Random(seed + 2)`` for the
jobs, ``random.Random(seed + 3)`` for exponential inter-arrival times), so with the same seed and table order it
reproduces the jobs of Gavel's own dumps (checked by a test against ``../shared/data/gavel``).

``llm_trace`` is Philly/Microsoft-like (Jeon et al.): GPU counts heavy on 1-8 with a tail to 32, durations
log-uniform with a long tail, Poisson arrivals; models from the performance model's catalog; several accounts,
some of whose jobs are guaranteed (Rubick's MT variant) and some with deadlines (Crius-DDL).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from slurmplan.domain import JobClass, ValidationError
from slurmplan.perf.gavel_table import GavelTable
from slurmplan.sim.trace import TraceJob

GAVEL_TYPE_ORDER: tuple[str, ...] = (
    *(f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)),
    *(f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)),
    *(f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)),
    "A3C",
    "CycleGAN",
)
"""Gavel's JobTable order; ``rng.choice`` over it is what makes our stream equal Gavel's."""


def _scale_factor(r: float) -> int:
    if r < 0.7:
        return 1
    if r <= 0.8:
        return 2
    if r <= 0.95:
        return 4
    return 8


def gavel_trace(
    table: GavelTable,
    num_jobs: int,
    rate_per_h: float,
    *,
    multi_gpu: bool = False,
    seed: int = 0,
    window: tuple[int, int] | None = None,
) -> list[TraceJob]:
    """Gavel's continuous-single (``multi_gpu=False``) or continuous-multiple trace.

    ``window=(a, b)`` marks jobs a..b-1 as measured (Gavel's 4000-5000 style); None measures all.
    """
    if num_jobs < 1 or rate_per_h <= 0:
        raise ValidationError("num_jobs/rate", (num_jobs, rate_per_h), "num_jobs >= 1 and rate > 0", "gavel trace")
    known = set(table.job_types)
    types = [t for t in GAVEL_TYPE_ORDER if t in known] + sorted(known - set(GAVEL_TYPE_ORDER))
    distributed = set(table.distributed_types())
    jobs_rng, arrival_rng = random.Random(seed + 2), random.Random(seed + 3)
    lam = rate_per_h / 3600.0
    out, t = [], 0.0
    for i in range(num_jobs):
        scale = _scale_factor(jobs_rng.uniform(0, 1))
        scale = scale if multi_gpu else 1
        low, high = (1.5, 3) if jobs_rng.random() < 0.8 else (3, 4)
        duration = 60 * 10 ** jobs_rng.uniform(low, high)
        job_type = jobs_rng.choice(types)
        while scale > 1 and job_type not in distributed:
            job_type = jobs_rng.choice(types)
        if i > 0:
            t += -math.log(1.0 - arrival_rng.random()) / lam
        steps = duration * table.throughput(job_type, scale, "v100")
        in_window = window is None or window[0] <= i < window[1]
        out.append(
            TraceJob(i, t, scale, job_type=job_type, total_steps=steps, duration_s=duration, in_window=in_window)
        )
    return out


# ----------------------------------------------------------------------------------------------- LLM-heavy

PHILLY_GPUS: tuple[tuple[int, float], ...] = ((1, 0.35), (2, 0.15), (4, 0.2), (8, 0.2), (16, 0.07), (32, 0.03))
"""GPU-count mix in the spirit of the Philly trace (mostly small jobs, a tail of large ones)."""


LLM_MODELS: tuple[str, ...] = (
    "bert-large",
    "roberta-large",
    "t5-large",
    "vit-b",
    "gpt2-1.5b",
    "megatron-1.7b",
    "megatron-3.6b",
    "llama2-7b",
    "megatron-7.5b",
    "llama2-13b",
    "megatron-18b",
    "llama-30b",
)
"""Catalog models of Rubick's and Crius's size range (0.1B-30B); the 70B+ ones need more than most requests."""

FeasibleFn = Callable[[str, int, str], bool]
"""(model, GPUs, GPU type) -> whether the performance model finds any plan for that request."""


@dataclass(frozen=True)
class LlmTraceConfig:
    num_jobs: int = 1000
    rate_per_h: float = 40.0
    models: tuple[str, ...] = LLM_MODELS
    """Catalog models to draw from."""
    gpu_types: tuple[str, ...] = ("a100", "a40", "a10", "v100")
    accounts: tuple[str, ...] = ("vision", "nlp", "speech", "research")
    guaranteed_accounts: tuple[str, ...] = ("nlp",)
    guaranteed_share: float = 0.5
    """Share of a guaranteed account's jobs that are guaranteed (the rest best-effort)."""
    deadline_share: float = 0.1
    deadline_slack: tuple[float, float] = (1.5, 3.0)
    """Deadline = arrival + U(a, b) x dedicated duration."""
    elastic_share: float = 0.5
    """Share of jobs that accept between half and twice their requested GPUs (Crius's Cells N/2..2N)."""
    short_minutes: tuple[float, float] = (1.0, 2.5)
    long_minutes: tuple[float, float] = (2.5, 3.5)
    long_share: float = 0.2
    seed: int = 0


def perf_feasible(cluster: str) -> FeasibleFn:
    """Feasibility from the performance model on ``cluster`` (memoised: one search per model and size)."""
    from slurmplan.domain import Cluster, Hints
    from slurmplan.perf.candidates import job_candidates
    from slurmplan.sim.cluster import parse_cluster

    nodes = Cluster(parse_cluster(cluster).nodes())
    memo: dict[tuple[str, int], set[tuple[str, int]]] = {}

    def feasible(model: str, gpus: int, gpu_type: str) -> bool:
        if (model, gpus) not in memo:
            cands = job_candidates(Hints(model=model, gpus=gpus), nodes, ())
            memo[(model, gpus)] = {(c.cell.gpu_type, c.cell.gpus) for c in cands if c.throughput > 0}
        return (gpu_type, gpus) in memo[(model, gpus)]

    return feasible


def _workable(feasible: FeasibleFn | None, model: str, gpus: int, gpu_type: str, limit: int = 64) -> int | None:
    """Rubick's rule: a request the model cannot run with becomes the next workable count (doubling)."""
    if feasible is None:
        return gpus
    while gpus <= limit:
        if feasible(model, gpus, gpu_type):
            return gpus
        gpus *= 2
    return None


def _draw_gpus(rng: random.Random, mix: Sequence[tuple[int, float]]) -> int:
    r, acc = rng.random(), 0.0
    for gpus, p in mix:
        acc += p
        if r < acc:
            return gpus
    return mix[-1][0]


def llm_trace(config: LlmTraceConfig = LlmTraceConfig(), feasible: FeasibleFn | None = None) -> list[TraceJob]:
    """An LLM-heavy trace; every draw comes from one seeded stream, so it is a function of the config.

    With ``feasible`` (see ``perf_feasible``) a request the model cannot run with is raised to the next workable
    GPU count and its duration shortened to keep its GPU-hours, as Rubick built its traces; a job with no
    workable count up to 64 GPUs keeps its request (and will be reported unschedulable).
    """
    models = config.models
    if not models:
        raise ValidationError("models", models, "at least one catalog model", "llm trace")
    rng = random.Random(config.seed)
    lam = config.rate_per_h / 3600.0
    out, t = [], 0.0
    for i in range(config.num_jobs):
        if i > 0:
            t += -math.log(1.0 - rng.random()) / lam
        gpus = _draw_gpus(rng, PHILLY_GPUS)
        low, high = config.long_minutes if rng.random() < config.long_share else config.short_minutes
        duration = 60 * 10 ** rng.uniform(low, high)
        model = rng.choice(models)
        gpu_type = rng.choice(config.gpu_types)
        account = rng.choice(config.accounts)
        guaranteed = account in config.guaranteed_accounts and rng.random() < config.guaranteed_share
        deadline = None
        if rng.random() < config.deadline_share:
            deadline = t + rng.uniform(*config.deadline_slack) * duration
        workable = _workable(feasible, model, gpus, gpu_type)
        if workable is not None and workable != gpus:
            duration, gpus = duration * gpus / workable, workable
        hints: dict[str, object] = {}
        if rng.random() < config.elastic_share:
            hints = {"min_gpus": max(1, gpus // 2), "max_gpus": gpus * 2}
        out.append(
            TraceJob(
                job_id=i,
                arrival_s=t,
                gpus=gpus,
                model=model,
                gpu_type=gpu_type,
                duration_s=duration,
                account=account,
                job_class=JobClass.GUARANTEED if guaranteed else JobClass.BEST_EFFORT,
                deadline_s=deadline,
                extra_hints=hints,
            )
        )
    return out


def at_load(jobs: Sequence[TraceJob], gpus: int, span_s: float, load: float) -> list[TraceJob]:
    """The same jobs with every duration scaled by one factor so that the GPU-seconds they ask for (GPUs x duration
    on the requested configuration) are ``load`` x ``gpus`` x ``span_s``; each deadline keeps its slack in units of
    the job's own duration. Arrivals, sizes and every other draw stay as they were.

    A generated month stands in for a site's own history (``trace import --sacct``), and a history cannot hold
    more work than its cluster ran: ``llm_trace``'s mix at 50,000 jobs a month asks 1,000 GPUs for 1.87x what
    they can give, so its backlog, and with it every tick's work, grows all month. Only jobs with a duration can
    be scaled (``llm_trace``'s and the replay traces'); a job given in steps (Gavel's) is refused by id."""
    if not math.isfinite(load) or load <= 0:
        raise ValidationError("load", load, "an offered load > 0 (e.g. 0.8: 80 % of the cluster's GPU-hours)", "trace")
    if gpus <= 0 or not math.isfinite(span_s) or span_s <= 0:
        raise ValidationError("span_s", span_s, "a positive span over a cluster with GPUs", "trace")
    stepped = [j.job_id for j in jobs if j.duration_s is None or j.total_steps is not None]
    if stepped:
        raise ValidationError("duration_s", stepped[:5], "jobs given by duration (these are given in steps)", "trace")
    asked = sum(j.gpus * j.duration_s for j in jobs)  # type: ignore[operator]
    if asked <= 0:
        return list(jobs)
    factor = load * gpus * span_s / asked

    def scaled(j: TraceJob) -> TraceJob:
        deadline = None if j.deadline_s is None else j.arrival_s + (j.deadline_s - j.arrival_s) * factor
        return replace(j, duration_s=j.duration_s * factor, deadline_s=deadline)  # type: ignore[operator]

    return [scaled(j) for j in jobs]


REPLAY_MODELS: tuple[str, ...] = ("gpt2", "bert-large", "roberta-large", "t5-large", "vit-b")
"""The catalog models of the shipped replay trace (``site/devcluster/replay-trace.jsonl``): each fits one GPU."""


@dataclass(frozen=True)
class ReplayTraceConfig:
    """A short-job trace like the shipped replay trace, for the dev cluster's shape (a100 2x4, v100 2x4, t4 2x2).

    Issue 23's "fresh trace": 1-4 GPUs on one node, 6-70 minutes on the requested configuration (log-uniform),
    ``elastic_share`` of the jobs elastic 1-4, Poisson arrivals; a requested type (Slurm's ``--constraint``
    preference) on ``typed_share`` of the jobs, drawn from ``gpu_types``."""

    num_jobs: int = 28
    rate_per_h: float = 20.0
    seed: int = 0
    minutes: tuple[float, float] = (6.0, 70.0)
    elastic_share: float = 0.6
    typed_share: float = 0.7
    gpu_types: tuple[str, ...] = ("a100", "v100", "t4")
    models: tuple[str, ...] = REPLAY_MODELS


def replay_like_trace(config: ReplayTraceConfig = ReplayTraceConfig()) -> list[TraceJob]:
    """Jobs drawn from one seeded stream (a function of the config); GPU counts 1, 2 or 4 (one node of any type
    the dev cluster has: a t4 node has 2, so a 4-GPU t4 request becomes 2 GPUs)."""
    if config.num_jobs < 1 or config.rate_per_h <= 0:
        raise ValidationError("num_jobs/rate", (config.num_jobs, config.rate_per_h), "jobs >= 1, rate > 0", "trace")
    rng = random.Random(config.seed)
    lam = config.rate_per_h / 3600.0
    low, high = (math.log10(m) for m in config.minutes)
    out, t = [], 0.0
    for i in range(config.num_jobs):
        t += -math.log(1.0 - rng.random()) / lam
        gpus = _draw_gpus(rng, ((1, 0.35), (2, 0.4), (4, 0.25)))
        duration = 60 * 10 ** rng.uniform(low, high)
        model = rng.choice(config.models)
        gpu_type = rng.choice(config.gpu_types) if rng.random() < config.typed_share else None
        if gpu_type == "t4" and gpus > 2:
            gpus = 2
        hints = {"min_gpus": 1, "max_gpus": 4} if rng.random() < config.elastic_share else {}
        out.append(TraceJob(i + 1, round(t, 1), gpus, model=model, gpu_type=gpu_type, duration_s=round(duration, 1),
                            extra_hints=hints))  # fmt: skip
    return out
