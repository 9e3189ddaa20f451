"""HighsModel passes the LP through HiGHS's array calls; it must be the very LP a HighsLp with the same arrays is."""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from slurmplan.policy.highs import REFERENCE, HighsModel


def _random_lp(seed: int) -> tuple[np.ndarray, sp.csc_matrix, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, m = 60, 25
    a = sp.random(m, n, density=0.15, random_state=seed, format="csc")
    c = -rng.random(n)
    lo = np.where(rng.random(n) < 0.2, -np.inf, 0.0)
    hi = np.where(rng.random(n) < 0.2, np.inf, rng.random(n) + 0.5)
    return c, a, rng.random(m) + 1.0, lo, np.maximum(hi, lo + 0.1)


def _through_highs_lp(c, a, b, lo, hi) -> highspy.Highs:
    """The old way (before the twelfth session): every vector set on a HighsLp."""
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(c), a.shape[0]
    lp.col_cost_ = c
    lp.col_lower_ = np.where(np.isfinite(lo), lo, -highspy.kHighsInf)
    lp.col_upper_ = np.where(np.isfinite(hi), hi, highspy.kHighsInf)
    lp.row_lower_ = np.full(a.shape[0], -highspy.kHighsInf)
    lp.row_upper_ = b
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    return h


def test_the_model_is_the_lp_a_highs_lp_with_the_same_arrays_gives() -> None:
    for seed in range(3):
        c, a, b, lo, hi = _random_lp(seed)
        got = HighsModel(c, a, b, lo, hi, REFERENCE)._h.getLp()
        want = _through_highs_lp(c, a, b, lo, hi).getLp()
        assert (got.num_col_, got.num_row_) == (want.num_col_, want.num_row_)
        for name in ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        assert got.a_matrix_.format_ == highspy.MatrixFormat.kColwise
        for name in ("start_", "index_", "value_"):
            assert np.array_equal(getattr(got.a_matrix_, name), getattr(want.a_matrix_, name)), name
        assert len(got.integrality_) == 0  # an LP, not a MIP with continuous columns


def test_it_solves_to_the_same_vertex_and_duals() -> None:
    for seed in range(3):
        c, a, b, lo, hi = _random_lp(seed)
        lo = np.zeros_like(lo)  # bounded below: an optimum exists
        res = HighsModel(c, a, b, lo, hi, REFERENCE).run()
        old = _through_highs_lp(c, a, b, lo, hi)
        old.setOptionValue("solver", "simplex")
        old.run()
        assert res.ok
        assert np.array_equal(res.x, np.asarray(old.getSolution().col_value))
        assert np.array_equal(res.duals_ub, np.asarray(old.getSolution().row_dual))
