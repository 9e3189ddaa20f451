"""``benchmarks/decision_hash.py --no-details``: the decisions without their words. It shows a change to what the
details say (issue 23: the flagship's notes between rounds) leaves placements, sizes, starts and stops identical, so
it must blank every word and nothing else: a changed detail, reason or held job's why hashes the same, a changed
cell, node list, signal or start does not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slurmplan.domain import Action, ActionKind, Assignment, Cell, GpuType, Reason
from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def dh():
    return load_benchmark("decision_hash")


@dataclasses.dataclass
class _Out:  # the three fields of TickOutput that the hash reads
    actions: tuple
    assignments: tuple
    allocation: object = None


def _tick(detail: str, why: str, nodes: tuple[str, ...] = ("n1",), signal: str = "USR1") -> _Out:
    cell = Cell(GpuType("a100"), 4)
    held = f"hint=1 || slurmplan: held (preempted) | round 3 | {why}"
    acts = (
        Action(ActionKind.SIGNAL, 7, signal=signal, reason=f"preempted: {why}"),
        Action(ActionKind.ANNOTATE, 7, admin_comment=held, reason="held: preempted"),
        Action(ActionKind.UPDATE, 8, gpus_per_node=4, node_count=len(nodes), nodelist=nodes, reason=why),
    )
    rows = (Assignment(8, Reason.KEPT, cell=cell, nodes=nodes, gpus_per_node=4, share=1.0, detail=detail),)
    return _Out(acts, rows)


def test_no_details_blanks_the_words_only(dh) -> None:
    a, b = _tick("kept, as decided at round 3", "short"), _tick("lease renewed; queue place 4: ...", "long why")
    assert dh.tick_bytes(a) != dh.tick_bytes(b)  # the full hash sees the words
    assert dh.tick_bytes(a, details=False) == dh.tick_bytes(b, details=False)
    for other in (_tick("x", "short", nodes=("n2",)), _tick("x", "short", signal="TERM")):
        assert dh.tick_bytes(other, details=False) != dh.tick_bytes(a, details=False)  # decisions still count


def test_held_comment_keeps_its_round(dh) -> None:
    act = Action(ActionKind.ANNOTATE, 7, admin_comment="h=1 || slurmplan: held (moved) | round 12 | why; more")
    assert dh.bare_action(act).admin_comment == "h=1 || slurmplan: held (moved) | round 12 | "
    plain = Action(ActionKind.ANNOTATE, 7, admin_comment="h=1 || slurmplan: a100x4 | since round 2")
    assert dh.bare_action(plain).admin_comment == plain.admin_comment  # a running decision has no why to cut


def test_allocation_is_hashed_with_or_without_details(dh) -> None:
    @dataclasses.dataclass
    class _Alloc:
        job_ids: tuple
        x: np.ndarray

    a, b = _tick("d", "w"), _tick("d", "w")
    a.allocation, b.allocation = _Alloc((1,), np.array([[1.0]])), _Alloc((1,), np.array([[0.5]]))
    assert dh.tick_bytes(a, details=False) != dh.tick_bytes(b, details=False)
