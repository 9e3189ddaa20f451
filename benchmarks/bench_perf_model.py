"""The performance model against the published measurements (issue 28's goals).

Prints, per table of ``slurmplan/perf/data/published.yaml``:
- the in-sample error: mean |predicted / published - 1| over the table's fitted rows, with the global constants
  fitted to every fitted row (``perf.fit_published``, as ``slurmplan fit --published`` does);
- the leave-one-table-out error: the constants fitted on every other table, this table predicted;
and for Megatron's Table 4.1 whether the paper's plan is among the model's top 3, or within 5 % of its best plan
(``perf.search.search_plans`` over every plan that fits in memory), plus the median time of the 1T plan search.

Goals (issue 28): leave-one-table-out mean <= 7.4 % and no table above 15 %; in-sample <= 5 %; the paper's plan
within 5 % of the model's best in every Table 4.1 row; the 1T search on 3,072 GPUs under 1 s. Also printed: whether
the orderings the thesis states for its Figures 4.13-4.15 (``perf.orderings``) hold in the model.

Also printed: the statements of Figures 4.12/4.18, section 4.5.3 and takeaway #1 (``perf.orderings``), and for
each Table 4.1 row the best plan without activation recomputation against the best with it, under the model's
memory and under the most the 2021 code could have held (``recompute_evidence``).

Run: ``python3 benchmarks/bench_perf_model.py [--quick] [--json]`` (about a minute; ``--quick`` skips the
leave-one-table-out fits and uses the shipped constants for the in-sample figures).

Last measured (9th session, ``--json``, 55 s on the shared 2-core machine): 37 rows fitted, 52 kept unfitted;
in-sample mean 4.3 % (Table 4.1 2.1 %, 4.2 2.9 %, stated 3.8 %, 2BW 0.8 %, Gavel Transformer 10.7 %, Gavel 6.1
5.4 %); leave-one-table-out mean 6.3 %, worst 11.5 % (Gavel Transformer); 1T search 1.9 ms. Table 4.1: paper's
plan within 5 % of the best in 5/10 rows among all plans (top 3 in 4), 9/10 among plans with recomputation (top 3
in 6). Figures 4.13-4.15: 10/10 hold; Figures 4.12/4.18, section 4.5.3 and takeaway #1: 8/11 (misses: section
4.5.3 at batch 60, 1.023; takeaway #1 best-schedule at 18B and 39B). Without recomputation 1.7B-39B fit and are
1.19-1.25x faster at the model's memory, 1.15-1.24x at the 2021 code's most (at micro-batch 1-2; at the paper's
micro-batches no row fits without recomputation: 139-357 GB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from dataclasses import replace

import numpy as np

from slurmplan.perf.fit_published import fit_published, predict_rows
from slurmplan.perf.memory import plan_memory
from slurmplan.perf.orderings import check_orderings, check_schedules, check_takeaway_1
from slurmplan.perf.published import PublishedRow, fitted_rows, load_published
from slurmplan.perf.rubick import published_constants
from slurmplan.perf.search import predict_plan, search_plans

GOALS = {"loto_mean": 0.074, "loto_table_max": 0.15, "in_sample_mean": 0.05, "plan_within": 0.05, "search_1t_s": 1.0}


def _errors(rows: tuple[PublishedRow, ...], predicted: np.ndarray) -> dict[str, float]:
    by_table: dict[str, list[float]] = defaultdict(list)
    for row, value in zip(rows, predicted, strict=True):
        by_table[row.table].append(abs(float(value) / row.value - 1.0))
    return {table: float(np.mean(errs)) for table, errs in by_table.items()}


def in_sample(rows: tuple[PublishedRow, ...], refit: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Per-table and per-row errors with constants fitted to every row (or the shipped ones)."""
    if refit:
        fit = fit_published(rows)
        predicted = predict_rows(rows, fit.terms, fit.rubick)
    else:
        predicted = predict_rows(rows)
    per_row = {r.id: float(p / r.value - 1.0) for r, p in zip(rows, predicted, strict=True)}
    return _errors(rows, predicted), per_row


