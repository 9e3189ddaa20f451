"""``protect_pushed`` (issue 23, fifteenth session): a running job that another job's change pushed off its GPUs
less than ``hold_s`` ago is pushed again only by a change that pays for both restarts ("a job moved for another job is
not moved back within a hold time unless the gain pays for both moves"). Without it the guard prices a move by the
mover's gain alone, and the job it pushes off moves to slower GPUs unpriced; on held-out LLM traces such cascades
made 48 of 123 restarts (u-llm-wide 20/401)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy import load_policy
from slurmplan.policy.flagship_moves import _shield, guard_moves
from slurmplan.policy.flagship_params import PARAMS
from slurmplan.policy.greedy import Packing

H100, A100, V100 = 0, 1, 2  # one GPU of each type, one column each
COST = 82.0


def three_types(attained_0: float) -> AllocationProblem:
    """Job 0 runs on the V100 (``attained_0`` s so far, as long again expected), job 1 on the H100 (2 h so far),
    job 2 waits. The H100 runs every job 5x as fast as the V100, the A100 2.5x."""
    return AllocationProblem(
        job_ids=("a", "b", "c"),
        cells=(Cell("h100", 1), Cell("a100", 1), Cell("v100", 1)),
        throughput=np.array([[10.0, 4.0, 2.0]] * 3),
        capacity={"h100": 1, "a100": 1, "v100": 1},
        steps_remaining=np.ones(3),
        steps_known=np.zeros(3, bool),
        attained_time=np.array([attained_0, 7200.0, 0.0]),
        current=np.array([V100, H100, -1]),
        restart_cost_s=np.full(3, COST),
        submit_time=np.zeros(3),
        time_since_start=np.array([attained_0, 7200.0, 60.0]),
    )


def round_moves_job_0_onto_the_h100(problem: AllocationProblem) -> Packing:
    """The round's packing: job 0 takes the H100, job 1 is pushed onto the A100, job 2 starts on the V100."""
    pack = Packing.empty(problem)
    for k, c in ((0, H100), (1, A100), (2, V100)):
        pack.assign(k, c)
    return pack


def guard(problem: AllocationProblem, shielded: np.ndarray | None) -> tuple[list[int], object]:
    pack = round_moves_job_0_onto_the_h100(problem)
    queue = SimpleNamespace(order=np.array([0, 2, 1]), due=np.zeros(3))
    est = np.array([float(problem.attained_time[0]), 7200.0, 600.0])
    moves = guard_moves(
        problem, pack, queue, est, np.zeros(3, bool), 1.0, 0.0, lambda k, f: [A100, V100, H100], True, shielded
    )
    return pack.col.tolist(), moves


def test_without_the_rule_a_move_that_pays_its_own_restart_pushes_the_other_job_off_unpriced() -> None:
    """Job 0, 60 s left, gains 60 x (1 - 2/10) = 48 s and saves job 2 60 s of waiting: 108 s > its 82-s restart."""
    cols, moves = guard(three_types(60.0), None)
    assert cols == [H100, A100, V100]
    assert 0 in moves.kept and 1 in moves.unpriced
    cols, _ = guard(three_types(60.0), np.zeros(3, bool))  # the rule on, but job 1 was not pushed recently
    assert cols == [H100, A100, V100]


def test_a_job_pushed_within_the_hold_time_is_pushed_again_only_by_a_change_that_pays_both_restarts() -> None:
    cols, moves = guard(three_types(60.0), np.array([False, True, False]))
    assert cols == [V100, H100, A100]  # 108 s < 82 + 82 s: undone, job 1 keeps the H100, job 2 takes the A100
    assert (
        0 in moves.undone
        and "does not pay the 3 min a restart costs, its own and those of jobs pushed" in moves.undone[0]
    )
    cols, moves = guard(three_types(150.0), np.array([False, True, False]))  # 270 s gained: pays for both
    assert cols == [H100, A100, V100] and 0 in moves.kept


def test_the_shield_counts_only_the_shielded_jobs_pushed_off_the_new_columns_type() -> None:
    p = three_types(60.0)
    pack = round_moves_job_0_onto_the_h100(p)
    trial = pack.copy()
    trial.release(0)
    trial.release(2)  # room made in job 0's old column: job 2 pushed out
    order = np.array([0, 2, 1])
    cost = p.restart_cost_s
    back, both = _shield(trial, pack, 0, V100, H100, order, p.current, cost, np.array([False, True, False]))
    assert both == COST and back.col.tolist() == [V100, H100, -1]
    back, both = _shield(trial, pack, 0, V100, H100, order, p.current, cost, np.zeros(3, bool))
    assert both == 0.0 and back.col.tolist() == [V100, A100, -1]
    back, both = _shield(trial, pack, 0, V100, -1, order, p.current, cost, np.array([False, True, False]))
    assert both == 0.0  # job 0 stopped: it takes no one's GPUs


def test_the_policy_remembers_only_pushes_by_other_jobs_and_shields_them_for_hold_s() -> None:
    pol = load_policy("slurmplan")
    pol.params = {**pol.params, "protect_pushed": True, "hold_s": 3600.0}
    p = three_types(60.0)  # the round at t = 7200 s: jobs 0 and 1 submitted at 0, job 2 a minute ago
    p = AllocationProblem(
        **{
            **p.__dict__,
            "submit_time": np.array([0.0, 0.0, 7140.0]),
            "time_since_start": np.array([7200.0] * 2 + [60.0]),
        }
    )
    pack = round_moves_job_0_onto_the_h100(p)
    running = np.array([True, True, False])
    pol._remember_pushed(p, pack, running, SimpleNamespace(unpriced={1: "pushed"}))
    assert pol._pushed == {"b": 7200.0}
    assert pol._shielded(p, running).tolist() == [False, True, False]
    later = AllocationProblem(**{**p.__dict__, "time_since_start": p.time_since_start + 3599.0})
    assert pol._shielded(later, running).tolist() == [False, True, False]
    past = AllocationProblem(**{**p.__dict__, "time_since_start": p.time_since_start + 3601.0})
    assert pol._shielded(past, running).tolist() == [False, False, False]  # past hold_s
    pol._remember_pushed(p, pack, running, SimpleNamespace(unpriced={}))  # its own change this time
    assert pol._pushed == {}


def test_the_parameter_is_off_by_default_and_on_in_the_preset() -> None:
    assert PARAMS["protect_pushed"].default is False
    assert load_policy("slurmplan").params["protect_pushed"] is True  # the preset sets it (fifteenth session)
    off = load_policy("slurmplan")
    off.params = {**off.params, "protect_pushed": False}
    assert off._shielded(three_types(60.0), np.ones(3, bool)) is None
