"""Shared LP pieces for Gavel's policy family: the variable index, the base constraints, one solve helper.

Only the (job, column) pairs a job can actually use become variables (``throughput > 0`` and the column's GPU
type exists with enough GPUs), so a 2,048-job problem with a dozen Cells per job stays a sparse LP of some
ten thousand variables. Matrices are scipy.sparse and go straight to HiGHS (``solver="highs"``): cvxpy's
compile step costs more than the solve at that size. Any cvxpy solver name (``"CLARABEL"``, ``"HIGHS"``...)
solves the same matrices through cvxpy instead, which the tests use to cross-check the fast path.

Infeasible or failed solves come back as an ``LpResult`` with ``ok == False`` and a message, never as None.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from slurmplan.domain import AllocationProblem, GpuType, ValidationError

log = logging.getLogger(__name__)

_IPM_ABOVE = 4000
"""Variables above which HiGHS's interior-point method is used instead of dual simplex."""


@dataclass(frozen=True, eq=False)
class LpIndex:
    """Which (job, column) pairs are variables, and the per-variable facts the constraints need."""

    num_jobs: int
    num_cells: int
    rows: np.ndarray
    """Job index of each variable."""
    cols: np.ndarray
    """Column index of each variable."""
    thr: np.ndarray
    """Throughput of each variable's (job, column) pair."""
    gpus: np.ndarray
    """GPUs each variable's column uses."""
    types: tuple[GpuType, ...]
    type_of: np.ndarray
    """Index into ``types`` of each variable's GPU type."""
    capacity: np.ndarray
    """GPUs per type, aligned with ``types``."""
    host: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    """Host resources that limit X: (need per variable, capacity per type) for CPUs and memory when given."""

    @property
    def size(self) -> int:
        return len(self.rows)

    def per_job(self, values: np.ndarray | None = None) -> sp.csr_matrix:
        """(jobs x variables) matrix with ``values`` (default 1) at each variable's job: row sums, throughputs."""
        data = np.ones(self.size) if values is None else np.asarray(values, dtype=float)
        return sp.csr_matrix((data, (self.rows, np.arange(self.size))), shape=(self.num_jobs, self.size))

    def per_type(self, values: np.ndarray | None = None) -> sp.csr_matrix:
        """(types x variables) matrix of GPUs (or ``values``) used: the capacity constraint's left side."""
        data = self.gpus if values is None else values
        return sp.csr_matrix((data, (self.type_of, np.arange(self.size))), shape=(len(self.types), self.size))

    def dense(self, values: np.ndarray) -> np.ndarray:
        """Variables back to the (jobs x columns) matrix X."""
        x = np.zeros((self.num_jobs, self.num_cells))
        x[self.rows, self.cols] = values[: self.size]
        return x

    def effective(self, x: np.ndarray) -> np.ndarray:
        """Effective throughput per job of a variable vector."""
        return np.bincount(self.rows, weights=self.thr * x[: self.size], minlength=self.num_jobs)


def index(problem: AllocationProblem, throughput: np.ndarray | None = None) -> LpIndex:
    """The variables of ``problem``: pairs with positive throughput whose Cell fits its GPU type's capacity.

    ``throughput`` overrides the problem's matrix (the heterogeneity-agnostic forms pass an indicator).
    """
    thr = problem.throughput if throughput is None else throughput
    types = tuple(sorted(problem.capacity))
    cap = np.array([float(problem.capacity[t]) for t in types])
    type_pos = {t: i for i, t in enumerate(types)}
    cell_type = np.array([type_pos.get(c.gpu_type, -1) for c in problem.cells], dtype=int)
    cell_gpus = problem.gpus_per_cell
    cell_cap = np.where(cell_type >= 0, cap[np.maximum(cell_type, 0)], 0.0) if len(cap) else np.zeros(len(cell_type))
    cell_ok = (cell_type >= 0) & (cell_gpus <= cell_cap) & (cell_gpus > 0)
    usable = (np.asarray(thr) > 0) & cell_ok[None, :]
    rows, cols = np.nonzero(usable)
    host = []
    caps = (problem.cpu_capacity, problem.memory_capacity_mb)
    # Without host capacities (the simulator's clusters) the needs are not read at all: a pass over every row.
    needs = host_needs(problem) if any(cap is not None for cap in caps) else (None, None)
    for need, cap_map in zip(needs, caps, strict=True):
        if cap_map is not None and need.any():
            host_cap = np.array([float(cap_map.get(t, np.inf)) for t in types])
            host.append((need[rows, cols], host_cap))
    return LpIndex(
        num_jobs=problem.num_jobs,
        num_cells=len(problem.cells),
        rows=rows,
        cols=cols,
        thr=np.asarray(thr, dtype=float)[rows, cols],
        gpus=cell_gpus[cols],
        types=types,
        type_of=cell_type[cols],
        capacity=cap,
        host=tuple(host),
    )


