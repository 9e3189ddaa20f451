"""The hint grammar: canonical round trips, refusals that name key/value/allowed, admin comment layout."""

from __future__ import annotations

import calendar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmplan.domain import Cell, Hints, JobClass, Plan, ValidationError
from slurmplan.formats import (
    REMEMBERED_COMMENT_CHARS,
    STACKS,
    AdminComment,
    _split_admin_comment,  # the memo's two sides, compared
    _split_remembered,
    compose_admin_comment,
    find_hints,
    format_decision,
    format_hints,
    parse_decision,
    parse_hints,
    plan_environment,
    split_admin_comment,
)

FULL = (
    "slurmplan:model=llama2-7b;gpus=4;min=2;max=8;types=a100,h100;class=guaranteed;workers=8;"
    "batch=512;seq=2048;stack=deepspeed;steps=10000;deadline=2026-11-23T12:00"
)
DECISION = "slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | round 17 | lease until 12:06"

positive = st.integers(min_value=1, max_value=999_999_999)
gpu_type = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,31}", fullmatch=True)
model = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,63}", fullmatch=True)
deadline = st.integers(min_value=0, max_value=253402300799).map(float)


@st.composite
def hints_strategy(draw: st.DrawFn) -> Hints:
    """Any Hints the grammar can carry: counts are drawn so the cross-field rules hold."""
    counts = sorted(draw(st.lists(positive, min_size=4, max_size=4)))
    lo, mid, hi, top = counts
    use = draw(st.lists(st.booleans(), min_size=4, max_size=4))
    max_gpus = hi if use[2] else None
    return Hints(
        managed=draw(st.booleans()),
        model=draw(st.none() | model),
        gpu_types=tuple(draw(st.lists(gpu_type, max_size=4, unique=True))),
        gpus=mid if use[1] else None,
        min_gpus=lo if use[0] else None,
        max_gpus=max_gpus,
        job_class=draw(st.sampled_from(list(JobClass))),
        workers=top if use[3] else None,
        global_batch=draw(st.none() | positive),
        seq_len=draw(st.none() | positive),
        stack=draw(st.none() | st.sampled_from(STACKS)),
        steps=draw(st.none() | positive),
        deadline=draw(st.none() | deadline),
    )


def test_full_example_parses_to_every_field() -> None:
    h = parse_hints(FULL)
    assert h == Hints(
        model="llama2-7b",
        gpu_types=("a100", "h100"),
        gpus=4,
        min_gpus=2,
        max_gpus=8,
        job_class=JobClass.GUARANTEED,
        workers=8,
        global_batch=512,
        seq_len=2048,
        stack="deepspeed",
        steps=10000,
        deadline=float(calendar.timegm((2026, 11, 23, 12, 0, 0, 0, 0, 0))),
    )
    assert format_hints(h) == FULL


def test_lenient_input_becomes_canonical() -> None:
    text = "  slurmplan: steps = 010 ;; types=A100, v100 ;gpus=2;deadline=2030-01-02T03:04:05Z; "
    assert format_hints(parse_hints(text)) == "slurmplan:gpus=2;types=a100,v100;steps=10;deadline=2030-01-02T03:04:05"


def test_empty_hints_are_defaults() -> None:
    assert parse_hints("slurmplan:") == Hints()
    assert format_hints(Hints()) == "slurmplan:"
    assert parse_hints("slurmplan:managed=no").managed is False


