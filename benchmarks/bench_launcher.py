"""Launcher benchmarks: time per step of logical workers vs plain DDP, and checkpoint save/load of 100M params.

    python benchmarks/bench_launcher.py [--procs 2] [--steps 20] [--params 100e6] [--repeats 3]

Step times are medians over ``--steps`` timed steps after warm-up, measured on rank 0 of ``--procs`` real
processes (gloo on the CPU; nccl when a GPU is present). A DDP step and a launcher step alternate in the same
processes, so both see the same machine load; the ratio launcher/DDP is printed (goal: <= 1.10x on CPU/gloo at
one worker per process). Both sides run with deterministic algorithms and the same intra-op thread count, so the
difference is the logical-worker machinery: RNG context switches, per-worker gradient buffers and the
fixed-order reduction, against DDP's bucketed all-reduce.
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


def _ddp_step(
    model: nn.Module, opt: torch.optim.Optimizer, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> None:
    nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _interleaved(per_proc: int, steps: int, warmup: int, out: str) -> None:
    """In the same processes: a DDP step, then a logical-worker step, ``steps + warmup`` times; rank 0 writes
    both lists of step times. Interleaving exposes both to the same machine load (the CPU here is shared)."""
    enable_determinism(1)
    denv = dist.DistEnv.from_env()
    dist.init(denv, dist.default_backend())
    if not torch.distributed.is_initialized():  # dist.init skips one process, but DDP needs a group, even of one
        torch.distributed.init_process_group(
            dist.default_backend(), init_method=f"tcp://{denv.master_addr}:{denv.master_port}", rank=0, world_size=1
        )
    device = torch.device("cuda", denv.local_rank) if torch.cuda.is_available() else torch.device("cpu")
    trainer = Trainer(
        _spec(denv.world_size * per_proc, steps + warmup),
        AssignedPlan(Plan(dp=denv.world_size), PlanSource.DEFAULT),
        denv,
        device,
    )
    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(
        _model().to(device), device_ids=[device.index] if device.index is not None else None
    )
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    data = _data()
    batch = WORKER_BATCH * per_proc  # DDP with the same samples per process as the logical workers
    times: dict[str, list[float]] = {"ddp": [], "ests": []}
    for i in range(steps + warmup):
        idx = torch.arange(batch) + (i * denv.world_size + denv.rank) * batch % (len(data) - batch)
        x, y = default_collate([data[int(j)] for j in idx])  # per-sample fetch, as the launcher does
        times["ddp"].append(_timed(device, partial(_ddp_step, ddp, opt, device, x, y)))
        times["ests"].append(_timed(device, trainer.train_step))
    if denv.is_main:
        Path(out).write_text(json.dumps({k: v[warmup:] for k, v in times.items()}))
    dist.shutdown()


def bench_steps(procs: int, steps: int, warmup: int = 5) -> dict[int, float]:
    """Median step times of DDP and of the launcher, interleaved in the same processes; returns the ratios."""
    method = "spawn" if torch.cuda.is_available() else "fork"
    where = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU/gloo, 1 intra-op thread"
    print(f"step time, {procs} processes ({where}), {WORKER_BATCH} samples per worker, MLP {HIDDEN}x{DEPTH};")
    print(f"DDP and logical-worker steps interleaved in the same processes, medians of {steps}:")
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "times.json")
        for per_proc in (1, 2):
            run_local(_interleaved, procs, (per_proc, steps, warmup, out), start_method=method, hold_signal=False)
            times = json.loads(Path(out).read_text())
            ddp, est = statistics.median(times["ddp"]), statistics.median(times["ests"])
            ratios[per_proc] = est / ddp
            print(
                f"  {per_proc} worker(s)/process: DDP {ddp * 1e3:8.2f} ms  launcher {est * 1e3:8.2f} ms  "
                f"ratio {est / ddp:.3f}x"
            )
    print(f"goal at 1 worker/process: <= 1.10x on CPU/gloo (<= 1.05x with NCCL on a GPU); measured {ratios[1]:.3f}x")
    return ratios


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
