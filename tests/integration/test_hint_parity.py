"""Hint fuzzer: site/job_submit.lua and slurmplan.formats accept and refuse the same strings.

The lua side runs in real lua interpreters through ``hint_driver.lua``, which loads the very job_submit.lua
that slurmctld loads: lua5.3, and lua5.1 where installed (Debian's slurmctld links liblua5.1, so that is the
version that matters in production). For accepted strings both sides must produce the same canonical text, for
refused ones the same field.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmplan.domain import ValidationError
from slurmplan.formats import KEYS, format_hints, parse_hints

ROOT = Path(__file__).resolve().parents[2]
LUAS = [path for name in ("lua5.3", "lua5.1") if (path := shutil.which(name))]
pytestmark = pytest.mark.skipif(not LUAS, reason="needs the lua5.3 (or lua5.1) interpreter")


def lua_results(texts: list[str], lua: str | None = None) -> list[str]:
    """Run the lua grammar over ``texts`` (hex-encoded on the wire so any byte survives)."""
    data = "".join(t.encode().hex() + "\n" for t in texts)
    out = subprocess.run(
        [lua or LUAS[0], str(ROOT / "tests/integration/hint_driver.lua"), str(ROOT / "site/job_submit.lua")],
        input=data,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return out.splitlines()


def python_result(text: str) -> str:
    try:
        return "OK " + format_hints(parse_hints(text))
    except ValidationError as exc:
        return f"ERR {exc.field}"


# Values near the edges of each rule: digits with leading zeros and 9/10 digits, case, blanks, separators,
# non-ASCII look-alikes (Kelvin sign, Arabic-Indic digit, e acute), bad dates and leap days.
tricky_values = st.sampled_from(
    [
        "0",
        "1",
        "007",
        "999999999",
        "1000000000",
        "-3",
        "+3",
        "2.5",
        "a100",
        "A100",
        "a100,h100",
        "a100, H100 ",
        "a100,a100",
        "a100,,h100",
        "\u212a80",
        "\u0663",
        "llama2-7b",
        "meta/llama.3_8b",
        "-bad",
        "caf\u00e9",
        "guaranteed",
        "best-effort",
        "Guaranteed",
        "yes",
        "no",
        "2026-11-23T12:00",
        "2026-11-23T12:00:07Z",
        "2026-11-23T12:00Z",
        "2028-02-29T00:00",
        "2026-02-29T00:00",
        "2026-13-01T00:00",
        "2026-11-23T24:00",
        "2026-11-23T12:60",
        "1969-12-31T23:59",
        "2026-11-23 12:00",
        "",
        " ",
        "\t",
        "=",
        "x" * 65,
    ]
)
key = st.sampled_from([*KEYS, "gpu", "Model", "", " gpus ", "types\t"])
fragment = st.text(alphabet=st.sampled_from(list("09aAzZ:;=,-_./ \tT\u00e9\u212a\x00|")), max_size=12)
value = tricky_values | fragment | st.integers(1, 64).map(str)
pair = st.tuples(key, st.sampled_from(["=", " = ", "", "=="]), value).map("".join)
prefix = st.sampled_from(["slurmplan:", " slurmplan:", "slurmplan: ", "Slurmplan:", "slurmplan", ""])
valid_values = {
    "model": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,63}", fullmatch=True),
    "types": st.lists(st.from_regex(r"[a-zA-Z0-9][a-z0-9_-]{0,4}", fullmatch=True), min_size=1, max_size=3).map(
        ",".join
    ),
    "class": st.sampled_from(["guaranteed", "best-effort"]),
    "deadline": st.sampled_from(["2026-11-23T12:00", "2027-01-31T23:59:59", "2028-02-29T00:00:00Z"]),
    "managed": st.sampled_from(["yes", "no"]),
    "asked": st.sampled_from(["a100:4", "V100:02", "h100-80g:1", "a:0", "t4:1234567890", "a100", ":4"]),
    "stack": st.sampled_from(["megatron", "deepspeed", "ddp", "fsdp", "Megatron", "jax", "megatron-2021"]),
}
valid_pair = st.sampled_from(KEYS).flatmap(
    lambda k: valid_values.get(k, st.integers(1, 16).map(str)).map(lambda v: f"{k}={v}")
)
separator = st.sampled_from([";", " ; ", ";;"])
hint_text = st.tuples(prefix, st.lists(valid_pair | valid_pair | pair, max_size=6), separator).map(
    lambda t: t[0] + t[2].join(t[1])
)


@settings(max_examples=150, deadline=None)
@given(st.lists(hint_text | st.text(max_size=40), min_size=1, max_size=25))
def test_lua_and_python_agree(texts: list[str]) -> None:
    expected = [python_result(t) for t in texts]
    for lua in LUAS:
        assert lua_results(texts, lua) == expected, lua


def test_fuzzer_reaches_both_outcomes() -> None:
    """Guard against a fuzzer that only ever produces refusals (the agreement test would then prove little)."""
    texts = ["slurmplan:gpus=4;min=2;max=8;types=A100, h100", "slurmplan:gpus=0", "slurmplan:managed=no"]
    texts += ["slurmplan:stack=ddp;model=gpt2", "slurmplan:stack=jax"]
    got = lua_results(texts, LUAS[-1])
    assert got == [python_result(t) for t in texts]
    assert got[0] == "OK slurmplan:gpus=4;min=2;max=8;types=a100,h100"
    assert got[1] == "ERR gpus"
    assert got[2] == "OK slurmplan:managed=no"
    assert got[3] == "OK slurmplan:model=gpt2;stack=ddp"
    assert got[4] == "ERR stack"