def host_needs(problem: AllocationProblem) -> tuple[np.ndarray, np.ndarray]:
    """CPUs and host memory (MB) each (job, column) needs, from the candidates (0 where unknown).

    A job's row of candidates is read once per row object (the mechanism hands the same row over round after
    round while the columns stay), not every round.
    """
    shape = problem.throughput.shape
    cpus, mem = np.zeros(shape), np.zeros(shape)
    for j, row in enumerate(problem.candidates or ()):
        if len(row) == shape[1]:
            cpus[j], mem[j] = _host_row(row)
            continue
        for c, cand in enumerate(row):
            if cand is not None:
                cpus[j, c], mem[j, c] = cand.cpus, cand.host_memory_mb
    return cpus, mem


_host_rows: dict[int, tuple[tuple, np.ndarray, np.ndarray]] = {}
"""Pure memo for ``host_needs``: id of a candidate row (kept alive here) -> its CPU and memory needs."""


def _host_row(row: tuple) -> tuple[np.ndarray, np.ndarray]:
    hit = _host_rows.get(id(row))
    if hit is None or hit[0] is not row:
        cpus = np.array([0 if cand is None else cand.cpus for cand in row], dtype=float)
        mem = np.array([0 if cand is None else cand.host_memory_mb for cand in row], dtype=float)
        if len(_host_rows) >= 50_000:
            _host_rows.clear()
        hit = _host_rows[id(row)] = (row, cpus, mem)
    return hit[1], hit[2]


def agnostic_throughput(problem: AllocationProblem) -> np.ndarray:
    """Gavel's heterogeneity-agnostic view: the GPU type does not matter, only the Cell's size does.

    Each usable entry becomes the job's mean throughput over the GPU types it can use at that Cell size
    (GPU count and stages), so a policy sees time shares and GPU counts but no type differences. For max-min
    fairness this is Gavel's "every throughput set to 1" (the normaliser divides the mean out again).
    """
    thr = np.asarray(problem.throughput, dtype=float)
    out = np.zeros_like(thr)
    sizes = [(c.gpus, c.stages) for c in problem.cells]
    for size in set(sizes):
        cols = [i for i, s in enumerate(sizes) if s == size]
        block = thr[:, cols]
        usable = block > 0
        mean = block.sum(axis=1) / np.maximum(usable.sum(axis=1), 1)
        out[:, cols] = np.where(usable, mean[:, None], 0.0)
    return out


def type_blind(problem: AllocationProblem, x: np.ndarray) -> np.ndarray:
    """An agnostic allocation as a type-blind scheduler would run it: each job's share at a Cell size spread
    over the GPU types it can use there, in proportion to their GPU counts.

    The agnostic LP cannot tell types apart, so any split of a job's share between same-size Cells is optimal
    to it. A simplex solver returns a vertex that pins some jobs to one type for their whole life (a long job
    pinned to K80 then takes 10x longer); Gavel's interior-point solver returns the centre of the optimal face,
    which is this proportional split. Spreading explicitly makes the baseline independent of the solver.
    Where jobs that cannot use some types make the spread overfill another type, ``x`` is returned unchanged.
    """
    x = np.asarray(x, dtype=float)
    thr = np.asarray(problem.throughput, dtype=float)
    cap = np.array([float(problem.capacity.get(c.gpu_type, 0)) for c in problem.cells])
    gpus = problem.gpus_per_cell.astype(float)
    fits = (cap > 0) & (gpus <= cap) & (gpus > 0)
    out = np.zeros_like(x)
    sizes = [(c.gpus, c.stages) for c in problem.cells]
    for size in set(sizes):
        cols = np.array([i for i, s in enumerate(sizes) if s == size])
        weight = np.where((thr[:, cols] > 0) & fits[cols][None, :], cap[cols][None, :], 0.0)
        total = weight.sum(axis=1, keepdims=True)
        share = x[:, cols].sum(axis=1, keepdims=True)
        out[:, cols] = np.where(total > 0, share * weight / np.where(total > 0, total, 1.0), x[:, cols])
    return x if _overfills(problem, out) else out


