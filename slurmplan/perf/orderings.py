"""The orderings the Megatron thesis states for its parallel-configuration figures, held against the model.

Figures 4.13-4.15 (thesis section 4.5.4) publish curves whose values are not in the text, but the text states
their shape, and the authors' reproduction scripts (NVIDIA/Megatron-LM ``examples/sc21/run_figure_1{3,4,5}.sh``)
give every run's plan: 64 A100s (8 DGX A100 nodes), micro-batch 1, activation recomputation, Megatron's own DDP,
no interleaving. A ranking the model gives is only as good as these orderings, so ``check_orderings`` predicts
every configuration of each figure at each of its batch sizes and says whether the stated ordering holds:

- Figure 4.13 (162B GPT, 32 layers, h 20480, 128 heads; (t, p) with t p = 64, d = 1; batch 32 and 128): "peak
  performance when the tensor-parallel size is equal to the number of GPUs in a single node" -> best at t = 8.
  And "sub-optimal combinations of tensor and pipeline model parallelism can lead to up to 2x lower throughput"
  (section 4.1) -> at most 2x between the fastest and slowest configuration.
- Figure 4.14 (5.9B GPT, 32 layers, h 3840, 32 heads; (p, d) with p d = 64, t = 1; batch 32, 128, 512): "for each
  batch size, the throughput decreases as the pipeline-parallel size increases".
- Figure 4.15 (the same 5.9B model; (t, d) with t d = 64, p = 1; batch 32, 128, 512): throughput decreases as
  the tensor-parallel size increases ("the all-to-all communication required in tensor model parallelism ...
  dominates end-to-end training time ... as the tensor-model-parallel size increases, we perform smaller matrix
  multiplications on every GPU, decreasing utilization").

Figures 4.12 and 4.18 (``check_schedules``; 175B GPT, 96 layers, on 96 A100s, t 8, p 12, micro-batch 1,
recomputation, batch 12-60; ``run_figure_12.sh``/``run_figure_18.sh``: 2 layers per virtual stage, so v = 4):

- Figure 4.12: the interleaved schedule (with scatter/gather) is faster than the default at every batch, and "this
  gap closes as the batch size increases".
- Figure 4.18: scatter/gather improves throughput "by up to 11%" (interleaved, largest at large batch). Without it
  every tensor-parallel rank sends the whole ``b s h`` activation over its own link (Figure 4.9) instead of a 1/t
  slice, so the run costs ``(t - 1) x`` the model's pipeline traffic more. Held: the largest gain over the batches
  within 5 points of 11 %.
- Section 4.5.3: "Without the scatter/gather optimization, the default schedule performs better than the
  interleaved schedule at larger batch sizes (not shown)": at batch 60, the largest the figure shows, interleaved
  without scatter/gather below the default schedule (with it, as the figure's default runs). The first batch at
  which the model puts the default ahead is reported too, for the reading "batches beyond the figure".

Takeaway #1 of section 4.3.2 (``check_takeaway_1``): "tensor model parallelism should generally be used up to
degree g when using g-GPU servers, and then pipeline parallelism". It is derived at d = 1 (Figure 4.13), and the
thesis states no measurement at d > 1, so it is checked on Table 4.1's runs (d = 16-32) in two readings:

- same schedule: the paper's t = 8 plan against t = 4 with p doubled, the micro-batch, interleaving and
  recomputation kept (where the layers divide over the stages);
- best schedule: the model's best t = 8 plan against its best t < 8 plan at the same model-parallel size t p,
  with recomputation as every Table 4.1 run, micro-batch and interleaving free (as far as the 2021 code runs them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slurmplan.domain import Plan
from slurmplan.perf.compute import ModelTerms
from slurmplan.perf.hardware import get_gpu, with_node_shape
from slurmplan.perf.models import ModelSpec, get_model
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.published import PublishedRow
from slurmplan.perf.rubick import RubickConstants, predict, published_constants
from slurmplan.perf.search import predict_plan, search_plans

GPUS = 64
FIG_162B = ModelSpec("fig4.13-162b", layers=32, hidden=20480, heads=128, seq_len=2048, vocab=51200)
FIG_5_9B = ModelSpec("fig4.14-5.9b", layers=32, hidden=3840, heads=32, seq_len=2048, vocab=51200)


@dataclass(frozen=True)
class StatedOrdering:
    """One figure's stated shape: ``configs`` are (t, p, d) in the figure's order; ``claim`` is ``decreasing``
    (each configuration slower than the one before), ``peak:<i>`` (configuration i is the fastest) or
    ``spread:<x>`` (the fastest at most x times the slowest)."""

    id: str
    source: str
    model: ModelSpec
    configs: tuple[tuple[int, int, int], ...]
    batches: tuple[int, ...]
    claim: str


ORDERINGS = (
    StatedOrdering(
        "fig4.13-peak-at-t8",
        "thesis fig. 4.13 / run_figure_13.sh (batch 32, 128)",
        FIG_162B,
        tuple((64 // p, p, 1) for p in (2, 4, 8, 16, 32)),
        (32, 128),
        "peak:2",
    ),
    StatedOrdering(
        "fig4.13-at-most-2x",
        "thesis section 4.1 ('up to 2x lower throughput') on fig. 4.13's runs",
        FIG_162B,
        tuple((64 // p, p, 1) for p in (2, 4, 8, 16, 32)),
        (32, 128),
        "spread:2.0",
    ),
    StatedOrdering(
        "fig4.14-falls-with-p",
        "thesis fig. 4.14 / run_figure_14.sh (batch 32, 128, 512)",
        FIG_5_9B,
        tuple((1, p, 64 // p) for p in (2, 4, 8, 16, 32)),
        (32, 128, 512),
        "decreasing",
    ),
    StatedOrdering(
        "fig4.15-falls-with-t",
        "thesis fig. 4.15 / run_figure_15.sh (batch 32, 128, 512)",
        FIG_5_9B,
        tuple((t, 1, 64 // t) for t in (2, 4, 8, 16, 32)),
        (32, 128, 512),
        "decreasing",
    ),
)


def _holds(values: list[float], claim: str) -> bool:
    if claim == "decreasing":
        return all(a > b for a, b in zip(values, values[1:], strict=False))
    if claim.startswith("spread:"):
        return max(values) <= float(claim.split(":", 1)[1]) * min(values)
    peak = int(claim.split(":", 1)[1])
    return max(range(len(values)), key=values.__getitem__) == peak


def check_orderings(terms: ModelTerms | None = None, rubick: RubickConstants | None = None) -> list[dict[str, object]]:
    """Per figure and batch: the model's samples/s of each configuration and whether the stated order holds."""
    terms, rubick = _constants(terms, rubick)
    gpu = with_node_shape(get_gpu("a100-80g"), 8)
    out: list[dict[str, object]] = []
    for o in ORDERINGS:
        for batch in o.batches:
            values = []
            for t, p, d in o.configs:
                plan = Plan(dp=d, tp=t, pp=p, micro_batch=1, grad_accum=batch // d, checkpointing=True)
                values.append(predict_plan(o.model, gpu, plan, constants=rubick, stack="megatron-2021", terms=terms))
            out.append(
                {
                    "id": o.id,
                    "batch": batch,
                    "configs": [f"t{t} p{p} d{d}" for t, p, d in o.configs],
                    "samples_per_s": [round(v, 3) for v in values],
                    "claim": o.claim,
                    "holds": _holds(values, o.claim),
                }
            )
    return out


SCHEDULE_BATCHES = (12, 24, 36, 48, 60)
"""``run_figure_12.sh`` / ``run_figure_18.sh``: 'Batch size options = [12, 24, 36, ..., 60]'."""
SCATTER_GATHER_GAIN = 0.11
"""Section 4.5.7: 'an improvement of up to 11% in throughput' (Figure 4.18)."""
GAIN_TOLERANCE = 0.05


def _constants(terms: ModelTerms | None, rubick: RubickConstants | None) -> tuple[ModelTerms, RubickConstants]:
    default_terms, default_rubick = published_constants()
    return terms or default_terms, rubick or default_rubick


def schedule_times(
    batch: int, terms: ModelTerms | None = None, rubick: RubickConstants | None = None
) -> dict[str, float]:
    """Seconds per iteration of Figure 4.12/4.18's runs at ``batch``: ``default`` (v = 1), ``interleaved``
    (v = 4), each also without scatter/gather (``(t - 1) x`` the pipeline traffic more, Figure 4.9)."""
    terms, rubick = _constants(terms, rubick)
    gpu = with_node_shape(get_gpu("a100-80g"), 8)
    plans = [
        Plan(dp=1, tp=8, pp=12, micro_batch=1, grad_accum=batch, checkpointing=True, virtual_stages=v) for v in (1, 4)
    ]
    timing = predict(
        get_model("gpt3-175b"), PlanSpace.from_plans(plans, 8), gpu, rubick, stack="megatron-2021", terms=terms
    )
    out = {}
    for i, name in enumerate(("default", "interleaved")):
        out[name] = float(timing.t_iter[i])
        out[f"{name}_no_scatter_gather"] = float(timing.t_iter[i] + (plans[i].tp - 1) * timing.comm_pp[i])
    return out


def check_schedules(terms: ModelTerms | None = None, rubick: RubickConstants | None = None) -> list[dict[str, object]]:
    """Figures 4.12 and 4.18 and section 4.5.3's statement (module docstring), one result each."""
    times = {b: schedule_times(b, terms, rubick) for b in SCHEDULE_BATCHES}
    speedup = [times[b]["default"] / times[b]["interleaved"] for b in SCHEDULE_BATCHES]
    gains = [times[b]["interleaved_no_scatter_gather"] / times[b]["interleaved"] - 1.0 for b in SCHEDULE_BATCHES]
    last = times[SCHEDULE_BATCHES[-1]]
    no_sg_ratio = last["default"] / last["interleaved_no_scatter_gather"]
    crossover = next(
        (b for b in range(12, 481, 12) if _default_ahead(times.get(b) or schedule_times(b, terms, rubick))), None
    )
    return [
        {
            "id": "fig4.12-interleaved-ahead-gap-closing",
            "batches": list(SCHEDULE_BATCHES),
            "interleaved_over_default": [round(x, 4) for x in speedup],
            "holds": all(x > 1.0 for x in speedup) and _holds(speedup, "decreasing"),
        },
        {
            "id": "fig4.18-scatter-gather-up-to-11pct",
            "batches": list(SCHEDULE_BATCHES),
            "gain": [round(x, 4) for x in gains],
            "holds": abs(max(gains) - SCATTER_GATHER_GAIN) <= GAIN_TOLERANCE,
        },
        {
            "id": "s4.5.3-no-scatter-gather-default-ahead-at-batch-60",
            "batches": [SCHEDULE_BATCHES[-1]],
            "interleaved_no_sg_over_default": round(no_sg_ratio, 4),
            "model_default_ahead_from_batch": crossover,
            "holds": no_sg_ratio < 1.0,
        },
    ]


def _default_ahead(times: dict[str, float]) -> bool:
    """The default schedule ahead of interleaving without scatter/gather (section 4.5.3), at one batch's times."""
    return times["default"] < times["interleaved_no_scatter_gather"]


def check_takeaway_1(rows: tuple[PublishedRow, ...]) -> list[dict[str, object]]:
    """Takeaway #1 on Table 4.1's runs with t = 8 and p > 1 or a t = 4 alternative (module docstring): samples/s
    of the t = 8 plan and of its t < 8 rival in both readings; ``holds`` when the t = 8 plan is not slower."""
    out: list[dict[str, object]] = []
    for row in (r for r in rows if r.table == "megatron-t4.1" and r.run.plan.tp == 8):
        run, plan = row.run, row.run.plan
        paper = predict_plan(row.model, run.gpu, plan, constants=published_constants()[1], stack=run.stack)
        half = replace(plan, tp=plan.tp // 2, pp=plan.pp * 2)
        if row.model.layers % (half.pp * half.virtual_stages) == 0:
            rival = predict_plan(row.model, run.gpu, half, constants=published_constants()[1], stack=run.stack)
            out.append(_takeaway("same-schedule", row.id, plan, paper, half, rival))
        search = search_plans(row.model, run.gpu, row.gpus, row.global_batch, stack=run.stack)
        space, order = search.space, search.order
        same = order[(space.tp[order] * space.pp[order] == plan.tp * plan.pp) & space.checkpointing[order]]
        best8 = [int(j) for j in same if space.tp[j] == 8][:1]
        below = [int(j) for j in same if space.tp[j] < 8][:1]
        if best8 and below:
            value = search.timing.throughput
            out.append(
                _takeaway(
                    "best-schedule",
                    row.id,
                    space.plan(best8[0]),
                    float(value[best8[0]]),
                    space.plan(below[0]),
                    float(value[below[0]]),
                )
            )
    return out


def _takeaway(reading: str, row: str, plan: Plan, value: float, rival: Plan, rival_value: float) -> dict[str, object]:
    return {
        "id": f"takeaway1-{reading}",
        "row": row,
        "t8": plan.short(),
        "t8_samples_per_s": round(value, 3),
        "rival": rival.short(),
        "rival_samples_per_s": round(rival_value, 3),
        "holds": value >= rival_value,
    }
