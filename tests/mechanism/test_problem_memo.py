"""The node pool's per-tick memo gives what a fresh pass over every node gives, whatever changed in between."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from slurmplan.domain import Cluster, Node, NodeState
from slurmplan.mechanism import problem as pb


def _cluster(n: int = 12) -> Cluster:
    types = ("a100", "v100", "k80")
    return Cluster(
        tuple(Node(f"n{(7 * i) % n:02d}", NodeState.IDLE, types[i % 3], 4, cpus=32, memory_mb=64000) for i in range(n))
    )


def _fresh(cluster: Cluster) -> pb.NodePool:
    pb._last_nodes.value = None
    return pb.build_pool(cluster, ())


def _same(a: pb.NodePool, b: pb.NodePool) -> None:
    assert a.names == b.names and a.gpu_type == b.gpu_type
    for field in ("gpus", "cpus", "memory_mb"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def _step(cluster: Cluster, i: int, **changes) -> Cluster:
    nodes = list(cluster.nodes)
    nodes[i] = replace(nodes[i], **changes)
    return Cluster(tuple(nodes))


def test_usage_changes_update_only_those_rows_and_equal_a_full_pass():
    c0 = _cluster()
    pb._last_nodes.value = None
    first = pb.build_pool(c0, ())
    assert first.names == tuple(sorted(first.names))
    c1 = _step(c0, 3, gpus_used=3, cpus_used=8, memory_used_mb=1000)
    memo = pb.build_pool(c1, ())
    assert pb._last_nodes.value.names is first.names  # the memo answered
    _same(memo, _fresh(c1))
    assert memo.gpus[memo.names.index(c0.nodes[3].name)] == 1
    _same(pb.build_pool(c0, ()), _fresh(c0))  # back again: the earlier table was not changed in place


def test_a_node_leaving_the_pool_or_changing_size_rebuilds():
    c0 = _cluster()
    pb._last_nodes.value = None
    pb.build_pool(c0, ())
    for changes in ({"state": NodeState.DRAINED}, {"gpus": 8}, {"gpu_type": "t4"}, {"name": "zz"}):
        c1 = _step(c0, 5, **changes)
        _same(pb.build_pool(c1, ()), _fresh(c1))
        pb.build_pool(c0, ())
    drained = _step(c0, 5, state=NodeState.DRAINED)
    pool = pb.build_pool(drained, ())
    assert c0.nodes[5].name not in pool.names and len(pool.names) == len(c0.nodes) - 1
    assert pb._node_table(drained).total == drained.gpus_by_type()


def test_a_different_node_count_or_every_node_new_is_a_full_pass():
    c0 = _cluster()
    pb._last_nodes.value = None
    pb.build_pool(c0, ())
    bigger = _cluster(15)
    _same(pb.build_pool(bigger, ()), _fresh(bigger))
    anew = Cluster(tuple(replace(n, gpus_used=1) for n in bigger.nodes))
    _same(pb.build_pool(anew, ()), _fresh(anew))