def _overfills(problem: AllocationProblem, x: np.ndarray) -> bool:
    """Whether ``x`` uses more GPUs, or host CPUs or memory where given, of some type than there are."""
    cpus, mem = host_needs(problem)
    limits = ((problem.gpus_per_cell[None, :] * x, problem.capacity), (cpus * x, problem.cpu_capacity))
    limits += ((mem * x, problem.memory_capacity_mb),)
    for use, cap in limits:
        if cap is None:
            continue
        used: dict[GpuType, float] = {}
        for c, cell in enumerate(problem.cells):
            used[cell.gpu_type] = used.get(cell.gpu_type, 0.0) + float(use[:, c].sum())
        if any(v > cap.get(t, np.inf) * (1 + 1e-9) + 1e-9 for t, v in used.items()):
            return True
    return False


def index_for(problem: AllocationProblem, aware: bool) -> LpIndex:
    """The index over the real throughputs (aware) or the agnostic ones."""
    return index(problem, None if aware else agnostic_throughput(problem))


def equal_share_throughput(problem: AllocationProblem, idx: LpIndex) -> np.ndarray:
    """Throughput each job would get under X^equal, per GPU it uses (Gavel's normaliser for max-min fairness).

    X^equal gives every job the same share of each GPU type, proportional to that type's size (1 V100 + 1 K80
    -> [0.5, 0.5]). With Cells, a type contributes the job's best throughput per GPU among its Cells there;
    for a job with one Cell of ``s`` GPUs per type this is Gavel's ``throughput(m, X^equal) / scale_factor``,
    so dividing by it reproduces Gavel's ``* scale_factor_m`` term.
    """
    share = idx.capacity / max(idx.capacity.sum(), 1.0)
    best = np.zeros((idx.num_jobs, len(idx.types)))
    np.maximum.at(best, (idx.rows, idx.type_of), idx.thr / idx.gpus)
    return best @ share


def fastest_throughput(idx: LpIndex) -> np.ndarray:
    """Best throughput of each job over its columns (FIFO's X^fastest normaliser)."""
    best = np.zeros(idx.num_jobs)
    np.maximum.at(best, idx.rows, idx.thr)
    return best


