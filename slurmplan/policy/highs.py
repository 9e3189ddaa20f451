"""One LP kept alive in HiGHS across a sequence of small changes (warm starts).

Water filling and the flagship solve the same LP several times with a few coefficients, bounds or the
objective changed. Rebuilding it each time through ``scipy.optimize.linprog`` costs a full solve (~0.5 s at
2,048 jobs); changing the live model and re-running dual/primal simplex from the previous basis costs a
fraction of that. highspy comes with cvxpy (its HIGHS interface), so this adds no dependency.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from slurmplan.policy.lp import LpResult

log = logging.getLogger(__name__)

_IPM_ABOVE = 4000
"""Variables above which the first solve uses interior point (then crossover, which yields a warm basis)."""


_banner_shown = False

_STATUS = [highspy.HighsBasisStatus(i) for i in range(5)]
"""HiGHS's basis statuses by value: kLower, kBasic, kUpper, kZero, kNonbasic."""
LOWER, BASIC, UPPER = 0, 1, 2
"""The codes ``HighsModel.basis`` reads and ``start_from`` takes for kLower, kBasic, kUpper (``las_warm`` too)."""


@dataclass(frozen=True)
class SolveOptions:
    """HiGHS options for a model's simplex solves: ``recost`` for a re-solve after the objective changed (the
    efficiency pass after the max-min LP), ``fresh`` for every other one. A first solve by interior point (large
    models) keeps HiGHS's defaults.
    """

    fresh: tuple[tuple[str, object], ...] = ()
    recost: tuple[tuple[str, object], ...] = ()


REFERENCE = SolveOptions(
    fresh=(("presolve", "choose"), ("simplex_strategy", 1), ("simplex_dual_edge_weight_strategy", -1)),
    recost=(("presolve", "choose"), ("simplex_strategy", 1), ("simplex_dual_edge_weight_strategy", -1)),
)
"""HiGHS's defaults: every solve before issue 27's item 5 (``reference_solves`` runs them again)."""

FAST = SolveOptions(
    fresh=(("presolve", "off"), ("simplex_strategy", 1), ("simplex_dual_edge_weight_strategy", 1)),
    recost=(("presolve", "off"), ("simplex_strategy", 4), ("simplex_dual_edge_weight_strategy", -1)),
)
"""No presolve (these LPs have nothing to remove: every row binds some job or type), Devex pricing for dual
simplex, and primal simplex after a cost change. On the 956 max-min calls of ``bench_sim --days 3`` (1,912
solves, re-run on their own): 9.1 s -> 4.7 s CPU, every objective equal to 1e-15, X different in 350 calls.
The optimum is the same; the vertex may differ where the optimum is not unique (equal optima broken
differently), which ``tests/sim/test_equal_optima.py`` checks. Tried on the same calls: presolve off alone 7.7 s,
primal alone 7.3 s, no scaling 9.6 s, Dantzig pricing 10.8 s, primal edge weights (Dantzig, Devex) no change."""


class _Mode:
    """Which options new models take (``FAST`` unless inside ``reference_solves``)."""

    value: SolveOptions = FAST


_mode = _Mode()


def fast_solves() -> bool:
    """Whether new models take ``FAST`` (not inside ``reference_solves``): LAS also leaves out dominated
    variables only then, so that ``reference_solves`` runs every LP as before issue 27's item 5."""
    return _mode.value is FAST


@contextmanager
def reference_solves() -> Iterator[None]:
    """Models built inside solve with ``REFERENCE`` (the equal-optima guard and ``bench_sim --reference``)."""
    saved = _mode.value
    _mode.value = REFERENCE
    try:
        yield
    finally:
        _mode.value = saved


class _Spare(threading.local):
    """A ``Highs`` a finished ``HighsModel`` gave back (``HighsModel.__del__``), for this thread's next model.

    Building a ``Highs`` costs about 0.13 ms (the C++ solver's option records, highspy's callback objects), and
    LAS builds one or two a contested round: 1 % of ``bench_sim`` (issue 27, twenty-second session). ``clear``
    gives the same solver back as new: HiGHS's default options, no model, basis, solution or solver data; the
    LP solved on it is the same LP, solved alike (``tests/policy/test_highs_spare.py`` compares a reused solver's
    answers, bases and iteration counts with a fresh one's). One per thread: a ``Highs`` is not shared."""

    highs: highspy.Highs | None = None


_spare = _Spare()


def _quiet_highs() -> highspy.Highs:
    """A ``Highs`` with its output off. The first one of a process prints HiGHS's banner to file descriptor 1
    from C++ before any option can be set, which corrupted ``--json`` output on stdout (``simulate --json``);
    that construction runs with fd 1 pointed at /dev/null. A spare one (``_Spare``) is cleared and taken first."""
    global _banner_shown
    spare = _spare.highs
    if spare is not None:
        _spare.highs = None
        spare.clear()
        h = spare
    elif _banner_shown:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _banner_shown = True
    h.setOptionValue("output_flag", False)
    return h


