"""The published dataset: every row loads with provenance, bad rows are refused naming the field, and the model's
figure for a row is in the row's unit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmplan.domain import ValidationError
from slurmplan.perf.published import DEFAULT_DATASET, fitted_rows, load_published, predicted_value
from slurmplan.perf.stacks import get_stack, stack_for_adapter


def test_every_row_loads_with_provenance_and_a_plan() -> None:
    rows = load_published()
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids))
    for r in rows:
        assert r.paper and r.source and r.unit in ("tflops_per_gpu", "ratio")
        assert r.run.plan.gpus == r.gpus, r.id
        assert r.run.plan.global_batch == r.global_batch, r.id
        assert r.fit or r.why, r.id
    tables = {r.table for r in rows}
    # what the issue lists: Megatron tables, PipeDream and 2BW, Gavel, Rubick, Crius, EasyScale
    for name in ("megatron-t4.1", "megatron-t4.2", "pipedream", "pipedream-2bw", "gavel-transformer", "rubick"):
        assert name in tables
    assert {"crius", "easyscale"} <= tables


def test_table_4_1_rows_carry_the_published_plans() -> None:
    rows = {r.id: r for r in load_published()}
    one_t = rows["t41-1t"]
    assert (one_t.run.plan.tp, one_t.run.plan.pp, one_t.run.plan.dp) == (8, 64, 6)
    assert one_t.run.plan.checkpointing and one_t.value == 163 and one_t.run.gpu.name == "a100-80g"
    assert rows["t41-530b"].run.plan.virtual_stages == 3
    assert any("run_table_1.sh" in a for a in one_t.assumptions)
    zero3 = rows["t42-zero3-175b-384"]
    assert zero3.run.stack.name == "deepspeed" and zero3.run.plan.zero_stage == 3


def test_ratio_rows_name_their_baseline() -> None:
    for r in fitted_rows(load_published()):
        if r.unit == "ratio":
            assert r.baseline is not None and r.baseline != r.run, r.id


def _write(tmp_path: Path, row: dict, table: dict | None = None) -> Path:
    body = {"paper": "p", "source": "s", "hardware": {"gpu": "a100"}, "unit": "tflops_per_gpu", "rows": [row]}
    body.update(table or {})
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump({"tables": {"t": body}}))
    return path


GOOD = {"id": "r1", "model": "gpt2-1.5b", "gpus": 8, "batch": 16, "plan": {"tp": 2, "mb": 1}, "value": 100}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"value": -3}, "value"),
        ({"gpus": 0}, "gpus"),
        ({"plan": {"tp": 3}}, "plan"),
        ({"plan": {"mb": 3}}, "batch"),
        ({"plan": {"warp": 1}}, "plan field"),
        ({"model": "no-such-model"}, "model"),
        ({"unit": "furlongs"}, "unit"),
        ({"colour": "red"}, "field"),
        ({"fit": False}, "why"),
        ({"unit": "ratio"}, "baseline"),
        ({"hardware": {"gpu": "z80"}}, "hardware.gpu"),
        ({"stack": "tensorflow"}, "stack"),
    ],
)
def test_bad_rows_are_refused_naming_the_field(tmp_path: Path, change: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        load_published(_write(tmp_path, {**GOOD, **change}))
    assert err.value.field == field
    assert "row r1" in str(err.value)


def test_a_good_row_loads_and_converts_units(tmp_path: Path) -> None:
    (row,) = load_published(_write(tmp_path, GOOD))
    assert row.run.plan.dp == 4 and row.run.plan.grad_accum == 4
    flops = row.model.training_flops_per_sample(checkpointing=True)
    assert predicted_value(row, 2.0) == pytest.approx(2.0 * flops / 8 / 1e12)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    body = {"paper": "p", "source": "s", "hardware": {"gpu": "a100"}, "unit": "tflops_per_gpu", "rows": [GOOD, GOOD]}
    path.write_text(yaml.safe_dump({"tables": {"t": body}}))
    with pytest.raises(ValidationError, match="unique"):
        load_published(path)


def test_shipped_dataset_is_the_default() -> None:
    assert DEFAULT_DATASET.exists() and len(load_published(DEFAULT_DATASET)) == len(load_published())


def test_stacks_are_explicit_and_known_to_the_adapters() -> None:
    assert get_stack("ddp+fp32").precision == "fp32" and not get_stack("ddp").fused_kernels
    assert stack_for_adapter("megatron_args").name == "megatron"
    assert stack_for_adapter("deepspeed_config").name == "deepspeed"
    with pytest.raises(ValidationError, match="stack"):
        get_stack("jax")


def test_crius_bert_2_6b_on_four_v100s_needs_model_parallelism_as_stated() -> None:
    from slurmplan.perf.search import search_plans

    row = next(r for r in load_published() if r.id == "crius-bert-2.6b-4xv100-needs-tp")
    search = search_plans(row.model, row.run.gpu, row.gpus, row.global_batch, stack=row.run.stack)
    space, order = search.space, search.order
    fits_pure_dp = ((space.tp[order] == 1) & (space.pp[order] == 1)).any()
    assert not fits_pure_dp
    assert (space.tp[order] == 4).any()
