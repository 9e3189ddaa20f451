"""``build_pool`` hands out the previous tick's NodePool when what managed jobs may use is the same (issue 27,
twenty-second session), and what the pool works out once (its capacity, placement's free lists) answers for it.

A managed job starting on a node changes the node's usage but not the pool (managed usage is not taken out): the
same pool comes back. An unmanaged job's GPUs change it: a new pool with the new numbers. The pool's arrays are
read only, so nobody can change a pool that later ticks are handed; placement's free lists are copies, so what one
placement takes is not missing from the next.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from slurmplan.domain import Cluster, JobState
from slurmplan.mechanism.problem import build_pool

from .helpers import cluster, mjob


def test_the_same_free_numbers_give_the_same_pool_and_others_a_new_one() -> None:
    idle = cluster(a100=(4, 8), v100=(4, 4))  # enough nodes that one changed node is re-read alone
    first = build_pool(idle, ())
    assert build_pool(idle, ()) is first
    # a managed job on a100-0: the node's usage moved, what managed jobs may use did not
    job = mjob(1, {"a100": {4: 1.0}}, gpus=4, state=JobState.RUNNING, nodes=("a100-0",))
    busy = Cluster((replace(idle.nodes[0], gpus_used=4), *idle.nodes[1:]))
    assert build_pool(busy, (job,)) is first
    assert first.capacity() == {"a100": 32, "v100": 16}
    # the same usage by an unmanaged job: a100-0 has 4 GPUs left for managed jobs
    other = build_pool(busy, ())
    assert other is not first
    assert other.gpus.tolist() == [4, 8, 8, 8, 4, 4, 4, 4]
    assert other.capacity() == {"a100": 28, "v100": 16}
    assert first.gpus.tolist() == [8, 8, 8, 8, 4, 4, 4, 4]  # the first pool is unchanged
    for values in (other.gpus, other.cpus, other.memory_mb):
        with pytest.raises(ValueError):
            values[0] = 0


def test_free_lists_are_copies_of_the_pools_numbers() -> None:
    pool = build_pool(cluster(a100=(2, 8)), ())
    g, c, m = pool.free_lists()
    g[0] -= 8
    c[0] -= 1
    m[0] -= 1
    again = pool.free_lists()
    assert again == (pool.gpus.tolist(), pool.cpus.tolist(), pool.memory_mb.tolist())
    assert again[0] is not g
    assert np.array_equal(pool.gpus, [8, 8])
