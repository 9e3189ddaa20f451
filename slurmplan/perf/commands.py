"""CLI of the perf room: ``slurmplan plan`` (ranked plans for a model on given GPUs) and ``slurmplan fit``
(Rubick's constants from measured throughputs, with held-out error)."""

from __future__ import annotations

import argparse
import json
import logging
from typing import TYPE_CHECKING, Any

from slurmplan.domain import ValidationError

if TYPE_CHECKING:  # imported where used: scipy (fit) costs ~0.3 s on every `slurmplan` start otherwise
    from slurmplan.perf.fit import HoldoutReport
    from slurmplan.perf.models import ModelSpec
    from slurmplan.perf.search import RankedPlan

log = logging.getLogger(__name__)

COMPONENT_WORDS = {
    "forward": "forward compute",
    "backward": "backward compute",
    "comm_dp": "data-parallel gradient sync",
    "comm_tp": "tensor-parallel communication",
    "comm_pp": "pipeline communication",
    "optimizer": "optimizer step",
    "offload": "PCIe offload traffic",
    "bubble": "pipeline bubble",
}


def parse_gpus(text: str) -> list[tuple[str, int]]:
    """``a100:8,v100:4`` -> [("a100", 8), ("v100", 4)], types checked against the catalog."""
    from slurmplan.perf.hardware import default_catalog

    out = []
    catalog = default_catalog()
    for part in text.split(","):
        name, _, count = part.strip().partition(":")
        if not name or not count.isdigit() or int(count) < 1:
            raise ValidationError("gpus", part, "TYPE:N with N a positive integer, comma-separated", "plan")
        catalog.get(name)
        out.append((name.lower(), int(count)))
    return out


def _model(args: argparse.Namespace) -> ModelSpec:
    from slurmplan.perf.models import get_model, load_model_file

    if bool(args.model) == bool(args.model_file):
        from slurmplan.perf.models import list_models

        given = "both --model and --model-file" if args.model else "neither --model nor --model-file"
        allowed = f"exactly one of --model NAME ({', '.join(list_models())}) or --model-file FILE"
        raise ValidationError("model choice", given, allowed, "plan")
    model = get_model(args.model) if args.model else load_model_file(args.model_file)
    return model.with_seq_len(args.seq)


def _entry(gpu_type: str, gpus: int, r: RankedPlan) -> dict[str, Any]:
    from slurmplan.perf.candidates import plan_needs
    from slurmplan.perf.hardware import default_catalog

    spec = default_catalog().get(gpu_type)
    cpus, host_mb = plan_needs(r.plan, spec, gpus, r.host_memory_gb)
    return {
        "gpu_type": gpu_type,
        "gpus": gpus,
        "plan": r.plan.short(),
        "samples_per_s": round(r.throughput, 4),
        "iteration_s": round(r.t_iter, 4),
        "gpu_memory_gb": round(r.gpu_memory_gb, 2),
        "cpus": cpus,
        "host_memory_gb": round(host_mb / 1000, 1),
        "components_s": {k: round(v, 4) for k, v in r.components.items()},
    }


def explain_winner(best: dict[str, Any], second: dict[str, Any] | None) -> str:
    """Why the best plan beats the runner-up: the component that saves the most time."""
    if second is None:
        return "it is the only feasible plan"
    gain = best["samples_per_s"] / second["samples_per_s"] - 1
    other = f"{second['plan']} on {second['gpu_type']}x{second['gpus']}"
    if gain < 0.0005:  # "0.0% faster" said nothing: the two are as fast as the model can tell
        return f"as fast as {other} ({best['samples_per_s']:.3f} samples/s each); either will do"
    a, b = best["components_s"], second["components_s"]
    saved = {k: b[k] - a[k] for k in COMPONENT_WORDS}
    key = max(saved, key=lambda k: saved[k])
    return (
        f"{100 * gain:.1f}% faster than {other}: {COMPONENT_WORDS[key]} takes {a[key]:.3f} s instead of "
        f"{b[key]:.3f} s per iteration"
    )


def run_plan(args: argparse.Namespace) -> int:
    from slurmplan.perf.hardware import default_catalog
    from slurmplan.perf.search import search_plans
    from slurmplan.perf.stacks import DEFAULT_STACK, get_stack

    model = _model(args)
    if args.top < 1:
        raise ValidationError("top", args.top, "a positive integer", "plan")
    stack = get_stack(args.stack) if args.stack else DEFAULT_STACK
    batch = args.global_batch or model.default_global_batch
    entries, infeasible = [], {}
    resources = parse_gpus(args.gpus)
    for gpu_type, gpus in resources:
        search = search_plans(model, default_catalog().get(gpu_type), gpus, batch, stack=stack)
        if not search.feasible_count:
            infeasible[f"{gpu_type}:{gpus}"] = search.why_infeasible()
        entries += [_entry(gpu_type, gpus, r) for r in search.top(args.top)]
    entries.sort(key=lambda e: -e["samples_per_s"])
    entries = entries[: args.top]
    result: dict[str, Any] = {
        "model": model.name,
        "parameters_b": round(model.parameters / 1e9, 3),
        "global_batch": batch,
        "seq_len": model.seq_len,
        "stack": stack.label(),
        "plans": entries,
        "infeasible": infeasible,
        "why": explain_winner(entries[0], entries[1] if len(entries) > 1 else None) if entries else "",
    }
    if len(resources) > 1:
        result["mixed_dp"] = _mixed(model, resources, batch, args.workers)
    _print_plan(result, args.json)
    return 0 if entries else 1