def held_out(everything: tuple[PublishedRow, ...], fitted_tables: set[str]) -> dict[str, dict]:
    """The model's figure for the unfitted ratio rows of fitted tables (kept out with a reason, e.g. Gavel's
    batch-256 Transformer entries), so what the fit leaves out is still shown."""
    rows = tuple(r for r in everything if not r.fit and r.baseline is not None and r.table in fitted_tables)
    if not rows:
        return {}
    predicted = predict_rows(rows)
    return {
        r.id: {"published": r.value, "predicted": round(float(p), 4), "error": round(float(p / r.value - 1.0), 4)}
        for r, p in zip(rows, predicted, strict=True)
    }


def leave_one_table_out(rows: tuple[PublishedRow, ...]) -> dict[str, float]:
    out = {}
    for table in sorted({r.table for r in rows}):
        train = tuple(r for r in rows if r.table != table)
        test = tuple(r for r in rows if r.table == table)
        fit = fit_published(train)
        out[table] = _errors(test, predict_rows(test, fit.terms, fit.rubick))[table]
    return out


def table_4_1_plans(rows: tuple[PublishedRow, ...]) -> list[dict]:
    """For each Table 4.1 row: the paper's plan against the model's best plan that fits in memory and that the
    row's stack (``megatron-2021``: no ZeRO) can run; and against the best with activation recomputation, the
    setting of every Table 4.1 run (``run_table_1.sh``), which compares the t, p and micro-batch choices."""
    terms, rubick = published_constants()
    out = []
    for row in (r for r in rows if r.table == "megatron-t4.1"):
        run = row.run
        search = search_plans(row.model, run.gpu, row.gpus, row.global_batch, rubick, stack=run.stack)
        paper = predict_plan(row.model, run.gpu, run.plan, constants=rubick, stack=run.stack, terms=terms)
        order = search.order
        with_gc = order[search.space.checkpointing[order]]
        plans = [search.space.plan(int(j)) for j in order]
        rank = plans.index(run.plan) + 1 if run.plan in plans else None
        best, best_gc = (float(search.timing.throughput[o[0]]) if o.size else float("nan") for o in (order, with_gc))
        out.append(
            {
                "row": row.id,
                "paper_plan": run.plan.short(),
                "paper_rank": rank,
                "model_best": plans[0].short() if plans else None,
                "paper_over_best": round(paper / best, 4),
                "within_5pct": paper >= (1.0 - GOALS["plan_within"]) * best,
                "top3": rank is not None and rank <= 3,
                "model_best_with_recompute": search.space.plan(int(with_gc[0])).short() if with_gc.size else None,
                "paper_over_best_with_recompute": round(paper / best_gc, 4),
                "within_5pct_with_recompute": paper >= (1.0 - GOALS["plan_within"]) * best_gc,
                "top3_with_recompute": run.plan in [search.space.plan(int(j)) for j in with_gc[:3]],
            }
        )
    return out


ACTIVATION_FACTOR_BOUND = 2.34
"""The upper bound the thesis's Figure 4.17 puts on the 2021 code's stored activations over Korthikanti et al.'s
count (``perf.stacks``, ``megatron-2021``; the model uses 1.25)."""
FP16_LOGIT_BYTES = 2.0
"""Beside the fp32 logits the loss keeps (counted): the fp16 logits, alive while the loss is computed and again when
its gradient is cast back (Megatron-LM's ``vocab_parallel_cross_entropy(output.float(), labels)``)."""
EXTRA_RESERVE_BYTES = 1.5e9
"""NCCL buffers of the 2021 run's several communicators (tensor, pipeline, data, embedding) beyond the 1.5 GB the
model keeps for the CUDA context and buffers (NCCL allocates its buffers per channel and peer of each)."""
PESSIMISTIC_USABLE = 0.90
"""Share of the 80 GB the caching allocator hands out under fragmentation (the model uses 0.95)."""


