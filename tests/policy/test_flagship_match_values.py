"""The matching LP's values computed as arrays equal the one-pair-at-a-time code, on a real run's rounds.

``flagship_match._match_values`` reads each chosen job's speeds as one Python list and computes the values of
all its (job, column) pairs as one array expression (issue 27: it was one numpy scalar read and one expression
per pair). The plain loop below is the code before that change; both must give the same pairs in the same order
and the same floats, bit for bit, at every round the flagship matches types in the first hours of a trace.
"""

from __future__ import annotations

import numpy as np

from slurmplan.policy import flagship_match
from slurmplan.policy.flagship import Slurmplan
from tests.mechanism.helpers import crius_llm_simulation


def _plain_values(problem, pack, chosen, floors, est, guard, blocked, params, choices, allowed):
    thr = np.asarray(problem.throughput, dtype=float)
    best = thr.max(axis=1)
    age = problem.column("time_since_start")
    left = np.maximum(np.minimum(est, 1e12), flagship_match.PRIOR_FLOOR_S)
    weight = 1.0 + (params["stretch_weight"] * age + params["short_bias_s"]) / left
    weight = np.where(guard > 0, 1e3 * weight.max(initial=1.0) * weight, weight)
    rows, cols, vals = [], [], []
    for j in chosen.tolist():
        size = problem.cells[pack.col[j]].gpus
        floor = floors[j] if thr[j, pack.col[j]] >= floors[j] else 0.0
        here = pack.cell_type[pack.col[j]]
        for c in choices(j, floors[j]):
            if allowed is not None and not allowed[j, c]:
                continue
            if pack.cell_type[c] >= 0 and blocked[pack.cell_type[c]] and pack.cell_type[c] != here:
                continue
            if problem.cells[c].gpus == size and pack.cell_type[c] >= 0 and thr[j, c] >= floor:
                rows.append(j)
                cols.append(c)
                on = problem.current is not None and problem.current[j] == c
                vals.append((thr[j, c] / best[j] + (params["stay_bonus"] if on else 0.0)) * weight[j])
                vals[-1] += 1e-3 if on else 0.0
    return rows, cols, vals


def test_array_values_equal_the_plain_loop_on_a_real_run(monkeypatch) -> None:
    seen = {"calls": 0, "pairs": 0, "staying": 0, "floored": 0, "allowed": 0, "blocked": 0}
    fast = flagship_match._match_values

    def compare(problem, pack, chosen, floors, est, guard, blocked, params, allowed):
        rows, cols, vals = fast(problem, pack, chosen, floors, est, guard, blocked, params, allowed)
        choices = lambda j, floor: Slurmplan._choices(problem, j, floor)  # noqa: E731
        args = (floors, est, guard, blocked, params, choices, allowed)
        ref_rows, ref_cols, ref_vals = _plain_values(problem, pack, chosen, *args)
        assert rows.tolist() == ref_rows and cols.tolist() == ref_cols
        assert np.asarray(vals).tobytes() == np.array(ref_vals, dtype=float).tobytes()
        return rows, cols, vals

    def checked(problem, pack, chosen, floors, est, guard, blocked, params, allowed):
        rows, cols, vals = compare(problem, pack, chosen, floors, est, guard, blocked, params, allowed)
        # the same round with what the run seldom has: each GPU type reserved in turn, and floors (an SLA's at half
        # a job's best speed, some above its own column's, and a catch-up's, infinite) on every other job
        for t in range(blocked.size):
            reserved = np.zeros(blocked.size, dtype=bool)
            reserved[t] = True
            compare(problem, pack, chosen, floors, est, guard, reserved, params, allowed)
        thr = np.asarray(problem.throughput, dtype=float)
        sla = np.where(np.arange(problem.num_jobs) % 2 == 0, thr.max(axis=1) / 2, 0.0)
        compare(problem, pack, chosen, sla, est, guard, blocked, params, allowed)
        compare(problem, pack, chosen, np.where(sla > 0, np.inf, 0.0), est, guard, blocked, params, None)
        seen["calls"] += 1
        seen["pairs"] += len(rows)
        seen["floored"] += int((np.asarray(floors)[chosen] > 0).sum())
        seen["allowed"] += allowed is not None
        seen["blocked"] += bool(np.asarray(blocked).any())
        if problem.current is not None:
            seen["staying"] += sum(int(problem.current[j] == c) for j, c in zip(rows, cols, strict=True))
        return rows, cols, vals

    monkeypatch.setattr(flagship_match, "_match_values", checked)
    crius_llm_simulation("slurmplan", num_jobs=400, rate_per_h=800.0, hours=1.5).run()
    assert seen["calls"] > 10 and seen["pairs"] > 100, seen
    assert 0 < seen["staying"] < seen["pairs"], seen  # both the staying bonus and moves were compared
    assert seen["floored"] > 0 and seen["allowed"] > 0, seen  # guaranteed jobs' floors and priced moves were in play