@pytest.mark.parametrize(
    ("text", "field", "allowed"),
    [
        ("gpus=4", "prefix", "slurmplan:"),
        ("slurmplan:gpu=4", "key", "one of model, gpus"),
        ("slurmplan:gpus", "gpus", "gpus=VALUE"),
        ("slurmplan:gpus=0", "gpus", "from 1 to 999999999"),
        ("slurmplan:gpus=-1", "gpus", "digits only"),
        ("slurmplan:gpus=1000000000", "gpus", "from 1 to 999999999"),
        ("slurmplan:gpus=2;gpus=3", "gpus", "once"),
        ("slurmplan:class=gold", "class", "guaranteed or best-effort"),
        ("slurmplan:types=a100,,h100", "types", "comma-separated"),
        ("slurmplan:types=a100,A100", "types", "no repeats"),
        ("slurmplan:model=bad model", "model", "1-64 characters"),
        ("slurmplan:model=", "model", "1-64 characters"),
        ("slurmplan:deadline=2026-02-29T00:00", "deadline", "YYYY-MM-DD"),
        ("slurmplan:deadline=2026-11-23 12:00", "deadline", "YYYY-MM-DD"),
        ("slurmplan:deadline=2026-11-23T24:00", "deadline", "YYYY-MM-DD"),
        ("slurmplan:managed=false", "managed", "yes or no"),
        ("slurmplan:stack=jax", "stack", "one of megatron, deepspeed, ddp, fsdp"),
        ("slurmplan:stack=Megatron", "stack", "one of megatron, deepspeed, ddp, fsdp"),
        ("slurmplan:min=4;max=2", "min", "at most max=2"),
        ("slurmplan:gpus=1;min=2", "gpus", "at least min=2"),
        ("slurmplan:gpus=9;max=8", "gpus", "at most max=8"),
        ("slurmplan:max=8;workers=4", "workers", "at least max=8"),
    ],
)
def test_refusals_name_field_value_and_allowed(text: str, field: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_hints(text)
    assert info.value.field == field
    assert allowed in info.value.allowed
    assert field in str(info.value)


def test_leap_day_accepted_in_leap_year() -> None:
    assert parse_hints("slurmplan:deadline=2028-02-29T00:00").deadline == calendar.timegm((2028, 2, 29, 0, 0, 0))


def test_format_refuses_inconsistent_hints() -> None:
    with pytest.raises(ValidationError):
        format_hints(Hints(min_gpus=4, max_gpus=2))
    with pytest.raises(ValidationError):
        format_hints(Hints(model="no spaces allowed"))
    with pytest.raises(ValidationError):
        format_hints(Hints(gpus=0))


@given(hints_strategy())
def test_round_trip(h: Hints) -> None:
    text = format_hints(h)
    assert parse_hints(text) == h
    assert format_hints(parse_hints(text)) == text


@given(hints_strategy())
def test_admin_comment_keeps_hints_and_decision_apart(h: Hints) -> None:
    comment = compose_admin_comment(h, DECISION)
    assert split_admin_comment(comment) == AdminComment(format_hints(h), DECISION)
    assert find_hints(comment) == h


def test_admin_comment_layout_without_separator() -> None:
    assert split_admin_comment(DECISION) == AdminComment(decision=DECISION)
    assert split_admin_comment("slurmplan:gpus=2") == AdminComment(hints="slurmplan:gpus=2")
    assert split_admin_comment("slurmplan:") == AdminComment(hints="slurmplan:")
    assert split_admin_comment("site note") == AdminComment()
    assert find_hints("") is None
    assert compose_admin_comment(None, DECISION) == "|| " + DECISION
    assert split_admin_comment(compose_admin_comment(None, DECISION)) == AdminComment(decision=DECISION)
    assert compose_admin_comment("slurmplan:gpus=2") == "slurmplan:gpus=2"


@given(hints_strategy())
def test_split_admin_comment_remembered_answers_as_computed_afresh(h: Hints) -> None:
    """``split_admin_comment`` is remembered per text (issue 27: every tick reads every held job's comment); the
    remembered answer is the one computed afresh, also for texts seen before, and the same frozen object."""
    for text in (compose_admin_comment(h, DECISION), compose_admin_comment(h), DECISION, "", "site note || x"):
        first = split_admin_comment(text)
        assert first == _split_admin_comment(text)
        assert split_admin_comment(text) is first


def test_a_long_user_comment_is_split_but_not_remembered() -> None:
    """A user's ``--comment`` may be any length: past REMEMBERED_COMMENT_CHARS it is split afresh each time, so
    what users write cannot fill the daemon's memory through the memo."""
    long = "slurmplan:gpus=2" + " " * REMEMBERED_COMMENT_CHARS + "|| slurmplan:decided"
    before = _split_remembered.cache_info().currsize
    assert split_admin_comment(long) == _split_admin_comment(long)
    assert split_admin_comment(long) is not split_admin_comment(long)
    assert _split_remembered.cache_info().currsize == before


def test_decision_round_trip_and_environment() -> None:
    plan = Plan(dp=2, tp=4, pp=2, micro_batch=2, grad_accum=8, checkpointing=True, zero_stage=1, virtual_stages=2)
    cell = Cell("a100", 16, 2)
    text = format_decision(cell, plan, "round 17", "lease until 12:06")
    assert text == "slurmplan: a100x16 dp2 tp4 pp2 mb2 ga8 v2 gc z1 | round 17 | lease until 12:06"
    assert parse_decision(compose_admin_comment("slurmplan:gpus=16", text)) == (cell, plan)
    assert parse_decision("slurmplan:gpus=16") is None
    env = plan_environment(cell, plan)
    assert env["SLURMPLAN_PP"] == "2" and env["SLURMPLAN_CHECKPOINTING"] == "1" and env["SLURMPLAN_GPU_TYPE"] == "a100"
    with pytest.raises(ValidationError):
        parse_decision("slurmplan: a100x8 dp2 bogus")


# ----------------------------------------------------------------- one module for the formats (issue 13)


def test_old_import_places_are_the_formats_module() -> None:
    """launch.plan_env and the mechanism use the one implementation in ``slurmplan.formats``; slurm.hints, which
    only re-exported it, is gone."""
    import importlib.util

    from slurmplan import formats
    from slurmplan.launch import plan_env

    assert plan_env.parse_plan_short is formats.parse_plan_short and plan_env.PLAN_VARS == formats.PLAN_VARS
    assert importlib.util.find_spec("slurmplan.slurm.hints") is None


def test_decision_text_and_replacing_it_keeps_what_came_before() -> None:
    from slurmplan.formats import decision_of, decision_text, same_configuration, with_decision

    cell = Cell("a100", 8, 1)
    text = decision_text(cell, None, 17)
    assert text == "slurmplan: a100x8 dp8 tp1 pp1 mb1 ga1 | since round 17"
    assert same_configuration(f"slurmplan:gpus=8 || {text}", cell, None)
    assert same_configuration(f"slurmplan:gpus=8 || {decision_text(cell, None, 30)}", cell, Plan(dp=8))
    assert not same_configuration(text, Cell("a100", 4, 1), None) and not same_configuration("", cell, None)
    assert parse_decision(text) == (cell, Plan(dp=8))
    old = with_decision("slurmplan:gpus=8", "slurmplan: v100x8 dp8 | round 16 | lease until 22:07")
    assert with_decision(old, text) == f"slurmplan:gpus=8 || {text}"
    assert decision_of(with_decision(old, text)) == text
    # an admin's own note is not slurmplan's to drop
    assert with_decision("ticket 123", text) == f"ticket 123 || {text}"
    assert with_decision("", text) == text


def test_plan_environment_round_trips() -> None:
    from slurmplan.formats import PLAN_VARS, plan_from_environment

    plan = Plan(dp=2, tp=2, pp=2, micro_batch=4, grad_accum=2, checkpointing=True, zero_stage=2, offload=True)
    cell = Cell("h100", 16, 2)
    env = plan_environment(cell, plan)
    assert set(env) == set(PLAN_VARS)
    assert plan_from_environment(env) == (plan, "h100", 16)
    assert plan_from_environment({"PATH": "/bin"}) is None
    with pytest.raises(ValidationError) as err:
        plan_from_environment({"SLURMPLAN_TP": "x"})
    assert err.value.field == "SLURMPLAN_TP"


def test_every_hint_stack_is_a_stack_of_the_performance_model() -> None:
    from slurmplan.perf.stacks import STACKS as MODEL_STACKS

    assert set(STACKS) <= set(MODEL_STACKS)
