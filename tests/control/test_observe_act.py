"""Classification of jobs, and the shaping of actions before they reach Slurm (pure functions)."""

from __future__ import annotations

from dataclasses import replace

from slurmplan.control.observe import bad_hint_annotation, classify, keep_user_hints
from slurmplan.domain import Action, ActionKind, Cluster, Hints, Job, JobState, Node, NodeState
from slurmplan.formats import BAD_HINTS_PREFIX
from slurmplan.pipeline import drop_no_ops, untyped_update, with_node_gpu_type, with_request

CLUSTER = Cluster((Node("a1", NodeState.MIXED, "a100", 4), Node("v1", NodeState.IDLE, "v100", 4)))


def test_classify_sources_and_opt_out() -> None:
    assert classify(Job(1, admin_comment="slurmplan:gpus=2"), ()).hints == Hints(gpus=2)
    assert classify(Job(2, comment="slurmplan:model=gpt2"), ()).hints == Hints(model="gpt2")
    assert classify(Job(3, partition="gpu,debug"), ("debug",)).hints == Hints()
    assert not classify(Job(4, partition="gpu"), ("debug",)).managed
    assert not classify(Job(5, comment="slurmplan:managed=no", partition="debug"), ("debug",)).managed
    bad = classify(Job(6, admin_comment="slurmplan:gpus=0"), ())
    assert not bad.managed and "gpus" in bad.error
    # the daemon's own decision in the admin comment is not a hint; the user's --comment still is
    ours = classify(Job(7, comment="slurmplan:gpus=1", admin_comment="slurmplan: a100x1 dp1 tp1 pp1 mb1 ga1"), ())
    assert ours.hints == Hints(gpus=1)


def test_bad_hint_annotation_keeps_user_text_and_is_written_once() -> None:
    ob = classify(Job(6, admin_comment="slurmplan:gpus=0"), ())
    action = bad_hint_annotation(ob)
    assert action is not None and action.kind is ActionKind.ANNOTATE
    assert action.admin_comment is not None
    assert action.admin_comment.startswith(f"slurmplan:gpus=0 || {BAD_HINTS_PREFIX}")
    again = classify(Job(6, admin_comment=action.admin_comment), ())
    assert again.error == ob.error and bad_hint_annotation(again) is None


def test_bad_hint_annotation_of_a_comment_hint_is_written_once_and_replaced_when_the_error_changes() -> None:
    """Hints in ``--comment``, admin comment empty: the annotation is the decision alone. Before, that text read as
    neither hints nor decision, so the same ANNOTATE went to Slurm on every tick."""
    ob = classify(Job(8, comment="slurmplan:gpus=0"), ())
    first = bad_hint_annotation(ob)
    assert first is not None and first.admin_comment == f"{BAD_HINTS_PREFIX} {ob.error}"
    shown = Job(8, comment="slurmplan:gpus=0", admin_comment=first.admin_comment)
    assert bad_hint_annotation(classify(shown, ())) is None
    changed = classify(replace(shown, comment="slurmplan:gpus=2;max=1"), ())
    second = bad_hint_annotation(changed)
    assert second is not None and second.admin_comment == f"{BAD_HINTS_PREFIX} {changed.error}"  # replaced
    # an admin's own text before it is kept, as with_decision keeps it for every decision
    noted = classify(Job(9, comment="slurmplan:gpus=0", admin_comment="ticket 42"), ())
    assert bad_hint_annotation(noted).admin_comment == f"ticket 42 || {BAD_HINTS_PREFIX} {noted.error}"


def test_request_fills_hints_and_typed_pending_request_restricts_types() -> None:
    untyped = Job(1, gpus_per_node=2, node_count=2)
    assert with_request(Hints(model="m"), untyped) == Hints(model="m", gpus=4)
    typed = Job(2, gpu_type="t4", gpus_per_node=1)
    assert with_request(Hints(model="m", gpus=1), typed).gpu_types == ("t4",)
    assert with_request(Hints(min_gpus=2, max_gpus=3), Job(3, gpus_per_node=8)).gpus == 3


