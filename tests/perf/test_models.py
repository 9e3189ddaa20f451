"""Model and hardware catalogs: Megatron formulas against the thesis, lookups and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmplan.domain import ValidationError
from slurmplan.perf.hardware import get_gpu, gpu_type_of_device, list_gpus, load_catalog
from slurmplan.perf.models import get_model, list_models, load_model_file

# Narayanan thesis Table 4.1: (catalog name, parameters in billions as printed, heads, hidden, layers).
TABLE_4_1 = [
    ("megatron-1.7b", 1.7, 24, 2304, 24),
    ("megatron-3.6b", 3.6, 32, 3072, 30),
    ("megatron-7.5b", 7.5, 32, 4096, 36),
    ("megatron-18b", 18.4, 48, 6144, 40),
    ("megatron-39b", 39.1, 64, 8192, 48),
    ("megatron-76b", 76.1, 80, 10240, 60),
    ("megatron-145b", 145.6, 96, 12288, 80),
    ("megatron-310b", 310.1, 128, 16384, 96),
    ("megatron-530b", 529.6, 128, 20480, 105),
    ("megatron-1t", 1008.0, 160, 25600, 128),
]


@pytest.mark.parametrize(("name", "billions", "heads", "hidden", "layers"), TABLE_4_1)
def test_table_4_1_parameter_counts(name: str, billions: float, heads: int, hidden: int, layers: int) -> None:
    model = get_model(name)
    assert (model.heads, model.hidden, model.layers) == (heads, hidden, layers)
    got = model.parameters / 1e9
    assert round(got, 1) == pytest.approx(billions)  # as printed, one decimal
    if billions >= 7:
        assert got == pytest.approx(billions, rel=0.01)


def test_training_flops_match_thesis_closed_form() -> None:
    for name, *_ in TABLE_4_1:
        m = get_model(name)
        s, h, n, v = m.seq_len, m.hidden, m.layers, m.vocab
        closed = 96 * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))
        assert m.training_flops_per_sample(checkpointing=True) == pytest.approx(closed, rel=1e-12)
        assert m.training_flops_per_sample(checkpointing=False) < closed


def test_gpt3_training_time_example() -> None:
    # Thesis: GPT-3 175B, 300B tokens, 1024 A100 at 140 TFLOP/s each -> about 34 days (8 T P / (n X)).
    m = get_model("GPT-3")
    flops_per_token = m.training_flops_per_sample(checkpointing=True) / m.seq_len
    assert flops_per_token == pytest.approx(8 * m.parameters, rel=0.05)
    days = 300e9 * flops_per_token / (1024 * 140e12) / 86400
    assert 32 < days < 36


def test_named_models_have_expected_sizes() -> None:
    sizes = {
        "bert-large": 0.34,
        "roberta-large": 0.355,
        "vit-b": 0.086,
        "gpt2-1.5b": 1.5,
        "llama2-7b": 6.7,
        "llama2-13b": 13.0,
        "llama-30b": 32.5,
        "gpt3-175b": 175.0,
    }
    for name, billions in sizes.items():
        assert get_model(name).parameters / 1e9 == pytest.approx(billions, rel=0.07)
    assert get_model("LLaMA-2-7B") == get_model("llama2-7b")
    assert {"t5-large", "llama2-70b"} <= set(list_models())


def test_unknown_model_and_bad_model_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="bert-large") as err:
        get_model("gpt-5")
    assert err.value.field == "model"
    bad = tmp_path / "m.yaml"
    bad.write_text("name: mine\nlayers: 12\nhidden: 768\nheads: 5\nseq_len: 128\nvocab: 100\n")
    with pytest.raises(ValidationError, match="heads"):
        load_model_file(bad)
    bad.write_text("name: mine\nlayers: -1\nhidden: 768\nheads: 12\nseq_len: 128\nvocab: 100\n")
    with pytest.raises(ValidationError, match="layers"):
        load_model_file(bad)
    good = tmp_path / "g.yaml"
    good.write_text("tiny:\n  layers: 2\n  hidden: 64\n  heads: 4\n  seq_len: 32\n  vocab: 100\n")
    assert load_model_file(good).name == "tiny"


def test_gpu_catalog_names_aliases_and_sources() -> None:
    for name in (
        "k80",
        "p100",
        "v100",
        "v100-32g",
        "t4",
        "a10",
        "a40",
        "a100",
        "a100-80g",
        "a800",
        "l40s",
        "h100",
        "h200",
    ):
        spec = get_gpu(name)
        assert spec.source and spec.memory_gb > 0 and spec.fp16_tflops > 0
    assert get_gpu("A100-40G") == get_gpu("a100")
    assert get_gpu("v100s").memory_gb == 32
    assert get_gpu("h100").fp16_tflops > get_gpu("a100").fp16_tflops > get_gpu("v100").fp16_tflops
    assert len(list_gpus()) >= 13
    with pytest.raises(ValidationError, match="gpu_type") as err:
        get_gpu("rtx9090")
    assert "a100" in str(err.value)


@pytest.mark.parametrize(
    ("device", "gpu_type"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100-SXM4-80GB", "a100-80g"),
        ("NVIDIA A100 80GB PCIe", "a100-80g"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla V100-SXM2-32GB", "v100-32g"),
        ("Tesla T4", "t4"),
        ("NVIDIA L40S", "l40s"),
        ("Tesla K80", "k80"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_a_device_name_as_pytorch_gives_it_resolves_to_the_catalog_type(device: str, gpu_type: str | None) -> None:
    """What a job without a plan reports (``launch.trainer``): the raw name would be ignored by the fit."""
    assert gpu_type_of_device(device) == gpu_type


def test_site_catalog_overrides_and_adds(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(
        "a100:\n  inter_node_gbps: 50\n  gpus_per_node: 4\n"
        "mi250:\n  memory_gb: 64\n  fp16_tflops: 362\n  fp32_tflops: 47.9\n  mem_bandwidth_gbps: 1600\n"
        "  nvlink_gbps: 200\n  pcie_gbps: 32\n  inter_node_gbps: 25\n  gpus_per_node: 8\n  cpus_per_node: 64\n"
        "  host_memory_gb: 512\n  mfu: 0.3\n  source: site\n"
    )
    catalog = load_catalog(site)
    assert catalog.get("a100").inter_node_gbps == 50 and catalog.get("a100").memory_gb == 40
    assert catalog.get("mi250").memory_gb == 64
    site.write_text("a100:\n  mfu: 1.5\n")
    with pytest.raises(ValidationError, match="mfu"):
        load_catalog(site)
