"""A ``HighsModel`` built on a solver an earlier model gave back (``highs._Spare``, issue 27, twenty-second session)
solves exactly as one built on a new ``Highs``: the same solutions, duals, bases and simplex iteration counts.

The LPs are degenerate on purpose (small integer coefficients, many ties), solved twice each as ``max_min`` does
(a solve, then a new objective re-solved warm), some started from an alien basis as ``las_warm`` starts them.
Fresh: every model is kept alive, so none gives its solver back and each builds a new one. Reused: each model is
dropped after its LP, so the next takes its solver.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from slurmplan.policy import highs
from slurmplan.policy.highs import BASIC, LOWER, HighsModel


def _lps(count: int = 24, seed: int = 3) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        m, n = 12 + k % 7, 20 + 3 * (k % 5)
        a = rng.integers(0, 3, size=(m, n)).astype(float)
        a[rng.random((m, n)) < 0.5] = 0.0
        b = rng.integers(1, 4, size=m).astype(float)
        c = -rng.integers(1, 3, size=n).astype(float)  # ties everywhere: many optimal vertices
        out.append((c, sp.csr_matrix(a), b, np.zeros(n), np.ones(n), -rng.integers(0, 4, size=n).astype(float)))
    return out


def _solve(lp: tuple, k: int) -> tuple[HighsModel, list]:
    c, a, b, lo, hi, cost = lp
    model = HighsModel(c, a, b, lo, hi)
    if k % 3 == 1:  # an alien start, as ``las_warm`` gives: every column at its lower bound, every row basic
        model.start_from(np.full(len(c), LOWER, dtype=np.int8), np.full(a.shape[0], BASIC, dtype=np.int8))
    seen = []
    for step in range(2):
        if step == 1:
            model.set_cost(cost)
        res = model.run()
        info = model._h.getInfo()
        cols, rows = model.basis(res.x) if res.ok else (np.zeros(0), np.zeros(0))
        seen.append(
            (res.ok, res.x.tobytes(), None if res.duals_ub is None else res.duals_ub.tobytes(), res.objective,
             info.simplex_iteration_count, cols.tobytes(), rows.tobytes())
        )  # fmt: skip
    return model, seen


def test_a_reused_solver_solves_as_a_new_one() -> None:
    lps = _lps()
    highs._spare.highs = None
    kept, fresh = [], []
    for k, lp in enumerate(lps):
        model, seen = _solve(lp, k)
        kept.append(model)  # alive: its solver is not given back
        fresh.append(seen)
    assert highs._spare.highs is None
    reused, solvers = [], set()
    for k, lp in enumerate(lps):
        model, seen = _solve(lp, k)
        solvers.add(id(model._h))
        reused.append(seen)
        del model  # gives its solver back for the next LP
    assert len(solvers) == 1  # every LP after the first ran on the first one's solver
    assert reused == fresh
    assert any(seen[0][4] > 0 and seen[1][4] > 0 for seen in fresh)  # simplex ran in both solves
    del kept
