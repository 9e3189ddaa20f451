"""``HighsModel.basis`` reads the statuses through ``getBasicVariables``, except where that crashes HiGHS.

HiGHS solves an LP whose constraint matrix has no nonzeros directly (``solveUnconstrainedLp``), leaving no
factorisation; ``getBasicVariables`` then factors the empty matrix and HiGHS 1.16 segfaults (LAS meets such LPs
on small problems: only ``t``'s column, with zero coefficients). Every check runs in a subprocess so that a crash
fails the test instead of killing pytest; the statuses must equal ``getBasis``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    script = textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], cwd=_ROOT, env=env, capture_output=True, text=True)


_EMPTY = """
    import highspy, numpy as np, scipy.sparse as sp
    a = sp.csr_matrix((3, 1))  # the LP that crashed: t alone, fixed, three rows, no nonzero
    model_args = (np.zeros(1), a, np.array([1.0, 0.0, 0.0]), np.zeros(1), np.zeros(1))
"""


def test_get_basic_variables_crashes_highs_on_an_empty_matrix():
    """Why ``basis`` guards: if this stops crashing (a fixed HiGHS), the guard may go."""
    out = _run(
        _EMPTY
        + """
    from slurmplan.policy.highs import HighsModel
    m = HighsModel(*model_args)
    assert m.run().ok
    m._h.getBasicVariables()
    print("survived")
    """
    )
    if out.returncode == 0 and "survived" in out.stdout:  # highspy is not pinned: a fixed release must not fail CI
        pytest.skip("this HiGHS no longer crashes on an empty matrix: the nnz guard in HighsModel.basis may go")
    assert out.returncode < 0, (out.returncode, out.stdout, out.stderr[-2000:])


def test_basis_falls_back_where_the_fast_read_is_unsafe():
    out = _run(
        _EMPTY
        + """
    import json
    from slurmplan.policy.highs import HighsModel
    seen = []
    for c, hi in ((np.zeros(1), np.zeros(1)), (-np.ones(1), np.ones(1))):  # fixed, or free to rise: no rows bind
        m = HighsModel(c, a, model_args[2], np.zeros(1), hi)
        res = m.run()
        seen.append([res.ok] + [s.tolist() for s in m.basis(res.x) + m.slow_basis()])
    m = HighsModel(-np.ones(2), sp.csr_matrix(np.eye(2)), np.ones(2), np.zeros(2), np.full(2, 2.0))
    seen.append([False] + [s.tolist() for s in m.basis(np.zeros(2)) + m.slow_basis()])  # unsolved: no basis
    print(json.dumps(seen))
    """
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert [s[0] for s in seen] == [True, True, False]
    for _, cols, rows, slow_cols, slow_rows in seen:
        assert (cols, rows) == (slow_cols, slow_rows)


def test_fast_statuses_equal_get_basis_on_las_generated_lps():
    """LAS on test_las_same_lp's 200 generated problem pairs: no crash, every status as ``getBasis`` reads it."""
    out = _run(
        """
    import json
    from slurmplan.policy import highs
    from tests.policy import test_las_same_lp
    fast = highs.HighsModel.basis
    counts = {"fast": 0, "fallback": 0, "differ": 0}

    def checked(self, x):
        got, slow = fast(self, x), self.slow_basis()
        counts["fast" if self._h.getNumNz() > 0 else "fallback"] += 1
        counts["differ"] += int(any(g.tolist() != s.tolist() for g, s in zip(got, slow)))
        return got

    highs.HighsModel.basis = checked
    test_las_same_lp.test_the_second_problem_is_answered_as_by_a_fresh_policy()
    print(json.dumps(counts))
    """
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["differ"] == 0 and counts["fast"] > 100 and counts["fallback"] > 0, counts
