"""The max-min LP's matrix written directly (``waterfill.max_min_rows``) is the very matrix that stacking the
sparse blocks gives: the same CSC arrays reach HiGHS, so the same LP is solved and decisions cannot change."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmplan.policy import lp
from slurmplan.policy.las import normalised_score
from slurmplan.policy.waterfill import max_min_rows
from tests.policy.test_las_uncontended import problems


def stacked(idx: lp.LpIndex, score: np.ndarray, w: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray]:
    """The general construction (what ``max_min`` built before): base constraints, then one row per job."""
    a0, b0 = lp.base_constraints(idx, extra_vars=1)
    rows = sp.hstack([-idx.per_job(score), sp.csr_matrix(w[:, None])], format="csr")
    return sp.csc_matrix(sp.vstack([a0, rows], format="csr")), np.concatenate([b0, np.zeros(idx.num_jobs)])


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_direct_rows_are_the_stacked_rows(problem, data):
    idx, score = normalised_score(problem, data.draw(st.booleans()))
    w = np.asarray(problem.column("weights"), dtype=float).copy()
    w[data.draw(st.lists(st.integers(0, problem.num_jobs - 1), max_size=3))] = 0.0  # inactive jobs have no t entry
    a, b, first = max_min_rows(idx, score, w)
    want, want_b = stacked(idx, score, w)
    assert a.shape == want.shape and first == want.shape[0] - problem.num_jobs
    for got, exp in ((a.indptr, want.indptr), (a.indices, want.indices), (a.data, want.data), (b, want_b)):
        np.testing.assert_array_equal(got, exp)


def test_a_changed_score_changes_the_rows():
    """The direct path reads the scores it is given (a stale or shared array would fail this)."""
    idx = lp.LpIndex(
        num_jobs=2, num_cells=2, rows=np.array([0, 0, 1]), cols=np.array([0, 1, 1]), thr=np.array([1.0, 2.0, 3.0]),
        gpus=np.array([1.0, 2.0, 2.0]), types=("a100", "v100"), type_of=np.array([0, 1, 1]),
        capacity=np.array([1.0, 2.0]),
    )  # fmt: skip
    w = np.array([1.0, 0.0])
    a1, _, first = max_min_rows(idx, np.array([1.0, 2.0, 3.0]), w)
    a2, _, _ = max_min_rows(idx, np.array([1.0, 2.5, 3.0]), w)
    assert first == 4 and a1.shape == (6, 4)
    assert a1[first, 1] == -2.0 and a2[first, 1] == -2.5
    assert a1[first, 3] == 1.0 and a1[first + 1, 3] == 0.0  # t: the weight, nothing for a zero-weight job
