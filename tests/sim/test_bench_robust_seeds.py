"""``bench_robust.py --seeds``: a held-out draw keeps each family's shape, loads and job mix and changes only the
seeds, so the traces are new workloads of the same kind (issue 23, thirteenth session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_modules import load_benchmark


def _bench():
    return load_benchmark("bench_robust")


def test_new_seeds_keep_each_family_and_draw_other_traces() -> None:
    bench = _bench()
    drawn = bench.with_seeds(bench.UNSEEN, "201,202")
    assert [f.name for f in drawn] == [f.name for f in bench.UNSEEN]
    for old, new in zip(bench.UNSEEN, drawn, strict=True):
        assert new.seeds == (201, 202)
        assert (new.cluster, new.loads, new.jobs, new.kind, new.config) == (
            old.cluster,
            old.loads,
            old.jobs,
            old.kind,
            old.config,
        )
    family = next(f for f in drawn if f.name == "u-replay-tiny")
    old = next(f for f in bench.UNSEEN if f.name == "u-replay-tiny")
    fresh = bench.make_trace(family, 6.0, 201, 16)
    seen = bench.make_trace(old, 6.0, 101, 16)
    assert [(j.arrival_s, j.gpus) for j in fresh] != [(j.arrival_s, j.gpus) for j in seen]
    assert bench.with_seeds(bench.UNSEEN, None) is bench.UNSEEN


def test_a_bad_seed_list_names_the_option() -> None:
    with pytest.raises(SystemExit, match="--seeds"):
        _bench().with_seeds(_bench().UNSEEN, "201,x")


def test_flagship_params_measure_a_candidate_on_top_of_the_preset(tmp_path: Path) -> None:
    """``--flagship-params`` (fourteenth session): the ``slurmplan`` rows run the preset with the given parameters
    set on top, every other preset parameter kept; without it, the shipped preset by name."""
    from slurmplan.policy import load_policy

    bench = _bench()
    assert bench.flagship_variant(None, tmp_path) == "slurmplan"
    path = bench.flagship_variant('{"stop_gang": false, "hold_s": 0}', tmp_path)
    variant, preset = load_policy(path).params, load_policy("slurmplan").params
    assert variant["stop_gang"] is False and preset["stop_gang"] is True
    assert variant["hold_s"] == 0 and preset["hold_s"] == 3600
    assert {k: v for k, v in variant.items() if k not in ("stop_gang", "hold_s")} == {
        k: v for k, v in preset.items() if k not in ("stop_gang", "hold_s")
    }


@pytest.mark.parametrize("bad", ['{"stop_gang": 3}', '{"no_such": 1}', "[1]", "{x"])
def test_a_bad_flagship_params_names_the_option(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SystemExit, match="--flagship-params"):
        _bench().flagship_variant(bad, tmp_path)


def test_shapes_build_families_of_shapes_no_other_set_uses() -> None:
    """``--shapes`` (fourteenth session, held out by shape): each family runs its generator on a cluster no
    development or ``--unseen`` family ran it on, with the seeds drawn for it, and every trace builds and fits."""
    bench = _bench()
    assert bench.family_set(False, True) is bench.SHAPES
    assert bench.family_set(True, False) is bench.UNSEEN and bench.family_set(False, False) is bench.FAMILIES
    used = {(f.kind, f.cluster) for f in bench.FAMILIES + bench.UNSEEN}
    assert 6 <= len(bench.SHAPES) <= 8
    for family in bench.SHAPES:
        assert (family.kind, family.cluster) not in used
        assert family.seeds == (501, 502)
        trace = bench.make_trace(family, family.loads[0], family.seeds[0], family.quick_jobs)
        groups = bench.parse_cluster(family.cluster).groups
        per_node = {g.gpu_type: g.gpus_per_node for g in groups}
        assert trace and all(j.gpus <= max(g.nodes * g.gpus_per_node for g in groups) for j in trace)
        if family.kind == "replay":  # one node of its type at most
            assert all(j.gpus <= per_node.get(j.gpu_type, max(per_node.values())) for j in trace)


def test_shapes_refuse_what_unseen_refuses() -> None:
    bench = _bench()
    with pytest.raises(SystemExit, match="--seeds"):
        bench.with_seeds(bench.SHAPES, "501,x")
    with pytest.raises(SystemExit, match="--unseen and --shapes"):
        bench.family_set(True, True)
    assert [f.seeds for f in bench.with_seeds(bench.SHAPES, "601")] == [(601,)] * len(bench.SHAPES)