def _mixed(model: ModelSpec, resources: list[tuple[str, int]], batch: int, workers: int | None) -> dict[str, Any]:
    """EasyScale: one data-parallel job over all the given GPUs, maxP = workers (default: all GPUs)."""
    from slurmplan.perf.easyscale import best_assignment, single_gpu_rates

    max_p = workers or sum(n for _, n in resources)
    if batch % max_p:
        fits = [d for d in range(1, batch + 1) if batch % d == 0]
        below = max(d for d in fits if d <= max_p)
        above = [d for d in fits if d > max_p]
        hint = f"--workers {below}" + (f" or --workers {above[0]}" if above else "")
        source = "--workers" if workers else "one per GPU by default"
        return {
            "error": f"global batch {batch} is not a multiple of {max_p} workers ({source}); "
            f"pass {hint} (a divisor of the batch), or change --global-batch"
        }
    rates = single_gpu_rates(model, [t for t, _ in resources], batch, max_p)
    counts = {t: n for t, n in resources if t in rates}
    if not counts:
        return {"error": "one worker's share of the batch fits on none of these GPU types"}
    mixed = best_assignment(counts, rates, max_p)
    return {
        "workers": max_p,
        "workers_per_gpu": dict(mixed.assignment),
        "samples_per_s": round(mixed.throughput * batch / max_p, 4),
        "step_s": round(mixed.step_time, 4),
    }


def _print_plan(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['model']}: {result['parameters_b']} B parameters, global batch {result['global_batch']}, "
        f"seq {result['seq_len']}, stack {result['stack']}"
    )
    header = (
        f"{'#':>3} {'gpus':<10} {'plan':<34} {'samples/s':>10} {'iter s':>8} {'GB/GPU':>7} {'cpus':>5} {'host GB':>8}"
    )
    print(header)
    for i, e in enumerate(result["plans"], 1):
        print(
            f"{i:>3} {e['gpu_type'] + 'x' + str(e['gpus']):<10} {e['plan']:<34} {e['samples_per_s']:>10.3f} "
            f"{e['iteration_s']:>8.3f} {e['gpu_memory_gb']:>7.1f} {e['cpus']:>5} {e['host_memory_gb']:>8.1f}"
        )
    for where, reason in result["infeasible"].items():
        print(f"    {where}: {reason}")
    if result["why"]:
        print(f"best: {result['why']}")
    mixed = result.get("mixed_dp")
    if mixed:
        if "error" in mixed:
            print(f"mixed data parallel: {mixed['error']}")
        else:
            print(
                f"mixed data parallel (EasyScale, {mixed['workers']} workers): {mixed['samples_per_s']:.3f} samples/s "
                f"with workers per GPU {mixed['workers_per_gpu']}"
            )


def _report_dict(model: str, points: int, report: HoldoutReport | None, fit: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": model,
        "points": points,
        "constants": {k: round(v, 6) for k, v in vars(fit.constants).items()},
        "train_rmsle": round(fit.train_error, 5),
        "train_mean_error": round(fit.mean_error, 5),
    }
    if report is not None:
        out.update(
            heldout_points=report.heldout_points,
            heldout_mean_error=round(report.heldout_mean_error, 5),
            heldout_max_error=round(report.heldout_max_error, 5),
        )
    return out


def run_fit_published(args: argparse.Namespace) -> int:
    """Fit the global constants to the published dataset and write them as a constants file."""
    import numpy as np

    from slurmplan.perf.fit_published import fit_published, predict_rows, write_constants
    from slurmplan.perf.published import DEFAULT_DATASET, fitted_rows, load_published

    dataset = args.dataset or str(DEFAULT_DATASET)
    rows = load_published(dataset)
    used = fitted_rows(rows)
    fit = fit_published(used)
    write_constants(args.output, fit, dataset if args.dataset else "slurmplan/perf/data/published.yaml")
    errors = np.abs(predict_rows(used, fit.terms, fit.rubick) / np.array([r.value for r in used]) - 1.0)
    tables: dict[str, list[float]] = {}
    for row, err in zip(used, errors, strict=True):
        tables.setdefault(row.table, []).append(float(err))
    out = {
        "constants_file": str(args.output),
        "rows": len(used),
        "not_fitted": len(rows) - len(used),
        "rmsle": round(fit.rmsle, 5),
        "mean_error": round(fit.mean_error, 5),
        "tables": {t: {"rows": len(v), "mean_error": round(sum(v) / len(v), 5)} for t, v in tables.items()},
        "terms": {k: round(v, 6) for k, v in vars(fit.terms).items()},
        "rubick": {k: round(v, 6) for k, v in vars(fit.rubick).items()},
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"fitted {len(used)} published rows ({out['not_fitted']} kept unfitted): RMSLE {fit.rmsle:.4f}, "
        f"mean error {100 * fit.mean_error:.2f}%; wrote {args.output}"
    )
    for table, t in out["tables"].items():
        print(f"  {table:<20} {t['rows']:>3} rows  mean error {100 * t['mean_error']:6.2f}%")
    print("  terms:  " + " ".join(f"{k}={v:.4g}" for k, v in out["terms"].items()))
    print("  rubick: " + " ".join(f"{k}={v:.4g}" for k, v in out["rubick"].items()))
    return 0


