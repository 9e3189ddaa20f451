"""The ``slurmplan`` policy: lowest due time first, each chosen job where it is relatively fastest, a wait bound.

Why this shape (issue 17, measured in sim/RESULTS.md): under Gavel's rules the LP family (LAS, FTF, the earlier
LP flagship) time-shares every GPU among all jobs, which stretches every job and restarts them ~45 times each;
FIFO finishes the oldest jobs fast but makes short jobs wait behind long ones; pure shortest-remaining-first
finishes short jobs fast but keeps pushing long jobs back as new short ones arrive. This policy runs whole jobs
(one column each, no time slicing) in the order of a *due time*

    due = submit time + length_weight x expected remaining time

or, for a job whose deadline can still be met and is nearer, its latest start (deadline - expected remaining).
The expected remaining time is ``steps left / throughput on the job's fastest column`` when the job told its
steps (trace, hints), the time left before its Slurm time limit when it only has that, and the time it has
already held GPUs (least attained service, Tiresias/Gittins for heavy tails) when it told nothing.

Who runs: guaranteed jobs first (in a column that gives their SLA when one has room), then everyone by due time,
each taking the fastest column of its requested size with room (backfill: a job that does not fit is skipped).
Where: the chosen jobs are then re-placed, same sizes, by a small transportation LP that maximises the sum of
their speeds relative to their fastest type (Gavel's trace: a Recommendation job is 2.3x faster on a P100
than on a V100, a ResNet-50 1.6x slower, so the P100 goes to the first). Leftover GPUs grow elastic jobs.

No starvation, and a bound an admin can read: a waiting job's due time does not move, and a job submitted later
has a due time at least its own submit time, so nobody submitted more than ``due - submit`` after a job can go
ahead of it (deadline jobs and guaranteed jobs excepted, which an admin admits, and jobs past the stretch guard).
``max_wait_s`` makes it a hard promise: a job that has waited that long (time since submission not holding GPUs)
is served before every job that has not, longest wait first. Each job's note in ``slurmplan explain`` says both.

Stretch guard (``stretch_guard``, measured on Gavel's traces, RESULTS.md section 5): ordering and matching for the
mean JCT (shortest first onto the fast GPUs) leaves the long jobs on slow GPUs, which is what finish-time fairness
punishes. A job whose finish-time ratio, if it ran on its fastest GPU from the next round on, would pass the guard
((time in the system + a round + time left) / its time alone on its fastest GPU; in the order, against its 1/n share
of a busy cluster as Gavel's FTF counts it) goes before every job that has not (overdue and guaranteed jobs still
first), and the matching LP puts it on its fastest type first (shorter guarded jobs first). The guard acts only
when needed, so a job's ratio stays near the guard while the rest keep the mean-JCT order. Time alone is remembered
per job from the first round the policy saw it (steps left / fastest throughput + time held); for a job without a
step count, time in the system over time it held GPUs stands in (a waiting job passes the guard within rounds).
A job past its guard (or its wait bound) that does not fit reserves the GPU types it could use: no job after it
starts there (gang jobs were starved by one-GPU backfill). When the matching LP's shares do not round to whole
columns (gang jobs), the jobs are matched greedily by the same values instead (the guarded first). With restart
costs and ``guard_below`` (issue 23, RESULTS.md section 7), a waiting job less than ``stretch_guard`` times past
its guard goes ahead of the waiting jobs only, and of the running job due last (``below_running``).

Elastic jobs and restarts (``hold_s``, ``search_depth``, ``scale_up``; measured on the LLM trace, RESULTS.md
section 5): a running job keeps its column unless a job due ``hold_s`` sooner needs the GPUs (re-deciding every
round from scratch swapped jobs between A100 and A40 each round, 8 restarts per job); a waiting job is placed
the way Crius places it, at its best column of any size, shrinking or moving up to ``search_depth`` placed
jobs (never a guaranteed one) to make room; GPUs still idle go to the job gaining most speed per added GPU.
A guaranteed job that waited for the round starts, once every guaranteed job has its SLA column, in a column
fast enough to make up that wait (``sla_catch_up``; the other sizing options are in ``flagship_sizing.py``).

Restarts: the order of running jobs is stable (their due time only falls as they progress), so a running job is
displaced only by a job due earlier; ties keep the current column, and ``move_gain`` keeps a running job where
it is unless another free column is that fraction faster, and ``stay_bonus`` makes the matching LP value a job's
current column that much more (the mechanism's Rubick rule still weighs the cost).
Do no harm (issue 23, ``flagship_moves.py``): every change the steps above make to a running job (a move, a
resize, a stop) is then priced over the job's expected remaining time, plus the waiting it saves the jobs it
makes room for (a stopped job's loss: its wait behind them and behind the jobs due before it), against its full
measured restart cost (doubled within the hold time after its last move); a
change that does not pay is undone, and the job runs on as plain Slurm would have left it.

The steps, each in its own module: ordering (``flagship_order.py``), selection with the reservation and Crius's
search (``_select`` here), matching (``flagship_match.py``), sizing (``flagship_sizing.py``), move pricing and
hysteresis (``flagship_moves.py``), notes (``flagship_notes.py``), and between rounds the refill of freed GPUs
with the waiting jobs that never ran (``flagship_fill.py``, ``between_rounds``); every parameter in
``flagship_params.py``.

Not modelled: account weights (the earlier LP flagship's water filling); sites that need them use
``hierarchical``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy.base import Policy, PolicyConfig
from slurmplan.policy.crius import Crius
from slurmplan.policy.flagship_fill import freed_rows
from slurmplan.policy.flagship_match import match_types
from slurmplan.policy.flagship_moves import Guarded, guard_moves, paying_columns
from slurmplan.policy.flagship_notes import queue_notes
from slurmplan.policy.flagship_order import (
    Queue,
    below_running,
    expected_remaining_s,
    known_steps,
    learned_priors,
    projected_stretch,
    queue_order,
    sla_floors,
)
from slurmplan.policy.flagship_params import PARAMS
from slurmplan.policy.flagship_sizing import catch_up, catch_up_floors, climb_idle, deadline_floors, grow
from slurmplan.policy.greedy import Packing, reference_throughput

FORGET_S = 86_400.0
"""How long a job may be out of the problem before the flagship forgets what it remembered of it (``_forget``):
a finished or cancelled job's entries go then. A job also leaves the problem for a moment while Slurm requeues it
(COMPLETING) or while its GPUs are drained; forgetting it then would shorten its ``protect_pushed`` shield and reset
its time alone (as a daemon restart does), so only a day out counts as gone."""

__all__ = ["Slurmplan", "expected_remaining_s", "sla_floors"]


class _Search(Crius):
    """Crius's placement search (best column of any size, making room by shrinking or moving up to
    ``search_depth`` placed jobs) that never shrinks or moves a guaranteed job: it stops searching instead (letting
    it move one as long as it keeps its SLA measured worse on section 5's LLM trace: 5 deadline misses, not 3)."""

    protected: np.ndarray

    def _cheapest_step(self, pack: Packing, t: int, j: int, score: np.ndarray) -> tuple[int, int] | None:
        step = super()._cheapest_step(pack, t, j, score)
        return None if step is None or self.protected[step[0]] else step


class Slurmplan(Policy):
    """Lowest due time first (see the module docstring); one whole column per job."""

    objective: ClassVar[str] = "slurmplan"
    TYPE_BLIND: ClassVar[bool] = False
    PARAMS: ClassVar = PARAMS

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        # Per job id: its time alone on its fastest GPU, from the first round it was seen (expected remaining +
        # time held so far, which is exact for a job seen before it ran and an upper bound after a restart of the
        # daemon, so the guard may come late for such a job, never early). Only read by ``stretch_guard``.
        self._alone_s: dict = {}
        self._blocked = np.zeros(0, dtype=bool)  # GPU types reserved this round (see _select)
        self._pushed: dict = {}  # job id -> when another job's change last pushed it off its GPUs (protect_pushed)
        self._seen: dict = {}  # job id -> the last round it was in the problem (``_forget``)

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        p = self.params
        index, prior = learned_priors(problem, p["prior_floor_s"], p["learn_lengths"])
        est, source = expected_remaining_s(problem, index)  # to order by; the changes are priced with ``prior``
        running = self._running(problem)
        sla_floor = sla_floors(problem) if p["sla"] else np.zeros(problem.num_jobs)
        # ordering, with the stretch guard: on a share of a busy cluster (who runs), alone (who gets fast GPUs)
        stretch, plain = projected_stretch(problem, est, self._alone_s, p["guard_ahead_s"])
        cap = p["stretch_guard"]
        guarded = (stretch >= cap) if cap > 0 else np.zeros(problem.num_jobs, bool)
        fast_first = np.where((plain >= cap) & (cap > 0), plain, 0.0)
        floors, catch = self._floors(problem, sla_floor, running)
        soft = below_running(problem, guarded, stretch, running, p)
        guarded &= ~soft
        queue = queue_order(problem, est, floors, guarded, stretch, running, p, soft)
        # selection, then matching and sizing, which change a running job only where that pays for itself
        pays = paying_columns(problem, p["move_pay"], prior, floors > 0)
        pack, floors = self._select(problem, queue, floors, catch, guarded, running, pays)
        if p["match_types"]:
            match_types(problem, pack, floors, est, fast_first, self._blocked, p, pays)
        if p["grow"] and (not p["scale_up"] or p["grow_first"]):
            grow(problem, pack, queue.order, pays)
        if p["scale_up"]:
            climb_idle(problem, pack, est, p["climb_by"], p["climb_floor_s"], pays)
        # do no harm: every change to a running job must pay its full restart cost
        cannot_wait = (floors > 0) | queue.overdue | queue.urgent
        choose = lambda j, floor: self._choices(problem, j, floor)  # noqa: E731
        left = est if index is prior else expected_remaining_s(problem, prior)[0]
        shielded = self._shielded(problem, running)
        moves = guard_moves(
            problem, pack, queue, left, cannot_wait, p["move_pay"], prior, choose, p["stop_gang"], shielded
        )
        self._remember_pushed(problem, pack, running, moves)
        self._forget(problem)
        notes = self._notes(problem, pack, queue, est, source, floors, guarded, stretch, running, moves)
        x = pack.x()
        unmet = int(((sla_floor > 0) & ((x * problem.throughput).sum(axis=1) < sla_floor - 1e-9)).sum())
        alloc = self.result(problem, x, float((pack.col >= 0).sum()), f"sla-unmet:{unmet}" if unmet else "optimal")
        return Allocation(alloc.job_ids, alloc.cells, alloc.x, alloc.policy, alloc.objective, alloc.status, notes)

    @property
    def round_at_arrival(self) -> bool:
        """``arrival_round``: the mechanism opens a round when a job arrives between rounds on free GPUs and nobody
        else waits (``mechanism.engine.arrival_round``)."""
        return bool(self.params["arrival_round"])

    def between_rounds(self, problem: AllocationProblem, x: np.ndarray, free: np.ndarray) -> np.ndarray:
        """Between rounds (``mechanism.engine.replay``): with ``fill_freed``, GPUs freed since the round also go
        to the waiting jobs that never ran, in due order (``flagship_fill.py``); else the arrivals' rows only."""
        if not self.params["fill_freed"]:
            return x
        return freed_rows(problem, x, free, self.params["prior_floor_s"], self.params["length_weight"])

    # ------------------------------------------------------------------------------------------------ steps

    def _shielded(self, problem: AllocationProblem, running: np.ndarray) -> np.ndarray | None:
        """``protect_pushed``: the running jobs whose last change, less than ``hold_s`` ago, was a push by another
        job's change; None when the rule is off."""
        if not self.params["protect_pushed"]:
            return None
        now = _now(problem)
        hold = self.params["hold_s"]
        return running & np.array([now - self._pushed.get(i, -np.inf) < hold for i in problem.job_ids], dtype=bool)

    def _remember_pushed(self, problem: AllocationProblem, pack: Packing, running: np.ndarray, moves: Guarded) -> None:
        """Record when this round's changes pushed running jobs off their GPUs (the guard's unpriced changes) and
        forget those changed by their own decision; only with ``protect_pushed``."""
        if not self.params["protect_pushed"]:
            return
        cur = np.asarray(problem.current if problem.current is not None else np.full(problem.num_jobs, -1), int)
        for j in np.flatnonzero(running & (pack.col != cur)).tolist():
            if j in moves.unpriced:
                self._pushed[problem.job_ids[j]] = _now(problem)
            else:
                self._pushed.pop(problem.job_ids[j], None)

    def _forget(self, problem: AllocationProblem) -> None:
        """Drop what is remembered of jobs that left (issue 23, seventeenth session: ``_pushed`` and ``_alone_s``
        kept every job a daemon ever saw): a push older than ``hold_s`` shields nothing, and a job out of the
        problem for ``FORGET_S`` has finished or been cancelled. Neither changes a decision (a push that old reads
        as none; a job back after a day gets its time alone anew, as after a daemon restart)."""
        now = _now(problem)
        seen = self._seen
        seen.update(dict.fromkeys(problem.job_ids, now))
        hold = self.params["hold_s"]
        for i in [i for i, t in self._pushed.items() if now - t >= hold]:
            del self._pushed[i]
        gone = [i for i, t in seen.items() if now - t > FORGET_S]
        for i in gone:
            del seen[i]
            self._alone_s.pop(i, None)
            self._pushed.pop(i, None)

    def _floors(
        self, problem: AllocationProblem, floors: np.ndarray, running: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """SLA floors (raised to a deadline's rate with ``deadline_floor``) and the catch-up floors."""
        n = problem.num_jobs
        known = known_steps(problem)
        waited = np.maximum(0.0, problem.column("time_since_start") - problem.column("attained_time"))
        catch = floors
        if self.params["sla_catch_up"]:  # a guaranteed job that waited takes a column that makes up the wait
            catch = catch_up_floors(floors, problem.column("steps_remaining"), known, waited, running)
        if self.params["deadline_floor"]:  # a job with a deadline ahead is sized and protected as guaranteed
            cur = np.where(running, np.asarray(problem.current if problem.current is not None else np.zeros(n), int), 0)
            rate = np.where(running, np.asarray(problem.throughput, dtype=float)[np.arange(n), cur], 0.0)
            ref = reference_throughput(problem)
            dl = problem.column("deadline")
            floors = deadline_floors(floors, problem.column("steps_remaining"), known, dl, rate, running, ref)
        return floors, catch

    def _select(
        self,
        problem: AllocationProblem,
        queue: Queue,
        floors: np.ndarray,
        catch: np.ndarray,
        guarded: np.ndarray,
        running: np.ndarray,
        pays: np.ndarray | None = None,
    ) -> tuple[Packing, np.ndarray]:
        """Who runs: in queue order, each job its first column with room (a running job within ``hold_s`` keeps
        its own), else Crius's search (``search_depth``). A job past its guard or its wait bound that does not
        fit reserves the GPU types it could use, so that no job after it starts there (backfill alone starves a
        gang job behind one-GPU jobs; a job already running there keeps its GPUs). Returns the packing and the
        floors after the guaranteed jobs' catch-up. With ``pays`` (restart costs), a running job's first choice is its
        own column unless a move pays for itself."""
        pack = Packing.empty(problem)
        # The search may shrink or move a running job to seat a waiting one, as Crius does; the guard then keeps
        # that change only where it pays (issue 23: protecting running jobs from it left new and stopped jobs
        # waiting off GPUs, 0.2-0.3 h per job on the 1,000-job LLM trace, 1.10x crius's avg JCT)
        search, score = self._search(problem, floors)
        hold = self.params["hold_s"]
        blocked = np.zeros(len(pack.free), dtype=bool)
        any_blocked = False  # ``blocked.any()``, kept as it changes (asked once per job)
        first = (guarded | queue.overdue).tolist()
        run, current = running.tolist(), (np.asarray(problem.current).tolist() if problem.current is not None else None)
        thr = _columns_of(problem)[0]
        caught = False
        for j in queue.order.tolist():
            if not caught and floors[j] <= 0:  # every guaranteed job placed at its SLA: now make up waits
                choose = lambda k, floor: self._choices(problem, k, floor)  # noqa: E731
                floors, caught = catch_up(problem, pack, queue.order, floors, catch, choose), True
            cur = current[j] if run[j] else -1
            if any_blocked and not first[j]:
                choices = self._paying_choices(problem, j, floors[j], pays if run[j] else None)
                fit = [c for c in choices if pack.fits(j, c)]
                fit = [c for c in fit if c == cur or pack.cell_type[c] < 0 or not blocked[pack.cell_type[c]]]
                if fit:
                    pack.assign(j, cur if hold > 0 and cur in fit else self._stay_or_move(problem, j, fit))
                continue
            # ``cur in choices and pack.fits(j, cur)`` without the list: a job's choices are all its columns with
            # a throughput above 0 (in some order), less the moves that do not pay; the search (most waiting jobs
            # of a busy round) reads no list either (issue 27: building them was 0.8 million ``fits`` calls on the
            # site history's first day, and in the twenty-second session 180,000 lists, most read for this alone)
            if hold > 0 and cur >= 0 and thr[j, cur] > 0 and (pays is None or pays[j, cur]) and pack.fits(j, cur):
                pack.assign(j, cur)
                continue
            choices = None
            if search is not None and floors[j] <= 0:
                search._place(pack, j, score)
            else:
                choices = self._paying_choices(problem, j, floors[j], pays if run[j] else None)
                if fit := [c for c in choices if pack.fits(j, c)]:
                    pack.assign(j, self._stay_or_move(problem, j, fit))
            if first[j] and pack.col[j] < 0:
                if choices is None:
                    choices = self._paying_choices(problem, j, floors[j], pays if run[j] else None)
                size = problem.cells[choices[0]].gpus if choices else 0
                for c in choices:
                    if problem.cells[c].gpus == size and pack.cell_type[c] >= 0:
                        blocked[pack.cell_type[c]] = any_blocked = True
        self._blocked = blocked
        if not caught:
            choose = lambda k, floor: self._choices(problem, k, floor)  # noqa: E731
            floors = catch_up(problem, pack, queue.order, floors, catch, choose)
        return pack, floors

    def _search(self, problem: AllocationProblem, floors: np.ndarray) -> tuple[_Search | None, np.ndarray | None]:
        """Crius's placement search for jobs that do not fit (never moving a guaranteed job), and its scores."""
        if self.params["search_depth"] <= 0:
            return None, None
        depth = {"search_depth": self.params["search_depth"], "scale_up": False}
        search = _Search(PolicyConfig(name="crius", objective="crius", params=depth))
        search.protected = floors > 0
        score = np.asarray(problem.throughput, dtype=float) / reference_throughput(problem)[:, None]
        return search, score

    def _notes(self, problem, pack, queue: Queue, est, source, floors, guarded, stretch, running, moves: Guarded):
        """Each job's queue note, with what the move pricing decided for a running job."""
        n = problem.num_jobs
        rank = np.empty(n, dtype=int)
        rank[queue.order] = np.arange(n)
        hold = self.params["hold_s"]
        lead = np.maximum(queue.due - problem.column("submit_time"), 0.0) + hold  # running: may stay hold_s later
        out = queue_notes(
            problem, pack, rank, est, source, lead, queue.waited, queue.overdue, floors, queue.urgent, guarded,
            stretch, self.params,
        )  # fmt: skip
        for j in np.flatnonzero(queue.scale != 1.0):  # fairshare (issue 26): the account's weight moved its due time
            out[j] += f"; account {problem.accounts[j]}'s fairshare weight {queue.scale[j]:.2f}x the mean"
        for j, why in moves.undone.items():
            out[j] += f"; stays where it runs: a change {why}"
        for j, why in moves.kept.items():
            out[j] += f"; changed: {why}"
        for j, why in moves.unpriced.items():
            out[j] += f"; changed, {why}"
        return tuple(out)

    # ------------------------------------------------------------------------------------------------ pieces

    @staticmethod
    def _running(problem: AllocationProblem) -> np.ndarray:
        if problem.current is None:
            return np.zeros(problem.num_jobs, dtype=bool)
        return np.asarray(problem.current, dtype=int) >= 0

    @staticmethod
    def _choices(problem: AllocationProblem, j: int, floor: float) -> list[int]:
        """Usable columns of job j, best first: (for a guaranteed job) those that give its SLA, then its own
        size (the requested GPU count) before other sizes, fastest first."""
        thr, gpus, seen = _columns_of(problem)  # asked twice per job per round (issue 27: 4 % of the flagship's time)
        hit = seen.get((j, floor))
        if hit is not None:
            return list(hit)
        if floor == 0:  # most jobs: every job's answer from one sort (``_floorless``)
            out = _floorless(problem, thr, gpus)[j].tolist()
            seen[(j, floor)] = tuple(out)
            return out
        row = thr[j]
        usable = np.nonzero(row > 0)[0]
        req = -1 if problem.requested is None else int(problem.requested[j])
        # other sizes after the requested one; not for a guaranteed job catching up on its wait (infinite floor)
        sized = req >= 0 and not math.isinf(floor)
        other = gpus[usable] != gpus[req] if sized else np.zeros(usable.size, dtype=bool)
        below = row[usable] < floor - 1e-12 if floor > 0 else np.zeros(usable.size, dtype=bool)
        out = usable[np.lexsort((-row[usable], other, below))].tolist()
        seen[(j, floor)] = tuple(out)
        return out

    def _paying_choices(self, problem: AllocationProblem, j: int, floor: float, pays: np.ndarray | None) -> list[int]:
        """``_choices``, less the columns where ``pays`` (a running job's moves that pay their restart) is False."""
        choices = self._choices(problem, j, floor)
        return choices if pays is None else [c for c in choices if pays[j, c]]

    def _stay_or_move(self, problem: AllocationProblem, j: int, fit: list[int]) -> int:
        """The fastest fitting column, unless the job runs in a fitting one that is nearly as fast."""
        cur = -1 if problem.current is None else int(problem.current[j])
        best = fit[0]
        if cur >= 0 and cur in fit and cur != best:
            thr = problem.throughput[j]
            if thr[best] <= thr[cur] * (1.0 + self.params["move_gain"]):
                return cur
        return best


class _LastColumns:
    """``(problem, throughput as floats, each column's GPU count, the choices found)`` of the last ``_columns_of``."""

    value: tuple[AllocationProblem, np.ndarray, np.ndarray, dict] | None = None


_last_columns = _LastColumns()


def _columns_of(problem: AllocationProblem) -> tuple[np.ndarray, np.ndarray, dict[tuple[int, float], tuple]]:
    """The problem's throughput as floats, its columns' GPU counts and ``_choices``'s answers so far (by job and
    floor; half the calls of a round repeat one), kept for the round's many ``_choices`` calls: a pure memo keyed
    by the problem's identity (it holds the problem; the arrays are only read, the answers handed out as copies)."""
    last = _last_columns.value  # read once: another thread may replace it, never change it
    if last is not None and last[0] is problem:
        return last[1], last[2], last[3]
    thr = np.asarray(problem.throughput, dtype=float)
    gpus = np.array([c.gpus for c in problem.cells], dtype=np.int64)
    _last_columns.value = (problem, thr, gpus, {})
    return thr, gpus, _last_columns.value[3]


def _floorless(problem: AllocationProblem, thr: np.ndarray, gpus: np.ndarray) -> list[np.ndarray]:
    """Every job's ``_choices`` at floor 0, found with one sort of the whole throughput matrix: per row, the usable
    columns first, then those of the requested size before the others, then fastest first, ties by column (a
    stable sort over the whole row orders the usable columns as sorting them alone does); remembered per problem.
    Issue 27: the flagship asked 92,000 of these a site day one job at a time."""
    last = _last_floorless.value
    if last is not None and last[0] is problem:
        return last[1]
    usable = thr > 0
    if problem.requested is None:
        other = np.zeros(thr.shape, dtype=bool)
    else:
        req = np.asarray(problem.requested, dtype=np.int64)
        other = (gpus[None, :] != gpus[np.maximum(req, 0)][:, None]) & (req >= 0)[:, None]
    order = np.lexsort((-thr, other, ~usable), axis=-1)
    rows = [order[j, :k] for j, k in enumerate(usable.sum(axis=1).tolist())]
    _last_floorless.value = (problem, rows)
    return rows


class _LastFloorless:
    """``(problem, each job's choices at floor 0)`` of the last ``_floorless``."""

    value: tuple[AllocationProblem, list[np.ndarray]] | None = None


_last_floorless = _LastFloorless()


def _now(problem: AllocationProblem) -> float:
    """The round's time on the trace's clock: any job's submit time plus the time since it (0 with no jobs)."""
    if problem.num_jobs == 0:
        return 0.0
    return float(problem.column("submit_time")[0] + problem.column("time_since_start")[0])