def base_constraints(idx: LpIndex, extra_vars: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """Gavel's (5.2) and (5.3): each job's shares sum to at most 1; GPUs used per type within capacity; and,
    where the problem gives them, CPUs and host memory per type within capacity."""
    blocks, rhs = [idx.per_job(), idx.per_type()], [np.ones(idx.num_jobs), idx.capacity]
    for need, cap in idx.host:  # Rubick's CPU and memory dimensions, where the problem gives them
        finite = np.isfinite(cap)
        blocks.append(idx.per_type(need)[finite])
        rhs.append(cap[finite])
    a = sp.vstack(blocks, format="csr")
    if extra_vars:
        a = sp.hstack([a, sp.csr_matrix((a.shape[0], extra_vars))], format="csr")
    b = np.concatenate(rhs)
    return a, b


def within(a: sp.csr_matrix, b: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` in [0, 1], scaled down so that ``a @ v <= b`` holds exactly, for an interior-point solver's answer.

    CLARABEL meets a constraint to its own relative tolerance, which on a tight CPU budget can leave a type 1e-5
    over capacity. Every coefficient of the base constraints is >= 0, so scaling down the variables of each
    violated row, one row after another, never breaks a row already met.
    """
    v = np.clip(np.asarray(v, dtype=float), 0.0, 1.0)
    for i in np.nonzero(a @ v > b)[0]:
        row = a.getrow(i)
        cols, coef = row.indices, row.data
        used = float(coef @ v[cols])
        if used > b[i]:
            v[cols[coef > 0]] *= max(b[i], 0.0) / used
    return v


@dataclass(frozen=True, eq=False)
class LpResult:
    """Outcome of one LP: ``ok`` with the variable vector, or not, with the solver's message."""

    ok: bool
    status: str
    x: np.ndarray
    objective: float
    duals_ub: np.ndarray | None = None
    """Marginals of the ``<=`` rows (<= 0 for a minimisation), when the solver gives them."""
    message: str = ""


def solve(
    c: np.ndarray,
    a_ub: sp.spmatrix,
    b_ub: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    solver: str = "highs",
    a_eq: sp.spmatrix | None = None,
    b_eq: np.ndarray | None = None,
) -> LpResult:
    """Minimise ``c @ v`` s.t. ``a_ub @ v <= b_ub``, ``a_eq @ v == b_eq``, ``lo <= v <= hi`` (inf allowed)."""
    lo, hi = bounds
    if len(c) == 0:
        return LpResult(True, "optimal", np.zeros(0), 0.0, np.zeros(a_ub.shape[0]), "no variables")
    if solver == "highs":
        return _solve_highs(c, a_ub, b_ub, lo, hi, a_eq, b_eq)
    return _solve_cvxpy(c, a_ub, b_ub, lo, hi, a_eq, b_eq, solver)


def _solve_highs(c, a_ub, b_ub, lo, hi, a_eq, b_eq) -> LpResult:
    bnds = np.column_stack([np.where(np.isfinite(lo), lo, -np.inf), np.where(np.isfinite(hi), hi, np.inf)])
    # Interior point beats simplex by 5x on the large max-min LPs (thousands of t-rows); simplex is quicker to
    # start on small ones. Both end on a vertex with duals (HiGHS runs crossover after IPM).
    method = "highs-ipm" if len(c) > _IPM_ABOVE else "highs-ds"
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bnds, method=method)
    if res.status != 0 or res.x is None:
        status = {2: "infeasible", 3: "unbounded"}.get(res.status, "error")
        log.warning("LP %s: %s", status, res.message)
        return LpResult(False, status, np.zeros(len(c)), float("nan"), None, str(res.message))
    duals = np.asarray(res.ineqlin.marginals) if res.ineqlin is not None else None
    return LpResult(True, "optimal", np.asarray(res.x), float(res.fun), duals, str(res.message))


def _solve_cvxpy(c, a_ub, b_ub, lo, hi, a_eq, b_eq, solver: str) -> LpResult:
    import cvxpy as cp

    if solver not in cp.installed_solvers():
        raise ValidationError("solver", solver, f"'highs' or an installed cvxpy solver: {cp.installed_solvers()}")
    v = cp.Variable(len(c))
    cons = [a_ub @ v <= b_ub]
    if a_eq is not None:
        cons.append(a_eq @ v == b_eq)
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    if fin_lo.any():
        cons.append(v[np.nonzero(fin_lo)[0]] >= lo[fin_lo])
    if fin_hi.any():
        cons.append(v[np.nonzero(fin_hi)[0]] <= hi[fin_hi])
    prob = cp.Problem(cp.Minimize(c @ v), cons)
    try:
        prob.solve(solver=solver)
    except cp.error.SolverError as exc:
        log.warning("LP solver %s failed: %s", solver, exc)
        return LpResult(False, "error", np.zeros(len(c)), float("nan"), None, str(exc))
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or v.value is None:
        log.warning("LP %s with %s", prob.status, solver)
        return LpResult(False, str(prob.status), np.zeros(len(c)), float("nan"), None, str(prob.status))
    duals = -np.asarray(cons[0].dual_value) if cons[0].dual_value is not None else None
    return LpResult(True, "optimal", np.asarray(v.value), float(prob.value), duals, str(prob.status))
