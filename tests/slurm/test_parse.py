"""Hostlist, GRES and TRES parsers: examples Slurm 22.05 prints, and round trips checked with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmplan.domain import ValidationError
from slurmplan.slurm.parse import (
    Gres,
    compress_hostlist,
    expand_hostlist,
    format_gres,
    format_tres,
    format_tres_per_node,
    gpu_request,
    hostlist_sort_key,
    parse_gres,
    parse_gres_item,
    parse_tres,
)

# ------------------------------------------------------------------------------------------------ hostlists


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("a100n[1-2,5],t4n3", ("a100n1", "a100n2", "a100n5", "t4n3")),
        ("n[08-10]", ("n08", "n09", "n10")),
        ("login", ("login",)),
        ("", ()),
        ("(null)", ()),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
    ],
)
def test_expand_examples(expr, names):
    assert expand_hostlist(expr) == names


def test_compress_examples():
    assert compress_hostlist(["t4n3", "a100n2", "a100n1", "a100n5", "a100n1"]) == "a100n[1-2,5],t4n3"
    assert compress_hostlist(["n10", "n9", "n2"]) == "n[2,9-10]"
    assert compress_hostlist(["n01", "n02", "n03"]) == "n[01-03]"
    assert compress_hostlist([]) == ""


@pytest.mark.parametrize("bad", ["n[1-", "n[3-1]", "n[a-b]", "n]1[", "a,,b", "bad name"])
def test_expand_rejects_malformed(bad):
    with pytest.raises(ValidationError, match="hostlist|list"):
        expand_hostlist(bad)


_prefix = st.from_regex(r"[a-z]([a-z0-9\-]{0,4}[a-z])?", fullmatch=True)
_digits = st.one_of(st.just(""), st.integers(0, 300).map(str), st.integers(0, 99).map(lambda i: f"{i:03d}"))
_names = st.lists(st.builds(lambda p, d: p + d, _prefix, _digits), max_size=25)


@given(_names)
def test_hostlist_round_trip(names):
    """compress then expand gives the distinct names back, in Slurm's order."""
    compressed = compress_hostlist(names)
    assert expand_hostlist(compressed) == tuple(sorted(set(names), key=hostlist_sort_key))


@given(_names)
def test_compress_is_stable(names):
    compressed = compress_hostlist(names)
    assert compress_hostlist(expand_hostlist(compressed)) == compressed


# ----------------------------------------------------------------------------------------------------- GRES


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:a100:4(S:0-1)", Gres("gpu", "a100", 4, sockets=(0, 1))),
        ("gpu:a100:2(IDX:0-1)", Gres("gpu", "a100", 2, indices=(0, 1))),
        ("gpu:a100:3(IDX:0-1,3)", Gres("gpu", "a100", 3, indices=(0, 1, 3))),
        ("gpu:a100:0(IDX:N/A)", Gres("gpu", "a100", 0)),
        ("gres:gpu:a100:2", Gres("gpu", "a100", 2)),
        ("gres/gpu:a100=2", Gres("gpu", "a100", 2)),
        ("gres/gpu=2", Gres("gpu", None, 2)),
        ("gres:gpu", Gres("gpu", None, 1)),
        ("gpu:0", Gres("gpu", None, 0)),
    ],
)
def test_gres_examples(text, expected):
    assert parse_gres_item(text) == expected


def test_gres_list_and_gpu_request():
    items = parse_gres("gpu:a100:3(IDX:0-1,3),mps:0(IDX:N/A)")
    assert [g.name for g in items] == ["gpu", "mps"]
    assert gpu_request("gres:gpu:a100:2") == ("a100", 2)
    assert gpu_request("gpu:a100:2,gpu:t4:1") == ("a100", 3)
    assert gpu_request("(null)") == (None, 0)
    assert gpu_request("") == (None, 0)


@pytest.mark.parametrize("bad", ["gpu:a100:x", "gpu:a100:2(IDX)", ":a100:2", "gres/gpu:a100=two"])
def test_gres_rejects_malformed(bad):
    with pytest.raises(ValidationError, match="gres"):
        parse_gres(bad)


_gtype = st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True))
_gres = st.builds(Gres, st.sampled_from(["gpu", "mps", "shard"]), _gtype, st.integers(0, 512))


@given(st.lists(_gres, max_size=4))
def test_gres_round_trip(items):
    assert parse_gres(format_gres(items)) == tuple(items)


@given(_gtype, st.integers(0, 64))
def test_tres_per_node_round_trip(gpu_type, gpus):
    assert gpu_request(format_tres_per_node(gpu_type, gpus)) == (gpu_type, gpus)


@given(
    st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True).map(sorted),
    st.sampled_from(["IDX", "S"]),
)
def test_gres_detail_indices_round_trip(indices, key):
    text = f"gpu:a100:{len(indices)}({key}:{compress_hostlist(f'i{i}' for i in indices)[1:].strip('[]')})"
    item = parse_gres_item(text)
    assert (item.indices if key == "IDX" else item.sockets) == tuple(indices)


# ----------------------------------------------------------------------------------------------------- TRES


def test_tres_example():
    tres = parse_tres("cpu=2,mem=2G,node=1,billing=2,gres/gpu:a100=2")
    assert tres == {"cpu": 2, "mem": 2048, "node": 1, "billing": 2, "gres/gpu:a100": 2}
    assert gpu_request("gres/gpu:a100=2") == ("a100", 2)


_tres_key = st.one_of(st.sampled_from(["cpu", "node", "billing", "mem"]), st.builds("gres/gpu:{}".format, _prefix))


@given(st.dictionaries(_tres_key, st.integers(0, 10**6), max_size=6))
def test_tres_round_trip(tres):
    assert parse_tres(format_tres(tres)) == tres


def test_tres_rejects_malformed():
    with pytest.raises(ValidationError, match="tres"):
        parse_tres("cpu=2,mem")
