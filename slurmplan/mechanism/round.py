"""From the policy's X to one concrete round: which job runs in which column (Gavel's Algorithm 2).

Pairs (job, column) with X > 0 are taken greedily by priority (``priorities.py``); a pair is skipped when its
GPU type has too few GPUs left, and a job appears at most once. A running job picked for a different column
stays where it is unless the move pays its reconfiguration (``reconfig.py``). Suboptimal greedy rounds are
corrected by later rounds, because waiting raises a job's priority.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from slurmplan.domain import AllocationProblem, Cell, GpuType, Reason
from slurmplan.mechanism.priorities import EPS, pick_order
from slurmplan.mechanism.qos import Shield, shield
from slurmplan.mechanism.reconfig import judge_move
from slurmplan.tick_types import TickConfig


class RowsOnDemand:
    """Per-row numbers computed when first read (``rows[j]``), then kept: ``RunningInfo``'s move horizons and
    times since the last move, which only ``greedy`` reads, for a running job whose best pair is a move (a few
    rows of a few ticks); every tick built them for every row before (issue 27: 1-2 % of ``bench_sim``).

    ``compute`` must give what an eager computation at construction would (the tick's values it reads do not
    change afterwards); ``numpy.asarray`` reads the whole array."""

    __slots__ = ("_compute", "_rows")

    def __init__(self, compute: Callable[[], np.ndarray]) -> None:
        self._compute: Callable[[], np.ndarray] | None = compute
        self._rows: np.ndarray | None = None

    def value(self) -> np.ndarray:
        """Every row's number (computed on the first call)."""
        if self._rows is None:
            assert self._compute is not None
            self._rows, self._compute = self._compute(), None
        return self._rows

    def __getitem__(self, j: int) -> float:
        return self.value()[j]

    def __len__(self) -> int:
        return len(self.value())

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.asarray(self.value(), dtype=dtype)


@dataclass(frozen=True, eq=False)
class RunningInfo:
    """What stickiness needs per row: running now, current column, already told to stop, decision horizon
    (expected remaining seconds), and seconds since a decision last moved it (None: never). The last two may be
    ``RowsOnDemand`` (``engine.running_info``): read them by row."""

    running: np.ndarray
    current: np.ndarray
    signalled: np.ndarray
    horizon: np.ndarray | RowsOnDemand
    since_moved: np.ndarray | RowsOnDemand | None = None
    qos: tuple[str, ...] | None = None
    """Per row: the job's Slurm QOS (for ``TickConfig.qos_preemption``, ``qos.py``)."""


@dataclass(frozen=True, eq=False)
class RoundChoice:
    """Per problem row: the chosen column (-1 = none), why, and the priority behind it."""

    col: np.ndarray
    reason: tuple[Reason, ...]
    detail: tuple[str, ...]
    priority: np.ndarray


def gpus_left(chosen: Iterable[Cell], capacity: Mapping[GpuType, int]) -> dict[GpuType, int]:
    """GPUs of each type still free once the ``chosen`` Cells are taken (never below zero)."""
    left = dict(capacity)
    for cell in chosen:
        left[cell.gpu_type] = left.get(cell.gpu_type, 0) - cell.gpus
    return {t: max(0, v) for t, v in left.items()}


def _type_index(problem: AllocationProblem, capacity: Mapping[GpuType, int]) -> tuple[np.ndarray, np.ndarray]:
    types = sorted(set(capacity) | {c.gpu_type for c in problem.cells})
    index = {t: i for i, t in enumerate(types)}
    col_type = np.array([index[c.gpu_type] for c in problem.cells], dtype=np.int64)
    cap = np.array([int(capacity.get(t, 0)) for t in types], dtype=np.int64)
    return col_type, cap


