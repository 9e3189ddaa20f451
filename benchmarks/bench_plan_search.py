"""Plan-search benchmark: every plan of 7B, 30B and 175B models on 8, 64 and 512 GPUs.

One measurement = enumerate the plan space, estimate memory, predict iteration time (Rubick model, vectorized)
and rank the feasible plans (``perf.search.search_plans``). Prints the median milliseconds per model and GPU
count, plus the plan counts; the issue's target is "well under 100 ms" for a 30B model on 64 GPUs.

Run: ``python benchmarks/bench_plan_search.py [--repeats N]``
"""

from __future__ import annotations

import argparse
import statistics
import time

from slurmplan.domain import Hints
from slurmplan.perf.candidates import _cached, job_candidates
from slurmplan.perf.hardware import get_gpu
from slurmplan.perf.models import get_model
from slurmplan.perf.search import search_plans

MODELS = (("7B", "llama2-7b", 512), ("30B", "llama-30b", 1024), ("175B", "gpt3-175b", 1536))
GPUS = (8, 64, 512)


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up (imports, catalog loading)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--gpu", default="a100-80g")
    args = parser.parse_args()
    gpu = get_gpu(args.gpu)
    print(f"plan search on {gpu.name}, {gpu.gpus_per_node} GPUs per node, median of {args.repeats}")
    print(f"{'model':<6} {'gpus':>5} {'plans':>7} {'feasible':>9} {'median ms':>10}  best plan")
    for label, name, batch in MODELS:
        model = get_model(name)
        for gpus in GPUS:
            search = search_plans(model, gpu, gpus, batch)
            ms = median_ms(lambda m=model, g=gpus, b=batch: search_plans(m, gpu, g, b), args.repeats)
            best = search.best()
            print(
                f"{label:<6} {gpus:>5} {len(search.space):>7} {search.feasible_count:>9} {ms:>10.2f}  "
                f"{best.plan.short() if best else '-'}"
            )

    def candidates() -> None:
        _cached.cache_clear()
        job_candidates(Hints(model="llama-30b", gpus=64, global_batch=1024), {"a100-80g": 512, "h100": 512})

    print(f"job_candidates, 30B asking 64 GPUs, 2 types, uncached: {median_ms(candidates, 5):.1f} ms median")
    hints = Hints(model="llama-30b", gpus=64, global_batch=1024)
    cached = median_ms(lambda: job_candidates(hints, {"a100-80g": 512, "h100": 512}), args.repeats)
    print(f"job_candidates, same call cached: {cached * 1e3:.1f} us median")


if __name__ == "__main__":
    main()