def _best(search, mask: np.ndarray) -> tuple[str | None, float, float]:
    """(plan, samples/s, GB counted by the model) of the fastest plan where ``mask``."""
    hits = np.flatnonzero(mask)
    if not hits.size:
        return None, float("nan"), float("nan")
    j = int(hits[np.argmax(search.timing.throughput[hits])])
    return search.space.plan(j).short(), float(search.timing.throughput[j]), float(search.memory.total[j] / 1e9)


def _fits_2021_at_most(search, row: PublishedRow) -> np.ndarray:
    """Plans that fit with everything the 2021 code could hold beyond the model's count (``recompute_evidence``)."""
    space, memory = search.space, search.memory
    logits = FP16_LOGIT_BYTES * row.model.seq_len * space.micro_batch * row.model.vocab / space.tp
    usable = row.run.gpu.memory_gb * 1e9 * PESSIMISTIC_USABLE
    return memory.fits_host & (memory.total + logits + EXTRA_RESERVE_BYTES <= usable)


def recompute_evidence(rows: tuple[PublishedRow, ...]) -> list[dict]:
    """Per Table 4.1 row: the best plan without activation recomputation against the best with it, under the
    model's memory and under everything the 2021 code could have held on top of it (the most activation memory
    Figure 4.17 allows, the fp16 logits beside the fp32 ones, 1.5 GB more NCCL buffers, 90 % of the GPU usable).
    Where a plan without recomputation fits even then and is faster, the model's preference is what the 2021 code
    would have measured, not an artefact of its memory model; the paper never ran these models without it."""
    out = []
    for row in (r for r in rows if r.table == "megatron-t4.1"):
        run = row.run
        unrecomputed = plan_memory(row.model, replace(run.plan, checkpointing=False), run.gpu, run.stack)
        entry: dict = {"row": row.id, "paper_plan_without_recompute_gb": round(float(unrecomputed.total[0]) / 1e9, 1)}
        for name, stack in (
            ("model", run.stack),
            ("pessimistic", replace(run.stack, activation_factor=ACTIVATION_FACTOR_BOUND)),
        ):
            search = search_plans(row.model, run.gpu, row.gpus, row.global_batch, stack=stack)
            ok = stack.runs(search.space) & (search.memory.fits if name == "model" else _fits_2021_at_most(search, row))
            plan, value, gb = _best(search, ok & ~search.space.checkpointing)
            gc_plan, gc_value, _ = _best(search, ok & search.space.checkpointing)
            entry[name] = {
                "no_recompute": plan,
                "no_recompute_gb_counted": round(gb, 1),
                "with_recompute": gc_plan,
                "no_recompute_over_recompute": round(value / gc_value, 4) if plan else None,
            }
        out.append(entry)
    return out