def greedy(
    problem: AllocationProblem,
    x: np.ndarray,
    priority: np.ndarray,
    eligible: np.ndarray,
    capacity: Mapping[GpuType, int],
    info: RunningInfo,
    config: TickConfig,
    deficit: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[int, str], np.ndarray]:
    """Chosen column per row, stickiness notes per row, and which rows stay only on left-over GPUs.

    A running job whose best pair is a move that does not pay (``reconfig.py``) is not moved there: the pair
    is deferred, so the job stays where it is if its current column is picked later at its own priority or GPUs
    of that type are left over at the end. Only when neither happens does it take the deferred move. Staying
    therefore never takes GPUs that a higher-priority pair won, and X is still followed over rounds.

    (An alternative that first runs the plain greedy and then lets movers stay only on left-over GPUs made
    about twice as many type changes and 1 % worse JCT and makespan in the simulator on two Gavel traces.)
    """
    n = problem.num_jobs
    chosen = np.full(n, -1, dtype=np.int64)
    notes: dict[int, str] = {}
    if n == 0 or not problem.cells:
        return chosen, notes, np.zeros(n, dtype=bool)
    col_type, cap = _type_index(problem, capacity)
    gpus = np.array([c.gpus for c in problem.cells], dtype=np.int64)
    thr = problem.throughput
    sticky = info.running & ~info.signalled & (info.current >= 0)
    deferred = np.full(n, -1, dtype=np.int64)
    guard = None
    if info.qos is not None:
        competing = eligible & (x.sum(axis=1) > EPS)
        guard = shield(info.qos, config.qos_preemption, sticky, info.current, col_type, gpus, cap.size, competing)
    rows, cols = pick_order(x, priority, eligible, deficit)
    for j, c in zip(rows.tolist(), cols.tolist(), strict=True):
        if chosen[j] >= 0 or gpus[c] > cap[col_type[c]]:
            continue
        cur = int(info.current[j])
        if guard is not None and _held_back(guard, j, c, cur, bool(sticky[j]), col_type, gpus, cap, notes):
            continue
        if sticky[j] and c != cur:
            wait = config.requeue_delay_s if col_type[c] == col_type[cur] else 0.0  # may restart where it ran
            since = float(info.since_moved[j]) if info.since_moved is not None else np.inf
            verdict = judge_move(
                float(thr[j, cur]), float(thr[j, c]), float(info.horizon[j]), config, gpus=int(gpus[c]), wait_s=wait,
                since_moved_s=since,
            )  # fmt: skip
            if not verdict.move:
                notes[j] = f"stays: {verdict.detail}"
                deferred[j] = c if deferred[j] < 0 else deferred[j]
                continue
            notes[j] = verdict.detail
        chosen[j] = c
        t = col_type[c]
        cap[t] -= gpus[c]
        if guard is not None and sticky[j]:
            guard.release(j, col_type[cur], gpus[cur])
        if cap[t] == 0 and not cap.any():  # a type that still has GPUs leaves some (``cap`` never goes below 0)
            break
    state = (chosen, deferred, cap, col_type, gpus)
    kept = _settle_running(
        problem, x, priority, state, info.current, sticky & eligible, notes, config.requeue_delay_s > 0, guard
    )
    return chosen, notes, kept


def _held_back(
    guard: Shield, j: int, c: int, cur: int, sticky: bool, col_type: np.ndarray, gpus: np.ndarray, cap: np.ndarray,
    notes: dict[int, str],
) -> bool:  # fmt: skip
    """The pair (j, c) would take GPUs of a running job that j's QOS may not displace, or shrink a running job
    that the round's other QOS may not displace (``qos.py``)."""
    t = col_type[c]
    if gpus[c] > guard.free_for(j, t, cap[t]):
        if not sticky:  # a waiting job: its note says why (``plan_round``)
            own = guard.names[guard.qos[j]]
            notes.setdefault(j, f"waits: the GPUs it could use are held by running jobs of QOS {guard.holders(j, t)},"
                                f" which its QOS {own} may not preempt")  # fmt: skip
        return True
    if sticky and guard.shielded[j] and c != cur and gpus[c] < gpus[cur]:
        notes[j] = f"stays: its QOS {guard.names[guard.qos[j]]} is not preempted for jobs of the other QOS here"
        return True
    return False


