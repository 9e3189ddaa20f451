"""``scipy.optimize.linprog(method="highs")`` for one LP form, without linprog's Python around the solve.

The flagship's type-matching LP (``flagship_match.transport``) is small (a few hundred variables) and solved
every round; through ``linprog`` most of its time was scipy's Python: checking and converting the inputs,
stacking the sparse blocks, and validating each of five HiGHS options by name (issue 27: 15 % of the flagship's
samples, its HiGHS solve a fifth of that). This passes the same LP to the same solver in the same form:

- scipy's *own* HiGHS build (``scipy.optimize._highspy._core``), not highspy's: the two are different HiGHS
  versions here (1.12 and 1.16), and another version may end on another vertex of the same optimum;
- the same options (presolve on, dual simplex, no output) through one ``HighsOptions`` as scipy's wrapper does;
- the rows as linprog stacks them (the ``<=`` rows, then the ``==`` rows as lhs == rhs) and the matrix
  column-wise with each column's row indices ascending, as ``csc_array`` of the stacked blocks gives them;
- linprog's own acceptance check afterwards (``_check_result``: bounds, slacks and equality residuals within
  ``sqrt(1e-9) * 10``), so an "optimal" answer linprog would refuse is refused here too.

So the answer is linprog's, bit for bit (``tests/policy/test_linprog_direct.py`` compares the two on random LPs
of this form, and the flagship's decision hash does on every round). scipy's module is private and its wrapper's
options may change between releases, so this is used only on the scipy releases it was checked against
(``CHECKED``); on any other, or where a name it uses is missing, ``available()`` is False and the caller uses
``linprog`` (the same decisions, at linprog's cost), until the test has been run there and the release added.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import scipy

CHECKED = ("1.17",)
"""scipy releases (major.minor) whose ``linprog(method="highs")`` this was compared with, byte for byte."""

try:  # scipy >= 1.15 keeps its HiGHS here; older scipys do not (the caller then uses linprog)
    import scipy.optimize._highspy._core as _h
    from scipy.optimize._highspy._core import simplex_constants as _s_c

    # everything used below, looked up once: a scipy that renamed one falls back to linprog instead of failing
    _USED = (
        _h._Highs, _h.HighsLp, _h.HighsOptions, _h.HighsDebugLevel.kHighsDebugLevelNone, _h.MatrixFormat.kColwise,
        _h.HighsStatus.kError, _h.HighsModelStatus.kOptimal, _h.kHighsInf, _s_c.SimplexStrategy.kSimplexStrategyDual,
    )  # fmt: skip
except (ImportError, AttributeError):  # pragma: no cover - depends on the installed scipy
    _h = None
    _s_c = None

_TOL = float(np.sqrt(1e-9) * 10)
"""linprog's feasibility check on HiGHS's answer (``_linprog_util._check_result`` with its default ``tol``)."""


def available() -> bool:
    """True when scipy's own HiGHS can be driven directly (else use ``scipy.optimize.linprog``)."""
    return _h is not None and ".".join(scipy.__version__.split(".")[:2]) in CHECKED


@functools.cache
def _options():
    """The options scipy's ``_highs_wrapper`` passes for ``linprog(method="highs")`` with no solver options, made
    once (issue 27, twenty-second session: setting them by name was a fifth of this module's own time): HiGHS copies
    them in ``passOptions``, and nothing changes the object afterwards."""
    o = _h.HighsOptions()
    o.presolve = "on"
    o.highs_debug_level = _h.HighsDebugLevel.kHighsDebugLevelNone
    o.log_to_console = False
    o.output_flag = False
    o.simplex_strategy = _s_c.SimplexStrategy.kSimplexStrategyDual
    return o


_local = threading.local()


def _solver():
    """This thread's HiGHS instance, made once and reused (issue 27, twenty-second session: making one was a sixth
    of a matching LP's time). HiGHS's ``passModel`` clears the instance first (``clearModel``: the model, presolve,
    solution, basis, info and the simplex's own state), so each solve starts as on a new instance, and the options
    are passed again before each; an instance that gave no optimal answer is dropped all the same. Checked: the
    site history's 714 matching LPs of its first 0.3 days gave the same bytes on one instance as on new ones, and
    ``tests/policy/test_linprog_direct.py`` solves its random LPs one after another against ``linprog``'s."""
    highs = getattr(_local, "highs", None)
    if highs is None:
        highs = _local.highs = _h._Highs()
    return highs


def solve_stacked(
    c: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    b_ub: np.ndarray,
    b_eq: np.ndarray,
) -> np.ndarray | None:
    """``linprog(c, A_ub, b_ub, A_eq, b_eq, bounds=(0, 1), method="highs").x`` when its status is 0, else None.

    The matrix is ``[A_ub; A_eq]`` in CSC arrays (row indices ascending within each column; the ``<=`` rows
    first). ``b_ub`` and ``b_eq`` are finite.
    """
    n, m_ub = c.size, b_ub.size
    m = m_ub + b_eq.size
    lhs = np.concatenate((np.full(m_ub, -_h.kHighsInf), b_eq)).astype(float)
    rhs = np.concatenate((b_ub, b_eq)).astype(float)
    lp = _h.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = m
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = m
    lp.a_matrix_.format_ = _h.MatrixFormat.kColwise
    lp.col_cost_ = np.asarray(c, dtype=float)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.ones(n)
    lp.row_lower_ = lhs
    lp.row_upper_ = rhs
    lp.a_matrix_.start_ = indptr
    lp.a_matrix_.index_ = indices
    lp.a_matrix_.value_ = data
    highs = _solver()
    if highs.passOptions(_options()) == _h.HighsStatus.kError or highs.passModel(lp) == _h.HighsStatus.kError:
        _local.highs = None
        return None
    if highs.run() == _h.HighsStatus.kError or highs.getModelStatus() != _h.HighsModelStatus.kOptimal:
        _local.highs = None
        return None
    fun = highs.getInfo().objective_function_value
    solution = highs.getSolution()
    x = np.array(solution.col_value)
    row = np.asarray(solution.row_value, dtype=float)
    slack, con = rhs[:m_ub] - row[:m_ub], rhs[m_ub:] - row[m_ub:]
    if np.isnan(x).any() or np.isnan(fun) or np.isnan(slack).any() or np.isnan(con).any():
        return None
    if not np.all((x >= -_TOL) & (x <= 1.0 + _TOL)) or (slack < -_TOL).any() or (np.abs(con) > _TOL).any():
        return None
    return x
