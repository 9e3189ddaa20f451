"""The tick's hand-built values (frozen dataclasses filled without their ``__init__``, for speed) equal what the
dataclass's own constructor gives, field for field; a field added to one of them fails here first."""

from __future__ import annotations

from dataclasses import fields, replace

from slurmplan.domain import Assignment, Candidate, Cell, Hints, Job, JobState, Node, NodeState, Reason
from slurmplan.mechanism.engine import _assignment
from slurmplan.pipeline import _managed_job
from slurmplan.sim.backend import _with_used
from slurmplan.tick_types import ManagedJob


def test_an_assignment_built_by_hand_is_the_dataclasss_own() -> None:
    values = (7, Reason.KEPT, Cell("a100", 4), None, ("n1", "n2"), 2, 12.5, 3.25, 0.5, "lease renewed")
    assert len(values) == len(fields(Assignment))
    got, want = _assignment(*values), Assignment(*values)
    assert got == want and repr(got) == repr(want) and got.__dict__ == want.__dict__
    assert hash(got) == hash(want)


def test_a_waiting_rows_assignment_is_the_dataclasss_own() -> None:
    """``assign``'s waiting rows pass every field to ``_assignment``: the defaults they stand for are the field's."""
    got = _assignment(7, Reason.WAITING, None, None, (), 0, 0.0, 2.5, 0.25, "outranked")
    want = Assignment(7, Reason.WAITING, priority=2.5, share=0.25, detail="outranked")
    assert got == want and repr(got) == repr(want) and got.__dict__ == want.__dict__


def test_a_managed_job_built_by_hand_is_the_dataclasss_own() -> None:
    job = Job(job_id=3, name="j", state=JobState.RUNNING, gpu_type="a100", gpus_per_node=2, node_count=1)
    values = (job, Hints(), (Candidate(Cell("a100", 2), 10.0),), 41.0)
    assert len(values) == len(fields(ManagedJob))
    got, want = _managed_job(*values), ManagedJob(*values)
    assert got == want and got.__dict__ == want.__dict__


def test_a_node_with_new_usage_is_replaces_answer() -> None:
    node = Node("n1", NodeState.IDLE, "a100", 8, gpus_used=2, cpus=64, memory_mb=1000, features=("x",))
    got, want = _with_used(node, 6), replace(node, gpus_used=6)
    assert got == want and got.__dict__ == want.__dict__
    assert node.gpus_used == 2  # the original is untouched