class HighsModel:
    """``min c @ v`` s.t. ``a_ub @ v <= b_ub``, ``lo <= v <= hi``, editable in place and re-solved warm."""

    def __init__(
        self,
        c: np.ndarray,
        a_ub: sp.spmatrix,
        b_ub: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        options: SolveOptions | None = None,
    ) -> None:
        self.options = _mode.value if options is None else options
        self._recost = False
        self.n = len(c)
        self.m = a_ub.shape[0]
        a = sp.csc_matrix(a_ub)
        # Rows first (empty), then the columns with their entries: the same column-wise LP that a HighsLp with
        # these arrays passes, through HiGHS's array calls. Setting a HighsLp's vectors converted every element
        # through Python (about 1.5 ms on a 3,000-column LP, 8 % of LAS's solve time); these read the buffers.
        inf = highspy.kHighsInf
        no_int, no_float = np.zeros(0, dtype=np.int32), np.zeros(0)
        self._h = _quiet_highs()
        self._h.addRows(self.m, np.full(self.m, -inf), np.asarray(b_ub, dtype=float), 0, no_int, no_int, no_float)
        self._h.addCols(
            self.n,
            np.asarray(c, dtype=float),
            np.where(np.isfinite(lo), lo, -inf).astype(float),
            np.where(np.isfinite(hi), hi, inf).astype(float),
            a.nnz,
            a.indptr[:-1].astype(np.int32),
            a.indices.astype(np.int32),
            a.data.astype(float),
        )
        self._runs = 0
        self._started = False

    def __del__(self) -> None:
        """Give the solver back for the next model (``_Spare``): nothing else holds it."""
        h = getattr(self, "_h", None)
        if h is not None and _spare.highs is None:
            _spare.highs = h

    def basis(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last (optimal) solve's status of every column and every row as small integers (HiGHS's
        ``HighsBasisStatus`` values), from its basic variables and the solution ``x``: a nonbasic column sits at a
        bound (1 for a share at its upper bound, else 0), a nonbasic row at its upper bound (every row is ``<=``).
        ``getBasis`` gives the same through one Python object per status, 0.4 ms on a 2,000-column LP; this 20 us.

        ``getBasicVariables`` refactors the basis when the solve left no factorisation. HiGHS solves an LP whose
        matrix has no nonzeros without simplex (``solveUnconstrainedLp``), and factoring that empty matrix
        crashes HiGHS 1.16 (a segfault, ``tests/policy/test_highs_basis.py``): such LPs, and any call HiGHS
        refuses (no valid basis: it then hands back zeros), read ``getBasis`` instead."""
        if self._h.getNumNz() > 0:
            status, basic = self._h.getBasicVariables()
            if status == highspy.HighsStatus.kOk:
                cols = np.where(np.asarray(x) > 0.5, UPPER, LOWER).astype(np.int8)
                rows = np.full(self.m, UPPER, dtype=np.int8)
                cols[basic[basic >= 0]] = BASIC
                rows[-1 - basic[basic < 0]] = BASIC
                return cols, rows
        return self.slow_basis()

    def slow_basis(self) -> tuple[np.ndarray, np.ndarray]:
        """``basis`` read through ``getBasis`` (safe in every state; the reference ``basis`` is tested against)."""
        b = self._h.getBasis()
        cols = np.array([int(s) for s in b.col_status], dtype=np.int8)
        return cols, np.array([int(s) for s in b.row_status], dtype=np.int8)

    def start_from(self, cols: np.ndarray, rows: np.ndarray) -> bool:
        """Start the next solve from these statuses (``basis``'s codes), one per column and one per row. They need
        not form a basis: HiGHS completes or trims them first (an "alien" basis). False if it refused them."""
        b = highspy.HighsBasis()
        b.col_status = [_STATUS[i] for i in cols.tolist()]
        b.row_status = [_STATUS[i] for i in rows.tolist()]
        b.valid = True
        b.alien = True
        self._started = self._h.setBasis(b) == highspy.HighsStatus.kOk
        return self._started

    def set_cost(self, c: np.ndarray) -> None:
        self._recost = True
        self._h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), np.asarray(c, dtype=float))

    def set_col_bounds(self, col: int, lo: float, hi: float) -> None:
        self._h.changeColBounds(col, lo, hi if np.isfinite(hi) else highspy.kHighsInf)

    def set_row_upper(self, rows: np.ndarray, upper: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int32)
        lower = np.full(len(rows), -highspy.kHighsInf)
        self._h.changeRowsBounds(len(rows), rows, lower, np.asarray(upper, dtype=float))

    def set_coeffs(self, rows: np.ndarray, col: int, values: np.ndarray) -> None:
        for r, v in zip(rows.tolist(), np.asarray(values, dtype=float).tolist(), strict=True):
            self._h.changeCoeff(r, col, v)

    def add_rows(self, a_rows: sp.spmatrix, upper: np.ndarray) -> None:
        """Append ``a_rows @ v <= upper``; the current basis stays valid (the new rows enter basic)."""
        a = sp.csr_matrix(a_rows)
        k = a.shape[0]
        lower = np.full(k, -highspy.kHighsInf)
        self._h.addRows(k, lower, np.asarray(upper, dtype=float), a.nnz, a.indptr[:-1], a.indices, a.data)
        self.m += k

    def run(self) -> LpResult:
        """Solve (interior point the first time on large models, then simplex from the last basis)."""
        first_large = self._runs == 0 and self.n > _IPM_ABOVE and not self._started
        self._h.setOptionValue("solver", "ipm" if first_large else "simplex")
        options = REFERENCE if first_large else self.options
        for name, value in options.recost if self._recost and self._runs else options.fresh:
            self._h.setOptionValue(name, value)
        self._recost = False
        self._runs += 1
        self._h.run()
        status = self._h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            text = self._h.modelStatusToString(status)
            log.debug("LP %s", text)
            return LpResult(False, text.lower(), np.zeros(self.n), float("nan"), None, text)
        sol = self._h.getSolution()
        obj = self._h.getInfo().objective_function_value
        return LpResult(True, "optimal", np.asarray(sol.col_value), float(obj), np.asarray(sol.row_dual))
