"""On a real GPU: the performance model against a measured GPT, and what a restart costs the payload there.

    python benchmarks/bench_gpu.py [--quick] [--json]

Needs PyTorch with CUDA and one GPU whose name the GPU catalog knows (``NVIDIA H200`` -> ``h200``); without one it
says so and exits 2. Three measurements, each printed as it finishes:

* **Throughput.** A GPT of the Megatron shape (``ModelSpec``: pre-LayerNorm blocks, 4h MLP, learned positions,
  tied logits) trained with plain PyTorch, what the launcher runs: bf16 autocast over fp32 weights, AdamW,
  PyTorch's fused attention, one GPU, no activation checkpointing. Median samples/s over the timed steps, against
  ``perf.search.predict_plan`` for the same model, GPU type and plan under the ``ddp`` stack; and the peak
  memory PyTorch allocated against ``perf.memory.plan_memory``.
* **Start-up.** A restart's payload cost before its first step: the shipped template
  (``templates/example_train.py``) run for one step in a fresh process on the GPU, against the same on the CPU
  (``CUDA_VISIBLE_DEVICES=``); the difference is what a GPU job pays on top of the dev cluster's CPU figure
  (CUDA's context, NCCL's communicator, the first kernels). Median of three.
* **Checkpoint.** The launcher's ``CheckpointStore`` saving and loading one GPT's model and AdamW state (what a
  move writes and reads), seconds and GB/s.

Only the model's catalog constants are used (nothing is fitted to this run); a ratio far from 1 is a finding to
record, not a number to tune on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from slurmplan.domain import Plan
from slurmplan.launch.checkpoint import CheckpointStore
from slurmplan.perf.hardware import GpuSpec, default_catalog, gpu_type_of_device
from slurmplan.perf.memory import GB, plan_memory
from slurmplan.perf.models import ModelSpec
from slurmplan.perf.search import predict_plan
from slurmplan.perf.stacks import get_stack

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "templates" / "example_train.py"

MODELS = (
    (ModelSpec("gpt-125m", layers=12, hidden=768, heads=12, seq_len=1024, vocab=50304), 16),
    (ModelSpec("gpt-350m", layers=24, hidden=1024, heads=16, seq_len=1024, vocab=50304), 8),
    (ModelSpec("gpt-1.3b", layers=24, hidden=2048, heads=16, seq_len=2048, vocab=50304), 4),
)
"""(model, micro-batch): GPT-2/3 shapes from 125M to 1.3B parameters, each at a micro-batch that fits an 80 GB
GPU without activation checkpointing (the 1.3B one about 60 GB)."""


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(attn)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Gpt(nn.Module):
    """The model ``ModelSpec`` counts: its ``parameters`` equals this module's count (``tests/perf`` checks it)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.embed, self.pos = nn.Embedding(spec.vocab, spec.hidden), nn.Embedding(spec.seq_len, spec.hidden)
        self.blocks = nn.ModuleList(Block(spec.hidden, spec.heads) for _ in range(spec.layers))
        self.ln = nn.LayerNorm(spec.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.embed.weight.t()


@dataclass(frozen=True)
class ThroughputPoint:
    model: str
    parameters_m: float
    micro_batch: int
    measured_sps: float
    predicted_sps: float
    ratio: float
    """predicted / measured"""
    peak_gb: float
    predicted_gb: float


def gpu_spec(name: str) -> GpuSpec | None:
    """The catalog entry of the device PyTorch names (``perf.hardware.gpu_type_of_device``), None if unknown."""
    found = gpu_type_of_device(name)
    return None if found is None else default_catalog().get(found)


def measure_throughput(spec: ModelSpec, micro_batch: int, gpu: GpuSpec, steps: int) -> ThroughputPoint:
    torch.manual_seed(0)
    model = Gpt(spec).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, spec.vocab, (micro_batch, spec.seq_len + 1), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(steps + 3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, spec.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - start)
    measured = micro_batch / statistics.median(times)
    plan = Plan(micro_batch=micro_batch)
    predicted = predict_plan(spec, gpu, plan, stack="ddp")
    memory = plan_memory(spec, plan, gpu, get_stack("ddp"))
    point = ThroughputPoint(
        model=spec.name,
        parameters_m=sum(p.numel() for p in model.parameters()) / 1e6,
        micro_batch=micro_batch,
        measured_sps=measured,
        predicted_sps=predicted,
        ratio=predicted / measured,
        peak_gb=torch.cuda.max_memory_allocated() / GB,
        predicted_gb=float(memory.total[0]) / GB,
    )
    del model, optimizer
    torch.cuda.empty_cache()
    return point


def startup_seconds(gpu: bool, checkpoint_dir: Path, repeats: int) -> float:
    """Wall seconds of a fresh process running the template for one step (imports, devices, one step, a save)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    times = []
    for i in range(repeats):
        folder = checkpoint_dir / f"{'gpu' if gpu else 'cpu'}-{i}"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, str(TEMPLATE), "--steps", "1", "--checkpoint-dir", str(folder)],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def checkpoint_figures(spec: ModelSpec, folder: Path) -> dict[str, float]:
    """Save and load one GPT's model and AdamW state through the launcher's store (GPU tensors, as a job holds)."""
    model = Gpt(spec).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    model(torch.zeros(1, 8, dtype=torch.long, device="cuda")).float().mean().backward()
    optimizer.step()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 1}
    size = sum(t.numel() * t.element_size() for t in model.state_dict().values()) * 3 / GB  # weights + 2 moments
    store = CheckpointStore(folder)
    start = time.perf_counter()
    store.save(state, 1)
    saved_s = time.perf_counter() - start
    start = time.perf_counter()
    store.load(map_location="cuda")
    torch.cuda.synchronize()
    loaded_s = time.perf_counter() - start
    return {"model": spec.name, "gb": size, "save_s": saved_s, "load_s": loaded_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smallest model only, fewer steps and repeats")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per point (after 3 warm-up)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA GPU visible to PyTorch; nothing to measure", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    gpu = gpu_spec(name)
    if gpu is None:
        print(f"bench_gpu: the GPU catalog has no entry for {name!r}", file=sys.stderr)
        return 2
    print(f"{name} -> catalog {gpu.name}; torch {torch.__version__}")
    out: dict[str, object] = {"device": name, "gpu_type": gpu.name, "torch": torch.__version__}
    points = []
    for spec, micro_batch in MODELS[:1] if args.quick else MODELS:
        point = measure_throughput(spec, micro_batch, gpu, 5 if args.quick else args.steps)
        points.append(asdict(point))
        print(
            f"{point.model:9s} ({point.parameters_m:6.0f} M) mb {point.micro_batch:2d}: measured"
            f" {point.measured_sps:7.2f} samples/s, model {point.predicted_sps:7.2f} ({point.ratio:.2f}x);"
            f" peak {point.peak_gb:5.1f} GB, model {point.predicted_gb:5.1f} GB",
            flush=True,
        )
    out["throughput"] = points
    with tempfile.TemporaryDirectory() as tmp:
        repeats = 1 if args.quick else 3
        gpu_s, cpu_s = startup_seconds(True, Path(tmp), repeats), startup_seconds(False, Path(tmp), repeats)
        out["startup"] = {"gpu_s": gpu_s, "cpu_s": cpu_s, "repeats": repeats}
        print(f"template, one step in a fresh process: GPU {gpu_s:.2f} s, CPU {cpu_s:.2f} s (median of {repeats})")
        ckpt = checkpoint_figures(MODELS[0 if args.quick else 1][0], Path(tmp) / "ckpt")
        out["checkpoint"] = ckpt
        print(
            f"checkpoint of {ckpt['model']} ({ckpt['gb']:.1f} GB): save {ckpt['save_s']:.2f} s"
            f" ({ckpt['gb'] / ckpt['save_s']:.2f} GB/s), load {ckpt['load_s']:.2f} s",
            flush=True,
        )
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