def test_constraint_type_is_a_preference_unless_the_hints_name_types() -> None:
    """``--gres=gpu:2 --constraint=t4`` reads as t4 preferred: no restriction; ``types=`` in the hints still rules."""
    preferred = Job(1, gpu_type="t4", gpus_per_node=2, gpu_type_preferred=True)
    assert with_request(Hints(model="m", gpus=2), preferred).gpu_types == ()
    assert with_request(Hints(model="m", gpus=2, gpu_types=("t4",)), preferred).gpu_types == ("t4",)
    typed = Job(2, gpu_type="t4", gpus_per_node=2)  # --gres=gpu:t4:2: Slurm cannot move it
    assert with_request(Hints(model="m", gpus=2), typed).gpu_types == ("t4",)
    # the update keeps the type: the Slurm backend writes it as Features=, the request stays untyped
    update = Action(ActionKind.UPDATE, 1, gpu_type="a100", gpus_per_node=2, nodelist=("a1",))
    assert untyped_update(update, preferred).gpu_type == "a100"


def test_running_untyped_job_gets_its_nodes_type() -> None:
    running = Job(1, state=JobState.RUNNING, gpus_per_node=2, nodes=("a1",))
    assert with_node_gpu_type(running, CLUSTER).gpu_type == "a100"
    assert with_node_gpu_type(running, CLUSTER).gpu_type_preferred  # still an untyped request
    pending = Job(2, gpus_per_node=2)
    assert with_node_gpu_type(pending, CLUSTER).gpu_type is None
    mixed = Job(3, state=JobState.RUNNING, gpus_per_node=2, node_count=2, nodes=("a1", "v1"))
    assert with_node_gpu_type(mixed, CLUSTER).gpu_type is None


def test_update_of_untyped_request_stays_untyped() -> None:
    update = Action(ActionKind.UPDATE, 1, "a100", 2, 1, ("a1",))
    assert untyped_update(update, Job(1, gpus_per_node=1)).gpu_type is None
    assert untyped_update(update, Job(1, gpu_type="a100", gpus_per_node=1)).gpu_type == "a100"


def test_user_hints_survive_a_decision_only_comment() -> None:
    job = Job(1, admin_comment="slurmplan:model=gpt2;gpus=2 || slurmplan: v100x2 dp2 tp1 pp1 mb1 ga1")
    a = keep_user_hints(Action(ActionKind.ANNOTATE, 1, admin_comment="slurmplan: a100x2 dp2 tp1 pp1 mb1 ga1"), job)
    assert a.admin_comment == "slurmplan:model=gpt2;gpus=2 || slurmplan: a100x2 dp2 tp1 pp1 mb1 ga1"


def test_no_ops_dropped_in_batch_order() -> None:
    held = Job(1, held=True, admin_comment="x")
    free = Job(2, held=False)
    actions = [
        Action(ActionKind.HOLD, 1),  # already held: dropped
        Action(ActionKind.ANNOTATE, 1, admin_comment="x"),  # already shows: dropped
        Action(ActionKind.RELEASE, 1),
        Action(ActionKind.RELEASE, 2),  # pending and not held: dropped
        Action(ActionKind.HOLD, 2),
        Action(ActionKind.RELEASE, 2),  # kept: the HOLD before it changes the state
    ]
    kept = drop_no_ops(actions, {1: held, 2: free})
    assert [(a.kind, a.job_id) for a in kept] == [
        (ActionKind.RELEASE, 1),
        (ActionKind.HOLD, 2),
        (ActionKind.RELEASE, 2),
    ]


def test_squeue_constraint_reads_as_a_preferred_type_gres_type_as_typed() -> None:
    """``job_from_json``: ``--gres=gpu:2 --constraint=t4`` is t4 preferred; ``--gres=gpu:t4:1`` is t4 typed."""
    import json
    from pathlib import Path

    from slurmplan.slurm.backend import snapshot_from_json

    data = Path(__file__).parents[1] / "slurm" / "data"
    sinfo = json.loads((data / "sinfo_22.05.json").read_text())
    squeue = json.loads((data / "squeue_22.05.json").read_text())
    squeue["jobs"][0].update(tres_per_node="gres:gpu:2", features="t4")
    jobs = {j.job_id: j for j in snapshot_from_json(sinfo, squeue, now=0.0).jobs}
    assert (jobs[1].gpu_type, jobs[1].gpus_per_node, jobs[1].gpu_type_preferred) == ("t4", 2, True)
    assert (jobs[3].gpu_type, jobs[3].gpu_type_preferred) == ("t4", False)
    assert with_request(Hints(model="m"), jobs[1]).gpu_types == ()
    assert with_request(Hints(model="m"), replace(jobs[3], state=JobState.PENDING)).gpu_types == ("t4",)