def run_fit(args: argparse.Namespace) -> int:
    if args.published:
        return run_fit_published(args)
    if not args.measurements:
        raise ValidationError("measurements", None, "a JSON-lines file (or --published)", "fit")
    from slurmplan.perf.calibration import fit_points
    from slurmplan.perf.fit import can_fit, fit_constants, fit_with_holdout
    from slurmplan.perf.measurements import load_measurements
    from slurmplan.perf.models import get_model

    measurements = load_measurements(args.measurements)
    by_model: dict[str, list] = {}
    for m in measurements:
        by_model.setdefault(get_model(m.model).name, []).append(m)
    results, skipped = [], {}
    for name, rows in sorted(by_model.items()):
        model = get_model(name)
        measured = tuple((m.gpu_type, m.gpus, m.plan, m.samples_per_s, m.nodes, m.stack) for m in rows)
        points = fit_points(model, measured)
        if not can_fit(points):
            skipped[name] = f"{len(points)} points: need >= 7, >= 3 with offload when offload is used"
            continue
        report = None
        try:
            report = fit_with_holdout(points, args.holdout, args.seed)
            fit = report.fit
        except ValidationError:
            fit = fit_constants(points)  # too few to hold some out and still fit
        results.append(_report_dict(name, len(points), report, fit))
    if args.json:
        print(json.dumps({"fits": results, "skipped": skipped}, indent=2))
    else:
        for r in results:
            consts = " ".join(f"{k}={v:.4g}" for k, v in r["constants"].items())
            print(f"{r['model']}: {r['points']} points  {consts}")
            line = f"  train RMSLE {r['train_rmsle']:.4f}, mean error {100 * r['train_mean_error']:.2f}%"
            if "heldout_mean_error" in r:
                line += (
                    f"; held-out ({r['heldout_points']} points) mean {100 * r['heldout_mean_error']:.2f}% "
                    f"max {100 * r['heldout_max_error']:.2f}%"
                )
            print(line)
        for name, why in skipped.items():
            print(f"{name}: not fitted ({why})")
    return 0 if results else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        help="rank the execution plans of a model on given GPUs",
        description="Enumerate every valid plan, drop those that do not fit in memory, and "
        "rank the rest by predicted samples/s (Rubick model with catalog defaults).",
    )
    p.add_argument("--model", help="model name from the catalog (e.g. llama2-7b)")
    p.add_argument("--model-file", help="YAML file describing the model (layers, hidden, heads, seq_len, vocab)")
    p.add_argument("--gpus", required=True, help="TYPE:N[,TYPE:N], e.g. a100:8 or a100:8,v100:4")
    p.add_argument("--global-batch", type=int, help="samples per iteration (default: the model's)")
    p.add_argument("--seq", type=int, help="sequence length (default: the model's)")
    p.add_argument(
        "--stack", help="the framework the job runs: megatron, deepspeed, ddp, fsdp (default: whichever runs the plan)"
    )
    p.add_argument("--top", type=int, default=10, help="how many plans to show (default 10)")
    p.add_argument("--workers", type=int, help="EasyScale logical workers for the mixed-type line (default: all GPUs)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_plan)

    f = subparsers.add_parser(
        "fit",
        help="fit the performance model's constants to measured or published throughputs",
        description="Fit Rubick's constants per model by least RMSLE and report the error on held-out points; "
        "with --published, fit the model's global constants to the published dataset and write a constants file "
        "(name it with SLURMPLAN_PERF_CONSTANTS to use it; the online refit starts from it).",
    )
    f.add_argument("--measurements", help="JSON-lines file of measurements (the launcher's reports)")
    f.add_argument("--published", action="store_true", help="fit to the published measurements dataset")
    f.add_argument("--dataset", help="published dataset YAML (default: the one shipped in slurmplan/perf/data)")
    f.add_argument("--output", default="perf_constants.yaml", help="constants file to write (with --published)")
    f.add_argument("--holdout", type=float, default=0.3, help="fraction of points held out (default 0.3)")
    f.add_argument("--seed", type=int, default=0, help="seed of the held-out split")
    f.add_argument("--json", action="store_true", help="machine-readable output")
    f.set_defaults(func=run_fit)
