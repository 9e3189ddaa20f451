"""Loading policies from YAML (errors name file, field and what is allowed) and the allocate CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slurmplan.cli import main
from slurmplan.domain import ValidationError
from slurmplan.policy import list_policies, load_policy
from slurmplan.policy.registry import PRESET_DIR, load_config


def write(tmp_path, text: str):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return str(path)


def test_every_shipped_policy_loads_and_names_itself():
    names = list_policies()
    assert {"las", "las_agnostic", "fifo", "slurm_fifo", "slurmplan", "hierarchical", "min_cost_slo"} <= set(names)
    for name in names:
        assert load_policy(name).name == name


def test_repo_policies_folder_is_the_package_presets():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2] / "policies"
    assert repo.resolve() == PRESET_DIR.resolve()


def test_load_by_path_and_by_objective(tmp_path):
    path = write(tmp_path, "name: mine\nobjective: max_min_fairness\nparams: {aware: false}\n")
    policy = load_policy(path)
    assert (policy.name, policy.params["aware"]) == ("mine", False)
    assert load_policy("min_makespan").config.objective == "min_makespan"


def test_round_settings_in_an_old_policy_file_load_with_a_warning_saying_where_they_belong(tmp_path, caplog):
    """Round settings have one owner, the tick's config: a policy file's copies were never read by the daemon."""
    text = "name: old\nobjective: fifo\nround_s: 120\nreconfig_threshold: 1.5\nreconfig_cost_s: 30\n"
    path = write(tmp_path, text)
    with caplog.at_level("WARNING", logger="slurmplan.policy.registry"):
        config = load_config(path)
    assert (config.name, config.objective) == ("old", "fifo")
    assert not hasattr(config, "round_s")
    warned = {r.getMessage() for r in caplog.records}
    assert len(warned) == 3 and all(path in m and "daemon's config" in m for m in warned)
    assert any("round_s: 120 is not read" in m and "--round" in m for m in warned)
    assert any("reconfig_cost_s: 30" in m and "--reconfig-cost" in m for m in warned)
    for name in list_policies():  # the shipped files say nothing the tick owns
        caplog.clear()
        with caplog.at_level("WARNING", logger="slurmplan.policy.registry"):
            load_config(name)
        assert not caplog.records, name


@pytest.mark.parametrize(
    ("text", "field", "allowed"),
    [
        ("name: x\nobjective: fifo\ncolour: red\n", "colour", "known field"),
        ("name: x\nobjective: nope\n", "objective", "max_min_fairness"),
        ("name: x\nobjective: fifo\nsolver: ECOS\n", "solver", "highs"),
        ("name: x\nobjective: fifo\nparams: {speed: 3}\n", "params.speed", "aware"),
        ("name: x\nobjective: fifo\nparams: {aware: 3}\n", "params.aware", "true"),
        ("name: x\nobjective: slurmplan\nparams: {length_weight: -1}\n", "params.length_weight", ">= 0"),
        ("objective: fifo\n", "name", "required"),
        ("- a\n- b\n", "document", "mapping"),
        ("name: [x\n", "yaml", "valid YAML"),
    ],
)
def test_bad_yaml_names_file_field_and_allowed(tmp_path, text, field, allowed):
    path = write(tmp_path, text)
    with pytest.raises(ValidationError) as err:
        load_config(path)
    assert err.value.field == field
    assert path in str(err.value)
    assert allowed in str(err.value)


def test_unknown_policy_name_lists_the_known_ones():
    with pytest.raises(ValidationError, match="slurm_fifo"):
        load_policy("no_such_policy")


def test_allocate_cli_json_reproduces_thesis_example(tmp_path, capsys):
    jobs = [
        {"id": "job0", "throughputs": {"v100": 40, "k80": 10}},
        {"id": "job1", "throughputs": {"v100": 12, "k80": 4}},
        {"id": "job2", "throughputs": {"v100": 100, "k80": 50}},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    assert main(["allocate", "--jobs", str(path), "--cluster", "v100:1,k80:1", "--policy", "las", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"][0]["shares"] == {"v100x1": pytest.approx(5 / 11, abs=1e-6)}
    assert out["jobs"][2]["shares"]["k80x1"] == pytest.approx(10 / 11, abs=1e-6)
    assert out["objective"] == pytest.approx(8 / 11, abs=1e-6)
    assert out["gpus_used"] == {"v100": pytest.approx(1.0), "k80": pytest.approx(1.0)}


def test_allocate_cli_bad_job_field_is_an_error(tmp_path, capsys):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{"id": 1, "throughputs": {"v100": 1}, "colour": "red"}]))
    assert main(["allocate", "--jobs", str(path), "--cluster", "v100:1"]) == 1
    err = capsys.readouterr().err
    assert "colour" in err and "job 0" in err


def test_allocate_cli_with_model_hints(tmp_path, capsys):
    jobs = [
        {"id": 1, "hints": "slurmplan:model=gpt2-1.5b;gpus=4;min=2;max=8", "class": "guaranteed"},
        {"id": 2, "hints": "slurmplan:model=bert-large;gpus=1"},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    assert main(["allocate", "--jobs", str(path), "--cluster", "a100:8,v100:8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(job["throughput"] > 0 for job in out["jobs"])
    assert out["gpus_used"]["a100"] <= 8 + 1e-6 and out["gpus_used"]["v100"] <= 8 + 1e-6


def test_jobs_file_guaranteed_job_sla_defaults_to_its_request():
    from slurmplan.policy.jobs_file import build_input

    jobs = [
        {"id": "g", "throughputs": {"v100": 30}, "class": "guaranteed"},
        {"id": "b", "throughputs": {"v100": 40, "k80": 10}},
        {"id": "s", "throughputs": {"v100": 40}, "class": "guaranteed", "sla_throughput": 5},
    ]
    inp = build_input(jobs, {"v100": 1, "k80": 1}, "test")
    np.testing.assert_allclose(inp.problem.sla_throughput, [30.0, 0.0, 5.0])
    assert [inp.problem.cells[c].short() if c >= 0 else None for c in inp.problem.requested] == [
        "v100x1",
        None,
        "v100x1",
    ]
    alloc = load_policy("slurmplan").allocate(inp.problem)
    assert alloc.status == "sla-unmet:1"  # 30/s on the only V100 plus 5/s cannot both be met: one runs whole
    thr = alloc.effective_throughput(inp.problem)
    assert sorted([thr[0] >= 30.0, thr[2] >= 5.0]) == [False, True]