def _settle_running(
    problem: AllocationProblem,
    x: np.ndarray,
    priority: np.ndarray,
    state: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    current: np.ndarray,
    candidates: np.ndarray,
    notes: dict[int, str],
    requeue_wait: bool = False,
    guard: Shield | None = None,
) -> np.ndarray:
    """Running jobs the greedy passed over keep their column on left-over GPUs, else take their deferred move.

    Highest priority first; this runs after every pick, so it never takes GPUs a waiting job won. With Slurm's
    requeue delay (``requeue_wait``) a deferred move to the same GPU type is not forced: the job is stopped
    instead. Forced onto the type's nodes it may land on the node it leaves and hold its new GPUs idle for the
    whole delay (the replay's a100x4 -> a100x2 "resizes" waited 121 wall s); stopped, it is a requeued job that
    placement keeps off its old nodes, and whose GPUs go to other jobs while it could only wait.
    """
    chosen, deferred, cap, col_type, gpus = state  # updated in place
    kept = np.zeros(problem.num_jobs, dtype=bool)
    rows = np.flatnonzero(candidates & (chosen < 0))
    if rows.size == 0:
        return kept
    best = np.where(x[rows] > EPS, priority[rows], -np.inf).max(axis=1)

    def fits(j: int, c: int) -> bool:
        free = cap[col_type[c]] if guard is None else guard.free_for(j, col_type[c], cap[col_type[c]])
        return bool(gpus[c] <= free)

    for j in rows[np.lexsort((rows, -best))].tolist():
        cur, alt = int(current[j]), int(deferred[j])
        if cur >= 0 and fits(j, cur):
            chosen[j], kept[j] = cur, True
        elif alt >= 0 and fits(j, alt) and not (requeue_wait and col_type[alt] == col_type[cur]):
            chosen[j] = alt
            notes[j] = f"its GPUs went to higher-priority jobs, so it moves although {notes[j][len('stays: ') :]}"
        if chosen[j] >= 0:
            cap[col_type[chosen[j]]] -= gpus[chosen[j]]
            if guard is not None and cur >= 0:
                guard.release(j, col_type[cur], gpus[cur])
    return kept


def plan_round(
    problem: AllocationProblem,
    x: np.ndarray,
    priority: np.ndarray,
    info: RunningInfo,
    config: TickConfig,
    eligible: np.ndarray | None = None,
    capacity: Mapping[GpuType, int] | None = None,
    deficit: np.ndarray | None = None,
) -> RoundChoice:
    """The round's choice for every row, with a Reason and a text ``slurmplan explain`` prints."""
    n = problem.num_jobs
    eligible = np.ones(n, dtype=bool) if eligible is None else eligible
    capacity = problem.capacity if capacity is None else capacity
    col, notes, kept = greedy(problem, x, priority, eligible, capacity, info, config, deficit)
    masked = np.where(x > EPS, priority, -np.inf)
    best = masked.max(axis=1) if n and problem.cells else np.zeros(n)
    pri = np.where(col >= 0, priority[np.arange(n), np.maximum(col, 0)] if problem.cells else 0.0, best)
    left = gpus_left((problem.cells[c] for c in col[col >= 0].tolist()), capacity)
    reasons: list[Reason] = []
    details: list[str] = []
    takers = _Takers(problem, col, info, pri)
    # Per-row facts as Python lists, read once: a numpy element read costs several times a list's, every row
    # reads several, and a C-ordered row's sum is the same pairwise sum as the whole matrix's row sums.
    rows = _RowFacts(
        np.ascontiguousarray(x).sum(axis=1).tolist() if problem.cells else [0.0] * n,
        info.running.tolist(),
        info.current.tolist(),
        info.signalled.tolist(),
    )
    for j, chosen, ok in zip(range(n), col.tolist(), eligible.tolist(), strict=True):
        if not ok:  # never picked (col -1); its caller keeps its own reason: no words to compose for it
            reasons.append(Reason.WAITING)
            details.append("")
            continue
        running = rows.running[j]
        note = notes.get(j, "") if chosen >= 0 else _outranked(problem, j, x, priority, left)
        if chosen < 0 and not running and notes.get(j, "").startswith("waits: "):  # held back by QOS
            note = notes[j]
        if chosen < 0 and running:
            note = _preempted(problem, j, takers, info, note)
        reason, detail = _explain(problem, j, chosen, bool(kept[j]), x, rows, note)
        reasons.append(reason)
        details.append(detail)
    return RoundChoice(col, tuple(reasons), tuple(details), np.where(pri == -np.inf, 0.0, pri))


