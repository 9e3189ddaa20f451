"""``stop_gang`` (issue 23, thirteenth/fourteenth sessions): the own delay the guard prices for a stopped job runs
until enough of the jobs that took its GPUs have ended for it to fit again, not until the first of them ends. A
4-GPU job whose node three newcomers split cannot restart on one freed GPU; a one-GPU job can."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from slurmplan.domain import AllocationProblem, Cell
from slurmplan.policy import load_policy
from slurmplan.policy.flagship_moves import _gpus_back_s, guard_moves
from slurmplan.policy.flagship_params import PARAMS
from slurmplan.policy.greedy import Packing

ONE, TWO, FOUR = 0, 1, 2  # columns: a100 x1, x2, x4


def a100_problem(gpus: int, col: int, newcomers: int) -> AllocationProblem:
    """``gpus`` A100s; job 0 ran in column ``col`` for 20 min (as long again expected), then ``newcomers`` arrived;
    every job of unknown length."""
    n = 1 + newcomers
    running = [True] + [False] * newcomers
    thr = np.array([[10.0, 18.0, 32.0]] * n)
    return AllocationProblem(
        job_ids=tuple(range(n)),
        cells=(Cell("a100", 1), Cell("a100", 2), Cell("a100", 4)),
        throughput=thr,
        capacity={"a100": gpus},
        steps_remaining=np.ones(n),
        steps_known=np.zeros(n, bool),
        attained_time=np.array([1200.0 if r else 0.0 for r in running]),
        current=np.array([col] + [-1] * newcomers),
        restart_cost_s=np.full(n, 183.0),
        submit_time=np.zeros(n),
        time_since_start=np.array([1200.0 if r else 60.0 for r in running]),
    )


def newcomers_on_its_gpus(problem: AllocationProblem, cols: dict[int, int]) -> tuple[Packing, Packing]:
    """(the round's packing: job 0 stopped, the newcomers at ``cols``; the guard's trial: all of them released)."""
    pack = Packing.empty(problem)
    for k, c in cols.items():
        pack.assign(k, c)
    return pack, Packing.empty(problem)


def test_a_gang_jobs_own_delay_runs_until_all_the_jobs_that_split_its_gpus_end() -> None:
    # a 4-GPU job stopped for three newcomers (2, 1 and 1 GPUs) expected to end in 10, 20 and 60 min
    p = a100_problem(4, FOUR, 3)
    pack, trial = newcomers_on_its_gpus(p, {1: TWO, 2: ONE, 3: ONE})
    est = np.array([1200.0, 600.0, 1200.0, 3600.0])
    assert _gpus_back_s(trial, pack, 0, FOUR, [1, 2, 3], est) == 3600.0  # not 600: it needs all four GPUs
    # five A100s, all taken by jobs of 2, 2 and 1 GPUs ending in 10, 20 and 60 min: four are free after 20 min
    p = a100_problem(5, FOUR, 3)
    pack, trial = newcomers_on_its_gpus(p, {1: TWO, 2: TWO, 3: ONE})
    assert _gpus_back_s(trial, pack, 0, FOUR, [1, 2, 3], est) == 1200.0


def test_a_one_gpu_jobs_own_delay_runs_until_the_first_of_them_ends() -> None:
    p = a100_problem(2, ONE, 2)
    pack, trial = newcomers_on_its_gpus(p, {1: ONE, 2: ONE})
    est = np.array([1200.0, 600.0, 3600.0])
    assert _gpus_back_s(trial, pack, 0, ONE, [1, 2], est) == 600.0


def test_with_stop_gang_the_guard_undoes_a_gang_jobs_stop_that_pays_only_until_the_first_newcomer_ends() -> None:
    """20 min left for the 4-GPU job; the three newcomers each save 20 min of waiting (60 min), and the stop costs
    it 10 min until the first ends (pays) or 60 min until all have (does not pay, 0 min against a 3 min restart)."""
    p = a100_problem(4, FOUR, 3)
    est = np.array([1200.0, 600.0, 1200.0, 3600.0])
    queue = SimpleNamespace(order=np.array([1, 2, 3, 0]), due=np.zeros(4))
    results = {}
    for gang in (False, True):
        pack, _ = newcomers_on_its_gpus(p, {1: TWO, 2: ONE, 3: ONE})
        moves = guard_moves(p, pack, queue, est, np.zeros(4, bool), 1.0, 360.0, lambda k, f: [ONE, TWO], gang)
        results[gang] = (pack.col.tolist(), moves)
    cols, moves = results[False]
    assert cols == [-1, TWO, ONE, ONE] and "-10 min for itself" in moves.kept[0]
    cols, moves = results[True]
    assert cols == [FOUR, -1, -1, -1] and "-60 min for itself" in moves.undone[0]


def test_stop_gang_leaves_a_one_gpu_jobs_stop_as_it_was_and_is_in_the_preset_off_by_default() -> None:
    p = a100_problem(1, ONE, 1)
    est = np.array([1200.0, 600.0])
    queue = SimpleNamespace(order=np.array([1, 0]), due=np.zeros(2))
    notes = []
    for gang in (False, True):
        pack, _ = newcomers_on_its_gpus(p, {1: ONE})
        moves = guard_moves(p, pack, queue, est, np.zeros(2, bool), 1.0, 360.0, lambda k, f: [ONE], gang)
        assert pack.col.tolist() == [-1, ONE]
        notes.append(moves.kept[0])
    assert notes[0] == notes[1] and "-10 min for itself" in notes[0]
    assert load_policy("slurmplan").params["stop_gang"] is True  # fourteenth session, sim/RESULTS.md section 7
    assert PARAMS["stop_gang"].default is False
