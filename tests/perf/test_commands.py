"""``slurmplan plan`` and ``slurmplan fit`` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slurmplan.cli import main
from slurmplan.domain import Measurement
from slurmplan.perf.hardware import get_gpu
from slurmplan.perf.measurements import load_measurements, measurement_to_dict
from slurmplan.perf.models import get_model
from slurmplan.perf.rubick import RubickConstants
from slurmplan.perf.search import predict_plan, search_plans


def test_plan_json_ranks_feasible_plans(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["plan", "--model", "gpt2-1.5b", "--gpus", "a100:8,v100:8", "--global-batch", "512", "--top", "5",
               "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["model"] == "gpt2-1.5b" and len(out["plans"]) == 5
    rates = [p["samples_per_s"] for p in out["plans"]]
    assert rates == sorted(rates, reverse=True) and out["plans"][0]["gpu_type"] == "a100"
    for p in out["plans"]:
        assert p["gpu_memory_gb"] <= 40 and p["cpus"] >= 8 and p["host_memory_gb"] > 0
    assert "faster than" in out["why"] or out["why"].startswith("as fast as")  # the top two tie here
    assert "0.0%" not in out["why"]
    assert out["mixed_dp"]["workers"] == 16


def test_plan_text_with_model_file_and_infeasible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "tiny.yaml"
    f.write_text("name: tiny\nlayers: 4\nhidden: 256\nheads: 4\nseq_len: 128\nvocab: 1000\n")
    assert main(["plan", "--model-file", str(f), "--gpus", "t4:2", "--global-batch", "64", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("tiny:") and "t4x2" in text and "best:" in text
    assert main(["plan", "--model", "llama2-70b", "--gpus", "t4:1", "--global-batch", "64"]) == 1
    assert "no plan fits" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--model", "nope", "--gpus", "a100:8"], "model"),
        (["plan", "--model", "bert-large", "--gpus", "x100:8"], "gpu_type"),
        (["plan", "--model", "bert-large", "--gpus", "a100:-8"], "gpus"),
        (["plan", "--model", "bert-large", "--gpus", "a100:8", "--global-batch", "-3"], "global_batch"),
        (["plan", "--gpus", "a100:8"], "model"),
        (["plan", "--model", "bert-large", "--gpus", "a100:8", "--stack", "jax"], "invalid stack 'jax': one of"),
    ],
)
def test_plan_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_plan_predicts_for_the_named_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "gpt2-1.5b", "--gpus", "a100:8", "--stack", "ddp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stack"] == "ddp" and all(" tp1 pp1 " in p["plan"] for p in out["plans"])


def _write_measurements(path: Path, n_per_count: int = 4) -> None:
    true = RubickConstants(k_bwd=2.2, k_sync=2.5, k_opt=1.2, k_opt_off=6.0, k_off=2.0, k_swap=1.4, k_const=0.04)
    rng = np.random.default_rng(7)
    model, gpu = get_model("bert-large"), get_gpu("v100")
    lines = []
    for gpus in (1, 2, 4, 8):
        search = search_plans(model, gpu, gpus, 128)
        picks = list(search.order[:n_per_count]) + [i for i in search.order if search.space.offload[i]][:2]
        for i in picks:
            plan = search.space.plan(int(i))
            sps = predict_plan(model, gpu, plan, constants=true) * float(np.exp(rng.normal(0, 0.02)))
            m = Measurement(model="bert-large", gpu_type="v100", gpus=gpus, plan=plan, samples_per_s=sps, job_id=1)
            lines.append(json.dumps(measurement_to_dict(m)))
    path.write_text("\n".join(lines) + "\n")


def test_fit_reports_constants_and_heldout_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.jsonl"
    _write_measurements(f)
    assert len(load_measurements(f)) >= 20
    assert main(["fit", "--measurements", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (fit,) = out["fits"]
    assert fit["model"] == "bert-large" and set(fit["constants"]) == set(RubickConstants.names())
    assert fit["heldout_mean_error"] < 0.074 and fit["heldout_points"] > 0
    assert main(["fit", "--measurements", str(f)]) == 0
    assert "held-out" in capsys.readouterr().out


def test_fit_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"model": "bert-large", "gpu_type": "v100", "gpus": 2, "plan": {"dp": 2}, "samples_per_s": -1}\n')
    assert main(["fit", "--measurements", str(f)]) == 1
    assert "samples_per_s" in capsys.readouterr().err
    f.write_text("not json\n")
    assert main(["fit", "--measurements", str(f)]) == 1
    assert "JSON" in capsys.readouterr().err
    assert main(["fit", "--measurements", str(tmp_path / "missing.jsonl")]) == 1


def test_plan_without_a_model_names_both_options_and_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpus", "a100:8"]) == 1
    err = capsys.readouterr().err
    assert "None" not in err and "neither --model nor --model-file" in err and "llama2-7b" in err


def test_equal_plans_are_not_called_zero_percent_faster() -> None:
    from slurmplan.perf.commands import COMPONENT_WORDS, explain_winner

    comps = dict.fromkeys(COMPONENT_WORDS, 1.0)
    a = {"plan": "dp8", "gpu_type": "a100", "gpus": 8, "samples_per_s": 5.0, "components_s": comps}
    b = {**a, "gpu_type": "h100"}
    why = explain_winner(a, b)
    assert "0.0%" not in why and why.startswith("as fast as dp8 on h100x8")


def test_mixed_types_with_a_batch_workers_cannot_split_suggest_workers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama2-7b", "--gpus", "a100:8,v100:4", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "not a multiple of 12 workers" in out and "--workers 8 or --workers 16" in out