def search_1t_ms(rows: tuple[PublishedRow, ...], repeats: int = 5) -> float:
    row = next(r for r in rows if r.id == "t41-1t")
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        search_plans(row.model, row.run.gpu, row.gpus, row.global_batch, stack=row.run.stack)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shipped constants, no leave-one-table-out fits")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    everything = load_published()
    rows = fitted_rows(everything)
    ins, per_row = in_sample(rows, refit=not args.quick)
    loto = {} if args.quick else leave_one_table_out(rows)
    plans = table_4_1_plans(rows)
    counts = defaultdict(int)
    for r in rows:
        counts[r.table] += 1
    result = {
        "rows_fitted": len(rows),
        "rows_kept_unfitted": len(everything) - len(rows),
        "tables": {t: {"rows": counts[t], "in_sample": ins[t], "loto": loto.get(t)} for t in sorted(ins)},
        "in_sample_mean": float(np.mean(list(ins.values()))),
        "loto_mean": float(np.mean(list(loto.values()))) if loto else None,
        "loto_table_max": max(loto.values()) if loto else None,
        "per_row": per_row,
        "unfitted_rows": held_out(everything, set(ins)),
        "table_4_1_plans": plans,
        "plans_within_5pct": sum(p["within_5pct"] for p in plans),
        "plans_top3": sum(p["top3"] for p in plans),
        "plans_within_5pct_with_recompute": sum(p["within_5pct_with_recompute"] for p in plans),
        "plans_top3_with_recompute": sum(p["top3_with_recompute"] for p in plans),
        "recompute_evidence": recompute_evidence(rows),
        "search_1t_ms": search_1t_ms(rows),
        "stated_orderings": (orderings := check_orderings()),
        "stated_orderings_held": f"{sum(o['holds'] for o in orderings)}/{len(orderings)}",
        "schedule_statements": (schedules := check_schedules()),
        "takeaway_1": (takeaway := check_takeaway_1(rows)),
        "schedule_and_takeaway_held": f"{sum(o['holds'] for o in schedules + takeaway)}/{len(schedules + takeaway)}",
        "goals": GOALS,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{'table':<20} {'rows':>4} {'in-sample':>10} {'leave-one-out':>14}")
    for t, v in result["tables"].items():
        loto_s = f"{100 * v['loto']:13.1f}%" if v["loto"] is not None else f"{'-':>14}"
        print(f"{t:<20} {v['rows']:>4} {100 * v['in_sample']:9.1f}% {loto_s}")
    loto_mean = f"{100 * result['loto_mean']:.1f}%" if loto else "-"
    for rid, v in result["unfitted_rows"].items():
        print(f"  unfitted {rid}: published {v['published']}, model {v['predicted']} ({100 * v['error']:+.1f}%)")
    print(f"mean: in-sample {100 * result['in_sample_mean']:.1f}%, leave-one-table-out {loto_mean}")
    for p in plans:
        print(
            f"{p['row']:<10} paper {p['paper_plan']:<26} rank {p['paper_rank']!s:>4}  "
            f"best {p['model_best']!s:<26} paper/best {p['paper_over_best']:.3f}  "
            f"with recompute: best {p['model_best_with_recompute']!s:<26} {p['paper_over_best_with_recompute']:.3f}"
        )
    print(
        f"Table 4.1: the paper's plan within 5 % of the model's best plan in {result['plans_within_5pct']}/"
        f"{len(plans)} rows among ALL plans (top 3 in {result['plans_top3']}); within 5 % in "
        f"{result['plans_within_5pct_with_recompute']}/{len(plans)} among plans WITH THE PAPER'S RECOMPUTE CHOICE "
        f"(every Table 4.1 run recomputed activations; top 3 in {result['plans_top3_with_recompute']})"
    )
    print("best plan without recomputation / best with it (model's memory | the 2021 code at its most memory):")
    for e in result["recompute_evidence"]:
        shown = [
            f"{x['no_recompute']} {x['no_recompute_over_recompute']}" if x["no_recompute"] else "none fits"
            for x in (e["model"], e["pessimistic"])
        ]
        at_paper = f"(the paper's plan without it: {e['paper_plan_without_recompute_gb']} GB)"
        print(f"  {e['row']:<10} {shown[0]:<40} | {shown[1]:<40} {at_paper}")
    print(f"1T plan search on 3,072 GPUs: {result['search_1t_ms']:.1f} ms median")
    print(f"orderings the thesis states for Figures 4.13-4.15: {result['stated_orderings_held']} hold")
    for o in result["stated_orderings"]:
        shown = ", ".join(f"{c} {v:.1f}" for c, v in zip(o["configs"], o["samples_per_s"], strict=True))
        print(f"{o['id']:<22} batch {o['batch']:>3}: {o['claim']:<10} {'holds' if o['holds'] else 'FAILS'}  ({shown})")
    print(f"figures 4.12/4.18 and takeaway #1 (perf.orderings): {result['schedule_and_takeaway_held']} hold")
    for o in result["schedule_statements"]:
        shown = {k: v for k, v in o.items() if k not in ("id", "holds")}
        print(f"  {o['id']:<52} {'holds' if o['holds'] else 'FAILS'}  {shown}")
    for o in result["takeaway_1"]:
        print(
            f"  {o['id']:<30} {o['row']:<9} {'holds' if o['holds'] else 'FAILS'}  {o['t8']} {o['t8_samples_per_s']} "
            f"vs {o['rival']} {o['rival_samples_per_s']} samples/s"
        )


if __name__ == "__main__":
    main()