def _outranked(
    problem: AllocationProblem, j: int, x: np.ndarray, priority: np.ndarray, left: Mapping[GpuType, int]
) -> str:
    """Why a job with a share was not picked: its best column and what GPUs of that type were left."""
    if not problem.cells or x[j].max() <= EPS:
        return ""
    c = int(np.argmax(np.where(x[j] > EPS, priority[j], -np.inf)))
    cell = problem.cells[c]
    free = left.get(cell.gpu_type, 0)
    about = f"priority {priority[j, c]:.3g}, share of time {x[j].sum():.2f}"
    if free >= cell.gpus:  # "needs 4 GPUs and 4 were left" read as a contradiction
        return (
            f"not picked this round: its best configuration is {cell.short()}; {_gpus(free, cell.gpu_type)} are"
            f" free after the round's picks, so it may start there at the next round ({about})"
        )
    return (
        f"outranked this round: its best configuration {cell.short()} needs {_gpus(cell.gpus)}, but jobs of"
        f" higher priority left only {_gpus(free, cell.gpu_type)} ({about})"
    )


def _gpus(count: int, gpu_type: str = "") -> str:
    kind = f"{gpu_type} GPU" if gpu_type else "GPU"
    return f"{count} {kind}" + ("" if count == 1 else "s")


class _Takers:
    """Per GPU type, the rows newly given GPUs of that type this round, highest priority first: listed once per
    round (on demand) instead of once per preempted job, which was quadratic in the jobs present."""

    def __init__(self, problem: AllocationProblem, col: np.ndarray, info: RunningInfo, pri: np.ndarray) -> None:
        self.problem, self.col, self.info, self.pri = problem, col, info, pri
        self._by_type: dict[GpuType, list[int]] | None = None

    def of(self, gpu_type: GpuType) -> list[int]:
        if self._by_type is None:
            by_type: dict[GpuType, list[int]] = {}
            cells, running, current = self.problem.cells, self.info.running.tolist(), self.info.current.tolist()
            for k, c in enumerate(self.col.tolist()):
                if c >= 0 and not (running[k] and current[k] == c):  # newly given GPUs of that type
                    by_type.setdefault(cells[c].gpu_type, []).append(k)
            pri = self.pri
            for rows in by_type.values():
                rows.sort(key=lambda k: -pri[k])
            self._by_type = by_type
        return self._by_type.get(gpu_type, [])


def _preempted(problem: AllocationProblem, j: int, takers: _Takers, info: RunningInfo, why: str) -> str:
    """A running job that loses its GPUs: who took GPUs of its type this round, and why it lost them."""
    why = why or "the policy gave it no share of time this round"
    cur = int(info.current[j])
    if cur < 0 or not problem.cells:
        return why
    gpu_type = problem.cells[cur].gpu_type
    rows = [k for k in takers.of(gpu_type) if k != j]
    if not rows:
        return why
    pri = takers.pri
    named = ", ".join(f"job {problem.job_ids[k]} (priority {pri[k]:.3g})" for k in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    return f"its {gpu_type} GPUs went to {named}{more}; {why}"


@dataclass(frozen=True)
class _RowFacts:
    """What ``_explain`` reads of every row, as lists: its total share, running, current column, signalled."""

    share: list[float]
    running: list[bool]
    current: list[int]
    signalled: list[bool]


def _explain(
    problem: AllocationProblem, j: int, c: int, kept: bool, x: np.ndarray, rows: _RowFacts, note: str
) -> tuple[Reason, str]:
    share = rows.share[j]
    running, cur = rows.running[j], rows.current[j]
    if c < 0:
        if running:
            return Reason.PREEMPTED, note
        return Reason.WAITING, ("the policy gave it no share of time this round" if share <= EPS else note)
    cell = problem.cells[c]
    if running and rows.signalled[j]:
        return Reason.SCHEDULED, f"restarts as {cell.short()} after its checkpoint"
    if running and c == cur:
        if note:
            return Reason.KEPT, f"{note}; share of time {x[j, c]:.2f}"
        if kept:
            return Reason.KEPT, f"keeps {cell.short()}: GPUs of its type were left over after the round's picks"
        return Reason.KEPT, f"lease renewed on {cell.short()} (its share of time {x[j, c]:.2f})"
    if running:
        old = problem.cells[cur] if cur >= 0 else None
        reason = Reason.RESIZED if old is not None and old.gpu_type == cell.gpu_type else Reason.MOVED
        why = note or "its current configuration is no longer a candidate"
        return reason, f"from {old.short() if old else 'an unknown configuration'} to {cell.short()}: {why}"
    return Reason.SCHEDULED, f"starts as {cell.short()}, picked by priority (its share of time {x[j, c]:.2f})"
