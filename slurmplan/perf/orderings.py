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

The 39B row of Table 4.1 is not such a measurement: the paper ran t = 8 by its rule of thumb and never timed
t = 4 at that size (benchmarks/bench_perf_model.py prints both).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmplan.domain import Plan
from slurmplan.perf.compute import ModelTerms
from slurmplan.perf.hardware import get_gpu, with_node_shape
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.rubick import RubickConstants, published_constants
from slurmplan.perf.search import predict_plan

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
    default_terms, default_rubick = published_constants()
    terms, rubick = terms or default_terms, rubick or default_rubick
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
