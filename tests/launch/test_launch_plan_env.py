"""Reading the assigned plan inside a job: SPANK environment variables, the admin comment's decision text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmplan.domain import Cell, Plan, ValidationError
from slurmplan.formats import compose_admin_comment, format_decision
from slurmplan.launch.plan_env import (
    PlanSource,
    load_assigned_plan,
    parse_decision,
    parse_plan_short,
    plan_from_env,
)

plans = st.builds(
    Plan,
    dp=st.integers(1, 64),
    tp=st.integers(1, 8),
    pp=st.integers(1, 16),
    micro_batch=st.integers(1, 32),
    grad_accum=st.integers(1, 64),
    checkpointing=st.booleans(),
    zero_stage=st.sampled_from([0, 1, 2, 3]),
    offload=st.booleans(),
    virtual_stages=st.integers(1, 4),
)


@given(plans)
def test_plan_short_round_trips(plan: Plan) -> None:
    assert parse_plan_short(plan.short()) == plan


@given(plans, st.sampled_from(["a100", "v100", "t4", "h100-80gb"]), st.integers(1, 64))
def test_decision_round_trips_through_the_admin_comment(plan: Plan, gpu: str, gpus: int) -> None:
    decision = format_decision(Cell(gpu, gpus, plan.pp), plan, "round 17", "lease until 12:06")
    got = parse_decision(compose_admin_comment("slurmplan:model=bert-large;gpus=8", decision))
    assert got is not None
    assert (got.plan, got.gpu_type, got.gpus, got.source) == (plan, gpu, gpus, PlanSource.ADMIN_COMMENT)
    assert got.managed


def test_decision_from_the_comment_the_daemon_writes() -> None:
    """The layout the daemon really writes: the user's hints, `` || ``, then the decision."""
    got = parse_decision(
        "slurmplan:model=llama2-7b;gpus=8;workers=4"
        " || slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | round 17 | lease until 12:06"
    )
    assert got is not None
    assert got.plan == Plan(dp=2, tp=4, pp=1, micro_batch=2, grad_accum=8)
    assert (got.gpu_type, got.gpus) == ("a100", 8)
    assert parse_decision("slurmplan:model=llama2-7b;gpus=8") is None


@pytest.mark.parametrize("comment", ["", "nothing here", "slurmplan:", "slurmplan:   | round 3"])
def test_no_decision(comment: str) -> None:
    assert parse_decision(comment) is None


@pytest.mark.parametrize(
    ("text", "field"), [("dp2 tq4", "plan token"), ("dp0", "dp"), ("dp2 dp3", "dp"), ("z5", "zero_stage")]
)
def test_bad_plan_text_names_the_field(text: str, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_plan_short(text)
    assert err.value.field == field


def test_bad_cell_names_the_field() -> None:
    with pytest.raises(ValidationError) as err:
        parse_decision("slurmplan: a100 dp2 | round 1")
    assert err.value.field == "decision"


def test_plan_from_spank_environment() -> None:
    env = {
        "SLURMPLAN_DP": "4",
        "SLURMPLAN_TP": "2",
        "SLURMPLAN_PP": "1",
        "SLURMPLAN_MICRO_BATCH": "8",
        "SLURMPLAN_GRAD_ACCUM": "2",
        "SLURMPLAN_CHECKPOINTING": "true",
        "SLURMPLAN_ZERO_STAGE": "1",
        "SLURMPLAN_OFFLOAD": "0",
        "SLURMPLAN_VIRTUAL_STAGES": "1",
        "SLURMPLAN_GPU_TYPE": "A100",
        "SLURMPLAN_GPUS": "8",
    }
    got = plan_from_env(env)
    assert got is not None
    assert got.plan == Plan(dp=4, tp=2, micro_batch=8, grad_accum=2, checkpointing=True, zero_stage=1)
    assert (got.gpu_type, got.gpus, got.source) == ("a100", 8, PlanSource.ENV)


def test_partial_environment_keeps_defaults_and_absent_means_none() -> None:
    got = plan_from_env({"SLURMPLAN_DP": "2"})
    assert got is not None and got.plan == Plan(dp=2)
    assert plan_from_env({"SLURM_JOB_ID": "5", "PATH": "/bin"}) is None


@pytest.mark.parametrize(("name", "value"), [("SLURMPLAN_DP", "two"), ("SLURMPLAN_OFFLOAD", "maybe")])
def test_bad_environment_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValidationError) as err:
        plan_from_env({name: value})
    assert err.value.field == name


def test_environment_wins_and_default_is_unmanaged() -> None:
    assert load_assigned_plan({"SLURMPLAN_DP": "3"}, query_slurm=False).plan.dp == 3
    default = load_assigned_plan({}, query_slurm=False)
    assert default.plan == Plan() and not default.managed


def test_unreachable_squeue_falls_back_to_default() -> None:
    """Outside a cluster squeue fails; the launcher must still start, with the default plan."""
    got = load_assigned_plan({"SLURM_JOB_ID": "999999"}, query_slurm=True)
    assert got.source is PlanSource.DEFAULT
