"""The shipped constants against the published dataset: the in-sample errors README states
(``benchmarks/bench_perf_model.py`` measures them, with the leave-one-table-out errors, which take a minute), and
the GEMM wave term that lets one set of constants serve K80s and A100s alike."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from slurmplan.domain import Plan, ValidationError
from slurmplan.perf.compute import wave_efficiency
from slurmplan.perf.fit_published import predict_rows
from slurmplan.perf.hardware import get_gpu, load_catalog
from slurmplan.perf.memory import plan_memory
from slurmplan.perf.models import get_model
from slurmplan.perf.plans import PlanSpace
from slurmplan.perf.published import fitted_rows, load_published
from slurmplan.perf.rubick import predict
from slurmplan.perf.search import search_plans
from slurmplan.perf.stacks import get_stack

README_IN_SAMPLE = {  # per-table mean |error| of the shipped constants, as README's model-error table states
    "megatron-t4.1": 0.021,
    "megatron-t4.2": 0.029,
    "megatron-stated": 0.039,
    "pipedream-2bw": 0.009,
    "gavel-transformer": 0.107,
    "gavel-t6.1": 0.0535,
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


def test_a_stack_ranks_only_the_plans_it_can_run() -> None:
    model, gpu = get_model("megatron-18b"), get_gpu("a100-80g")
    ddp = search_plans(model, gpu, 64, 512, stack="ddp")
    plans = [ddp.ranked(i).plan for i in range(ddp.feasible_count)]
    assert all(p.tp == 1 and p.pp == 1 and p.zero_stage == 0 for p in plans)  # an 18B model fits no DDP plan here
    old = search_plans(model, gpu, 64, 512, stack="megatron-2021").top(50)
    assert old and all(r.plan.zero_stage == 0 and not r.plan.offload for r in old)
    assert any(
        r.plan.zero_stage == 3 for r in search_plans(get_model("llama2-7b"), gpu, 8, 64, stack="deepspeed").top(400)
    )


def test_megatron_keeps_fp32_gradients_and_the_2021_code_more_activations() -> None:
    model, gpu = get_model("megatron-145b"), get_gpu("a100-80g")
    plan = Plan(dp=1, tp=8, pp=16, micro_batch=1, grad_accum=16)
    deepspeed, megatron = (plan_memory(model, plan, gpu, get_stack(s)) for s in ("deepspeed", "megatron"))
    assert megatron.gradients[0] == pytest.approx(2 * deepspeed.gradients[0])
    # thesis figure 4.17: without recomputation the 2021 code ran 8 micro-batches in flight at (8, 16), not 16
    old = get_stack("megatron-2021")
    assert not plan_memory(model, plan, gpu, old).fits[0]
    assert plan_memory(model, Plan(dp=1, tp=8, pp=16, micro_batch=1, grad_accum=8), gpu, old).fits[0]


def test_the_dp_sync_of_a_pipeline_overlaps_only_its_last_backward() -> None:
    model, gpu = get_model("megatron-18b"), replace(get_gpu("a100-80g"), inter_node_gbps=2.0)
    plan = Plan(dp=8, tp=2, pp=4, micro_batch=1, grad_accum=64, checkpointing=True)
    t = predict(model, PlanSpace.from_plans([plan], 8), gpu, stack="megatron")
    exposed = t.t_cc - t.forward - t.backward - t.comm_tp - t.comm_pp
    # 64 micro-batches of backward would hide the whole sync; the last one's cannot, so most of it is paid
    assert t.backward[0] > 2 * t.comm_dp[0] and exposed[0] > 0.8 * t.comm_dp[0]


def test_the_2021_code_reduced_a_pipelines_gradients_after_the_flush() -> None:
    model, gpu = get_model("megatron-39b"), get_gpu("a100-80g")
    plan = Plan(dp=32, tp=8, pp=2, micro_batch=4, grad_accum=12, checkpointing=True)
    space = PlanSpace.from_plans([plan], 8)
    old, new = (predict(model, space, gpu, stack=s) for s in ("megatron-2021", "megatron"))
    # same compute (both run Megatron's kernels): only the part of the sync the last backward would hide differs
    assert 0 < old.t_iter[0] - new.t_iter[0] <= old.comm_dp[0]


def test_a_ddp_jobs_measurement_calibrates_against_the_ddp_prediction() -> None:
    """A job measured at exactly the model's DDP figure needs no correction under its own stack; read against the
    default (Megatron-kernel) prediction it would look slower than predicted, and the ratio would absorb that."""
    from slurmplan.perf.calibration import calibrate
    from slurmplan.perf.search import predict_plan

    model, gpu = get_model("gpt2-1.5b"), get_gpu("a100")
    plan = Plan(dp=2, micro_batch=4, grad_accum=8)
    measured = predict_plan(model, gpu, plan, stack="ddp")
    rows = (("a100", 2, plan, measured, 1, None),)
    assert calibrate(model, rows, get_stack("ddp")).ratios["a100"] == pytest.approx(1.0)
    assert calibrate(model, rows).ratios["a100"] < 0.95


def test_each_report_is_predicted_under_the_framework_that_ran_it() -> None:
    """The online refit: a Megatron job's reports from the launcher's trainer (``ddp``) correct its prediction only
    by what the model got wrong under ddp; without the report's stack the ratio absorbs the framework (issue 28)."""
    from slurmplan.perf.calibration import calibrate
    from slurmplan.perf.search import predict_plan

    model, gpu = get_model("gpt2-1.5b"), get_gpu("a100")
    plan = Plan(dp=2, micro_batch=4, grad_accum=8)
    measured = predict_plan(model, gpu, plan, stack="ddp")
    said = (("a100", 2, plan, measured, 1, "ddp"),)
    unsaid = (("a100", 2, plan, measured, 1, None),)
    megatron = get_stack("megatron")
    assert calibrate(model, said, megatron).ratios["a100"] == pytest.approx(1.0)
    assert calibrate(model, said).ratios["a100"] == pytest.approx(1.0)
    assert calibrate(model, unsaid, megatron).ratios["a100"] < 0.95
    # a measured Cell stands for the job only when its stack ran it (or the report did not say)
    assert calibrate(model, said, megatron).cells == {}
    assert calibrate(model, said, get_stack("ddp")).cells and calibrate(model, unsaid, megatron).cells


def test_candidates_refit_from_reports_of_another_stack_without_absorbing_it() -> None:
    from slurmplan.domain import Hints, Measurement
    from slurmplan.perf.candidates import job_candidates
    from slurmplan.perf.search import predict_plan

    model, gpu = get_model("gpt2-1.5b"), get_gpu("a100")
    plan = Plan(dp=2, micro_batch=4, grad_accum=8)
    ddp_rate = predict_plan(model, gpu, plan, stack="ddp")
    hints = Hints(managed=True, model="gpt2-1.5b", min_gpus=2, max_gpus=4, global_batch=64, stack="megatron")
    base = {c.cell: c.throughput for c in job_candidates(hints, {"a100": 8})}
    report = Measurement("gpt2-1.5b", "a100", 2, plan, ddp_rate, stack="ddp")
    after = {c.cell: c.throughput for c in job_candidates(hints, {"a100": 8}, [report])}
    four = next(cell for cell in base if cell.gpus == 4)
    assert after[four] == pytest.approx(base[four], rel=1e-6)  # exactly the ddp prediction: nothing to correct
    later = {c.cell: c.throughput for c in job_candidates(hints, {"a100": 8}, [replace(report, stack=None)])}
    assert later[four] < 0.95 * base[four]  # read as a Megatron report, the job looks slower than predicted
