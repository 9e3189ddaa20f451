"""``benchmarks/bench_gpu.py`` compares the performance model with a GPT it trains on a real GPU; the comparison
means something only if the trained module is the model ``ModelSpec`` describes. Checked here on the CPU."""

from __future__ import annotations

import pytest
import torch

from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_gpu")


def test_the_trained_gpt_has_the_parameters_the_model_counts(bench) -> None:
    """Megatron's count leaves out the final LayerNorm (2h); everything else matches to the parameter."""
    for spec, _ in bench.MODELS:
        with torch.device("meta"):  # shapes only: the 1.3B model would take 5 GB
            counted = sum(p.numel() for p in bench.Gpt(spec).parameters())
        assert counted == round(spec.parameters) + 2 * spec.hidden, spec.name


def test_the_trained_gpt_predicts_the_next_token_causally(bench) -> None:
    """A later token cannot change an earlier position's logits (the attention is causal, as in the model)."""
    spec = bench.MODELS[0][0].__class__("tiny", layers=2, hidden=32, heads=4, seq_len=16, vocab=64)
    torch.manual_seed(0)
    model = bench.Gpt(spec).eval()
    tokens = torch.randint(0, 64, (1, 16))
    changed = tokens.clone()
    changed[0, 10] = (tokens[0, 10] + 1) % 64
    a, b = model(tokens), model(changed)
    assert torch.allclose(a[0, :10], b[0, :10])
    assert not torch.allclose(a[0, 10:], b[0, 10:])


def test_device_names_map_onto_the_catalog_entries(bench) -> None:
    assert bench.gpu_spec("NVIDIA H200").name == "h200"
    assert bench.gpu_spec("NVIDIA GeForce RTX 4090") is None
