"""Actions for a pending job: the UPDATE is skipped only when both its configuration and its pin are known.

Regression (77d0d8b): a pending job whose comment already named its Cell and plan was not updated again, so a
job re-decided onto other nodes of the same Cell kept its old ``ReqNodeList`` (a pending job shows no nodes in
Slurm). It then waited for, or started on, nodes the round had given to another job, and was moved again next
round: on the LLM trace crius went from 1.25 to 9.98 restarts per job once 85ff4ba also cleared ``sent`` on
every requeue. The pin is known from the start key the daemon last sent (``JobState.sent``, journaled).
"""

from __future__ import annotations

from mechanism.helpers import T0, MiniCluster, cluster, mjob
from slurmplan.domain import ActionKind, Assignment, Cell, JobState, Plan, Reason
from slurmplan.formats import decision_text
from slurmplan.mechanism.actions import RoundStamp, job_actions
from slurmplan.tick_types import JobState as SchedState
from slurmplan.tick_types import TickConfig

A100 = Cell("a100", 1)
TABLE = {"a100": {1: 10.0}}


def scheduled(job_id: int, node: str) -> Assignment:
    return Assignment(job_id, Reason.SCHEDULED, cell=A100, plan=Plan(dp=1), nodes=(node,), gpus_per_node=1)


def kinds(acts) -> list[ActionKind]:
    return [a.kind for a in acts]


def test_a_waiting_job_redecided_onto_other_nodes_of_its_cell_is_pinned_again_and_starts_there() -> None:
    """Through the simulator's Slurm: job 2 is pinned to a100-0 (busy), re-decided onto a100-1 next round."""
    mini = MiniCluster(
        cluster(a100=(2, 1)), [mjob(1, TABLE, state=JobState.RUNNING, nodes=("a100-0",)), mjob(2, TABLE)]
    )
    config = TickConfig()
    acts, st = job_actions(mini.jobs[2], scheduled(2, "a100-0"), SchedState(), T0, RoundStamp(1), config)
    assert kinds(acts) == [ActionKind.UPDATE, ActionKind.RELEASE]
    mini.apply(tuple(acts), T0)
    job = mini.jobs[2].job
    assert job.state is JobState.PENDING and not job.held and job.nodes == ()  # waits for a100-0
    assert st.sent.endswith(" @ a100-0")  # the pin it was sent, journaled with the state

    acts, st = job_actions(mini.jobs[2], scheduled(2, "a100-1"), st, T0 + 360, RoundStamp(2), config)
    assert kinds(acts) == [ActionKind.UPDATE]  # on main: [] (same Cell and plan), left pinned to a100-0
    assert acts[0].nodelist == ("a100-1",)
    mini.apply(tuple(acts), T0 + 360)
    job = mini.jobs[2].job
    assert job.state is JobState.RUNNING and job.nodes == ("a100-1",)
    assert st.sent.endswith(" @ a100-1")


def test_a_pending_job_already_pinned_as_decided_is_not_updated_again_in_a_later_round() -> None:
    """What 77d0d8b was for: the same configuration and nodes, decided again in a new round, send nothing."""
    mj = mjob(2, TABLE, held=False, admin_comment=decision_text(A100, Plan(dp=1), 1))
    st = SchedState(sent=f"start {mj.job.admin_comment} @ a100-0")
    for r in (2, 3):
        acts, st = job_actions(mj, scheduled(2, "a100-0"), st, T0 + 360 * r, RoundStamp(r), TickConfig())
        assert acts == []


def test_a_job_requeued_from_under_its_decision_is_pinned_and_started_again() -> None:
    """A requeue clears ``sent`` (85ff4ba): the pin is then unknown, so the restart carries it (one UPDATE)."""
    comment = decision_text(A100, Plan(dp=1), 1)
    mj = mjob(2, TABLE, held=True, admin_comment=comment)
    st = SchedState(sent="", ran_on=("a100-0",))
    acts, st = job_actions(mj, scheduled(2, "a100-1"), st, T0 + 400, RoundStamp(2), TickConfig())
    assert kinds(acts) == [ActionKind.UPDATE, ActionKind.RELEASE]
    assert acts[0].nodelist == ("a100-1",) and acts[1].previous_nodes == ("a100-0",)
    assert st.sent.endswith(" @ a100-1")


def test_a_kept_job_whose_comment_an_admin_overwrote_is_annotated_again_after_ticks_that_sent_nothing() -> None:
    """``_annotate`` remembers, per job, the comment, Cell and plan it found to agree (issue 27: a kept job asks
    every tick). The memo must answer only for those very objects: once the comment is overwritten, the decision
    is written again, and with the memo emptied the same ticks send the same actions."""
    from slurmplan.mechanism import actions as mech_actions

    plan = Plan(dp=1)
    written = decision_text(A100, plan, 1)
    kept = Assignment(2, Reason.KEPT, cell=A100, plan=plan, nodes=("a100-0",), gpus_per_node=1)
    config = TickConfig()

    def tick(comment: str, forget: bool) -> list[ActionKind]:
        if forget:
            mech_actions._kept_as_written.clear()
        mj = mjob(2, TABLE, state=JobState.RUNNING, nodes=("a100-0",), held=False, admin_comment=comment)
        return kinds(job_actions(mj, kept, SchedState(), T0, RoundStamp(3), config)[0])

    for forget in (False, True):
        assert tick(written, forget) == [] and tick(written, forget) == []  # agrees: nothing sent, twice
        assert tick("my own note", forget) == [ActionKind.ANNOTATE]  # overwritten: written again
        assert tick(written, forget) == []
