"""The shipped constants against the published dataset: the in-sample errors README states
(``benchmarks/bench_perf_model.py`` measures them, with the leave-one-table-out errors, which take a minute), and
the GEMM wave term that lets one set of constants serve K80s and A100s alike."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml

from slurmplan.domain import ValidationError
from slurmplan.perf.compute import wave_efficiency
from slurmplan.perf.fit_published import predict_rows
from slurmplan.perf.hardware import get_gpu, load_catalog
from slurmplan.perf.published import fitted_rows, load_published

README_IN_SAMPLE = {  # per-table mean |error| of the shipped constants, as README's model-error table states
    "megatron-t4.1": 0.018,
    "megatron-t4.2": 0.030,
    "megatron-stated": 0.038,
    "pipedream-2bw": 0.005,
    "gavel-transformer": 0.107,
    "gavel-t6.1": 0.053,
}


def test_shipped_constants_give_readmes_in_sample_errors() -> None:
    rows = fitted_rows(load_published())
    predicted = predict_rows(rows)
    errors: dict[str, list[float]] = defaultdict(list)
    for row, value in zip(rows, predicted, strict=True):
        errors[row.table].append(abs(value / row.value - 1.0))
    means = {t: float(np.mean(e)) for t, e in errors.items()}
    assert set(means) == set(README_IN_SAMPLE)
    for table, figure in README_IN_SAMPLE.items():
        assert means[table] == pytest.approx(figure, abs=0.0015), table
    assert np.mean(list(means.values())) <= 0.05  # the in-sample goal
    assert max(means.values()) <= 0.15


def test_gavel_batch_256_is_kept_unfitted_with_its_reason() -> None:
    rows = {r.id: r for r in load_published()}
    for rid in ("gavel-tf256-v100-k80", "gavel-tf256-v100-p100", "t61-transformer-v100"):
        assert not rows[rid].fit and "batch" in rows[rid].why
    t61 = rows["t61-transformer-p100"]
    assert t61.fit and t61.global_batch == 256 and any("256 assumed" in a for a in t61.assumptions)


def test_a_gemm_fills_a_k80_die_long_before_a_v100() -> None:
    one = np.ones(1)
    # 512 x 1536 output = 48 tiles of 128 x 128: 4 waves of 13 SMs on a K80 die, one part-empty wave of 80 on a V100
    k80 = wave_efficiency(512 * one, 1536 * one, one, get_gpu("k80").sms)
    v100 = wave_efficiency(512 * one, 1536 * one, one, get_gpu("v100").sms)
    assert k80[0] == pytest.approx(48 / 52) and v100[0] == pytest.approx(48 / 80)
    big = wave_efficiency(8192 * one, 8192 * one, one, get_gpu("a100-80g").sms)  # 4096 tiles, 38 waves of 108
    assert big[0] == pytest.approx(4096 / (38 * 108))
    assert wave_efficiency(512 * one, 1536 * one, one, 0)[0] == 1.0  # SM count unknown: no quantization


def test_catalog_sms_must_be_a_count(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump({"v100": {"sms": -4}}))
    with pytest.raises(ValidationError) as err:
        load_catalog(path)
    assert err.value.field == "sms"
    assert all(spec.sms > 0 for spec in load_catalog().specs.values())
