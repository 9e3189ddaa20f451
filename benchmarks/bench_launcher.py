"""Launcher benchmarks: time per step of logical workers vs plain DDP, and checkpoint save/load of 100M params.

    python benchmarks/bench_launcher.py [--procs 2] [--steps 20] [--params 100e6] [--repeats 3]

Step times are medians over ``--steps`` timed steps after warm-up, measured on rank 0 of ``--procs`` real
processes (gloo on the CPU; nccl when a GPU is present). Both sides run with deterministic algorithms and the
same intra-op thread count, so the difference is the logical-worker machinery: RNG context switches, per-worker
gradient copies, an all-gather of per-worker gradients and the ordered sum, against DDP's bucketed all-reduce.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch._inductor  # noqa: F401  # imported before forking, not once per worker
from torch import nn
from torch.utils.data import default_collate

from slurmplan.domain import Plan
from slurmplan.launch import TrainSpec, dist
from slurmplan.launch.checkpoint import CheckpointStore
from slurmplan.launch.determinism import enable_determinism
from slurmplan.launch.local import run_local
from slurmplan.launch.plan_env import AssignedPlan, PlanSource
from slurmplan.launch.trainer import Trainer

HIDDEN, DEPTH, WORKER_BATCH = 512, 4, 32


def _model() -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(64, HIDDEN), nn.ReLU()]
    for _ in range(DEPTH):
        layers += [nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Dropout(0.1)]
    return nn.Sequential(*layers, nn.Linear(HIDDEN, 10))


def _data(n: int = 4096) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, 64, generator=gen), torch.randint(0, 10, (n,), generator=gen))


def _spec(max_p: int, steps: int) -> TrainSpec:
    return TrainSpec(
        _model,
        _data(),
        nn.functional.cross_entropy,
        lambda p: torch.optim.SGD(p, lr=0.01),
        steps=steps,
        max_p=max_p,
        worker_batch=WORKER_BATCH,
    )


def _timed(device: torch.device, step: Callable[[], object]) -> float:
    """Seconds one ``step`` takes, with the GPU's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _finish(denv: dist.DistEnv, times: list[float], out: str) -> None:
    """Rank 0 writes the step times for the parent process; every rank leaves the group."""
    if denv.is_main:
        Path(out).write_text(json.dumps(times))
    dist.shutdown()


def _time_ests(max_p: int, steps: int, warmup: int, out: str) -> None:
    enable_determinism(1)
    denv = dist.DistEnv.from_env()
    dist.init(denv, dist.default_backend())
    device = torch.device("cuda", denv.local_rank) if torch.cuda.is_available() else torch.device("cpu")
    trainer = Trainer(
        _spec(max_p, steps + warmup), AssignedPlan(Plan(dp=denv.world_size), PlanSource.DEFAULT), denv, device
    )
    times = [_timed(device, trainer.train_step) for _ in range(steps + warmup)]
    _finish(denv, times[warmup:], out)


def _ddp_step(
    model: nn.Module, opt: torch.optim.Optimizer, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> None:
    nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _time_ddp(steps: int, warmup: int, out: str) -> None:
    enable_determinism(1)
    denv = dist.DistEnv.from_env()
    dist.init(denv, dist.default_backend())
    device = torch.device("cuda", denv.local_rank) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        _model().to(device), device_ids=[device.index] if device.index is not None else None
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = _data()
    times = []
    for i in range(steps + warmup):
        idx = torch.arange(WORKER_BATCH) + (i * denv.world_size + denv.rank) * WORKER_BATCH % (len(data) - WORKER_BATCH)
        x, y = default_collate([data[int(j)] for j in idx])  # per-sample fetch, as the launcher does
        times.append(_timed(device, partial(_ddp_step, model, opt, device, x, y)))
    _finish(denv, times[warmup:], out)


def bench_steps(procs: int, steps: int, warmup: int = 3) -> None:
    method = "spawn" if torch.cuda.is_available() else "fork"
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "times.json")
        run_local(_time_ddp, procs, (steps, warmup, out), start_method=method)
        ddp = statistics.median(json.loads(Path(out).read_text()))
        print(f"step time, {procs} processes, {WORKER_BATCH} samples per worker, MLP {HIDDEN}x{DEPTH} (medians):")
        print(f"  plain DDP, 1 worker/process          {ddp * 1e3:8.2f} ms")
        for per_proc in (1, 2):
            run_local(_time_ests, procs, (procs * per_proc, steps, warmup, out), start_method=method)
            est = statistics.median(json.loads(Path(out).read_text()))
            rel = est / (ddp * per_proc) - 1
            print(
                f"  logical workers, {per_proc} worker(s)/process  {est * 1e3:8.2f} ms ({rel:+.1%} per worker vs DDP)"
            )


def bench_checkpoint(params: float, repeats: int) -> None:
    width = 4096
    layers = max(1, round(params / (width * width + width)))
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # allocates Adam's two moment buffers: a realistic checkpoint is 3x the parameters
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}
    saves, loads = [], []
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        store = CheckpointStore(tmp, keep=1)
        for r in range(repeats):
            start = time.perf_counter()
            folder = store.save(state, step=r)
            saves.append(time.perf_counter() - start)
            size = (folder / "state.pt").stat().st_size
            start = time.perf_counter()
            store.load(folder)
            loads.append(time.perf_counter() - start)
    print(f"checkpoint of {n / 1e6:.1f}M parameters + Adam state ({size / 2**30:.2f} GiB), medians of {repeats}:")
    print(f"  save (write, fsync, rename)  {statistics.median(saves):6.2f} s")
    print(f"  load                         {statistics.median(loads):6.2f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--params", type=float, default=100e6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-checkpoint", action="store_true")
    ns = p.parse_args()
    bench_steps(ns.procs, ns.steps)
    if not ns.skip_checkpoint:
        bench_checkpoint(ns.params, ns.repeats)


if __name__ == "__main__":
    main()
