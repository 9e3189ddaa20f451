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
columns (gang jobs), the jobs are matched greedily by the same values instead (the guarded first).

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
Not modelled: account weights (the earlier LP flagship's water filling); sites that need them use
``hierarchical``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem, JobClass
from slurmplan.policy.base import Param, Policy, PolicyConfig, non_negative, positive
from slurmplan.policy.crius import Crius
from slurmplan.policy.flagship_sizing import catch_up_floors, deadline_floors, weighted_climb
from slurmplan.policy.greedy import Packing, climb, reference_throughput

INF = math.inf


def sla_floors(problem: AllocationProblem) -> np.ndarray:
    """Throughput floors of guaranteed jobs (0 for best-effort jobs or when no SLA is given)."""
    sla = problem.column("sla_throughput")
    if problem.job_class is None:  # no class given: nobody is guaranteed
        return np.zeros(problem.num_jobs)
    guaranteed = np.array([c is JobClass.GUARANTEED for c in problem.job_class])
    return np.where(guaranteed, sla, 0.0)


def expected_remaining_s(problem: AllocationProblem) -> tuple[np.ndarray, list[str]]:
    """Per job: expected seconds left on its fastest column, and where that figure comes from (for the note)."""
    thr = np.asarray(problem.throughput, dtype=float)
    best = thr.max(axis=1, initial=0.0)
    steps = problem.column("steps_remaining")
    known = np.ones(problem.num_jobs, bool) if problem.steps_known is None else np.asarray(problem.steps_known, bool)
    by_steps = np.where(best > 0, steps / np.where(best > 0, best, 1.0), INF)
    limit = np.full(problem.num_jobs, INF) if problem.time_limit_left is None else problem.column("time_limit_left")
    attained = problem.column("attained_time")
    est = np.where(known, by_steps, np.where(np.isfinite(limit), limit, attained))
    source = [
        "steps" if k else ("time limit" if np.isfinite(t) else "run so far") for k, t in zip(known, limit, strict=True)
    ]
    return est, source


def transport(rows: np.ndarray, cols: np.ndarray, value: np.ndarray, pack: Packing, chosen: np.ndarray):
    """max sum value*y  s.t. each chosen job's shares sum to 1, each type's GPUs within its free capacity."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    nv = rows.size
    job_pos = {j: i for i, j in enumerate(chosen.tolist())}
    a_eq = coo_matrix((np.ones(nv), ([job_pos[j] for j in rows.tolist()], np.arange(nv))), shape=(chosen.size, nv))
    types = pack.cell_type[cols]
    cap = pack.free.copy()
    for j in chosen.tolist():
        cap[pack.cell_type[pack.col[j]]] += pack.cell_gpus[pack.col[j]]
    a_ub = coo_matrix((pack.cell_gpus[cols], (types, np.arange(nv))), shape=(cap.size, nv))
    res = linprog(-value, A_ub=a_ub.tocsr(), b_ub=cap + 1e-9, A_eq=a_eq.tocsr(), b_eq=np.ones(chosen.size),
                  bounds=(0.0, 1.0), method="highs")  # fmt: skip
    return res.x if res.status == 0 else None


class _Search(Crius):
    """Crius's placement search (best column of any size, making room by shrinking or moving up to
    ``search_depth`` placed jobs) that never shrinks or moves a guaranteed job: it stops searching instead (letting
    it move one as long as it keeps its SLA measured worse on section 5's LLM trace: 5 deadline misses, not 3)."""

    protected: np.ndarray

    def _cheapest_step(self, pack: Packing, t: int, j: int, score: np.ndarray) -> tuple[int, int] | None:
        step = super()._cheapest_step(pack, t, j, score)
        return None if step is None or self.protected[step[0]] else step


def _hm(seconds: float) -> str:
    """Seconds as an admin reads them: '40 min', '2.5 h', '3 d'."""
    if not math.isfinite(seconds):
        return "unbounded"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


class Slurmplan(Policy):
    """Lowest due time first (see the module docstring); one whole column per job."""

    objective: ClassVar[str] = "slurmplan"
    TYPE_BLIND: ClassVar[bool] = False
    PARAMS: ClassVar = {
        "length_weight": Param(
            float, 1.0, "a number >= 0: seconds of due time per second of expected remaining work", non_negative
        ),
        "max_wait_s": Param(
            float, 7 * 86400.0, "a positive number of seconds: a job that waited this long goes first", positive
        ),
        "stay_bonus": Param(
            float,
            0.0,
            "a number >= 0: a running job's current column is worth this much more relative speed "
            "when re-placing (a restart's cost as a fraction of a round)",
            non_negative,
        ),
        "move_gain": Param(
            float,
            0.0,
            "a number >= 0: a running job changes column only if another is this fraction faster",
            non_negative,
        ),
        "match_types": Param(bool, True, "true (place the chosen jobs where they are relatively fastest) or false"),
        "short_bias_s": Param(
            float, 0.0, "a number >= 0 of seconds: weight + this / time left when placing on fast GPUs", non_negative
        ),
        "stretch_weight": Param(
            float,
            0.0,
            "a number >= 0: weight of (time in the system / time left) when placing on fast GPUs",
            non_negative,
        ),
        "hold_s": Param(
            float,
            0.0,
            "a number >= 0 of seconds: a running job keeps its column, and is displaced only by a job due this "
            "much earlier (hysteresis against restarts; 0: re-decide every round)",
            non_negative,
        ),
        "search_depth": Param(
            int,
            0,
            "an integer >= 0: a job that does not fit may shrink or move up to this many placed jobs of the "
            "type it wants (Crius's scaling search; 0: backfill only)",
            non_negative,
        ),
        "grow": Param(bool, True, "true (hand leftover GPUs to elastic jobs) or false"),
        "scale_up": Param(
            bool,
            False,
            "true (leftover GPUs go to the job gaining most speed per added GPU, Crius's climb) or false "
            "(in due order, same type)",
        ),
        "grow_first": Param(
            bool,
            False,
            "true (with scale_up: first grow jobs within their type in due order, then climb with what is "
            "left) or false (climb only)",
        ),
        "climb_by": Param(
            str,
            "speed",
            "'speed' (Crius's climb: relative speed gained per added GPU), 'short' (that gain / expected "
            "remaining time: shortest first) or 'time_saved' (hours of the job's remaining time saved per GPU)",
            lambda v: v in ("speed", "short", "time_saved"),
        ),
        "climb_floor_s": Param(
            float,
            600.0,
            "a positive number of seconds: expected remaining times below this count as this in climb_by",
            positive,
        ),
        "sla_catch_up": Param(
            bool,
            False,
            "true (a guaranteed job that waited for a round starts in a column fast enough to still meet its "
            "SLA) or false (a column at its SLA rate)",
        ),
        "deadline_floor": Param(
            bool,
            False,
            "true (a job with a deadline ahead is placed and protected like a guaranteed job, at the rate that "
            "meets its deadline or its fastest column when its length is unknown) or false",
        ),
        "sla": Param(bool, True, "true (serve guaranteed jobs first, at their SLA) or false"),
        "stretch_guard": Param(
            float,
            0.0,
            "a number >= 0: a job whose finish-time ratio (time in the system + time left, over its time alone on "
            "its fastest GPU) would pass this goes first, on its fastest GPU (0: off)",
            non_negative,
        ),
        "guard_ahead_s": Param(
            float,
            360.0,
            "a positive number of seconds: how far ahead the stretch guard looks (a round: the daemon's round_s)",
            positive,
        ),
    }

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        # Per job id: its time alone on its fastest GPU, from the first round it was seen (expected remaining +
        # time held so far, which is exact for a job seen before it ran and an upper bound after a restart of the
        # daemon, so the guard may come late for such a job, never early). Only read by ``stretch_guard``.
        self._alone_s: dict = {}
        self._blocked = np.zeros(0, dtype=bool)  # GPU types reserved this round (see allocate)

    def allocate(self, problem: AllocationProblem) -> Allocation:
        if problem.num_jobs == 0:
            return self.empty(problem)
        n = problem.num_jobs
        est, source = expected_remaining_s(problem)
        submit = problem.column("submit_time")
        # Time spent waiting (since submission, less the time it held GPUs): what the wait bound limits.
        waited = np.maximum(0.0, problem.column("time_since_start") - problem.column("attained_time"))
        due = submit + self.params["length_weight"] * np.minimum(est, 1e12)  # 1e12: finite for lexsort
        # A deadline that can still be met pulls the due time forward to the job's latest start (EDF).
        now = submit + problem.column("time_since_start")
        latest = now + problem.column("deadline") - est
        urgent = np.isfinite(latest) & (latest >= now) & (latest < due)
        due = np.where(urgent, latest, due)
        floors = sla_floors(problem) if self.params["sla"] else np.zeros(n)
        # Stretch guard: on a share of a busy cluster (who runs), and alone (who gets the fast GPUs among those).
        stretch, plain = self._projected_stretch(problem, est)
        cap = self.params["stretch_guard"]
        guarded = (stretch >= cap) if cap > 0 else np.zeros(n, bool)
        fast_first = np.where((plain >= cap) & (cap > 0), plain, 0.0)
        running = self._running(problem)
        sla_floor = floors
        catch = floors
        if self.params["sla_catch_up"]:  # a guaranteed job that waited takes a column that makes up the wait
            known = np.ones(n, bool) if problem.steps_known is None else np.asarray(problem.steps_known, bool)
            catch = catch_up_floors(floors, problem.column("steps_remaining"), known, waited, running)
        if self.params["deadline_floor"]:  # a job with a deadline ahead is sized and protected as guaranteed
            known = np.ones(n, bool) if problem.steps_known is None else np.asarray(problem.steps_known, bool)
            cur = np.where(running, np.asarray(problem.current if problem.current is not None else np.zeros(n), int), 0)
            rate = np.where(running, np.asarray(problem.throughput, dtype=float)[np.arange(n), cur], 0.0)
            dl = problem.column("deadline")
            ref = reference_throughput(problem)
            floors = deadline_floors(floors, problem.column("steps_remaining"), known, dl, rate, running, ref)
        overdue = (waited >= self.params["max_wait_s"]) & ~running
        hold = self.params["hold_s"]
        # Hysteresis: a running job counts hold_s earlier, so only a job due that much sooner displaces it.
        key = due - hold * running if hold > 0 else due
        # Order: overdue jobs (longest wait first), guaranteed jobs, jobs at their stretch guard (most stretched
        # first), then everyone by due time.
        order = np.lexsort(
            (
                np.arange(n),
                key,
                np.where(guarded, -stretch, 0.0),
                ~guarded,
                ~(floors > 0),
                np.where(overdue, -waited, 0.0),
                ~overdue,
            )
        )
        pack = Packing.empty(problem)
        search = None
        if self.params["search_depth"] > 0:
            depth = {"search_depth": self.params["search_depth"], "scale_up": False}
            search = _Search(PolicyConfig(name="crius", objective="crius", params=depth))
            search.protected = floors > 0
            score = np.asarray(problem.throughput, dtype=float) / reference_throughput(problem)[:, None]
        # Reservation: a job past its guard or its wait bound that does not fit blocks the GPU types it could use,
        # so that no job after it starts there and the GPUs free up for it (backfill alone starves a gang job
        # behind one-GPU jobs; a job already running there keeps its GPUs).
        blocked = np.zeros(len(pack.free), dtype=bool)
        first = guarded | overdue
        caught = False
        for j in order.tolist():
            if not caught and floors[j] <= 0:  # every guaranteed job placed at its SLA: now make up waits
                floors, caught = self._catch_up(problem, pack, order, floors, catch), True
            choices = self._choices(problem, j, floors[j])
            fit = [c for c in choices if pack.fits(j, c)]
            cur = int(problem.current[j]) if running[j] else -1
            if blocked.any() and not first[j]:
                fit = [c for c in fit if c == cur or pack.cell_type[c] < 0 or not blocked[pack.cell_type[c]]]
                if fit:
                    pack.assign(j, cur if hold > 0 and cur in fit else self._stay_or_move(problem, j, fit))
                continue
            if hold > 0 and cur in fit:
                pack.assign(j, cur)
            elif search is not None and floors[j] <= 0:
                search._place(pack, j, score)
            elif fit:
                pack.assign(j, self._stay_or_move(problem, j, fit))
            if first[j] and pack.col[j] < 0:
                size = problem.cells[choices[0]].gpus if choices else 0
                for c in choices:
                    if problem.cells[c].gpus == size and pack.cell_type[c] >= 0:
                        blocked[pack.cell_type[c]] = True
        self._blocked = blocked
        if not caught:
            floors = self._catch_up(problem, pack, order, floors, catch)
        if self.params["match_types"]:
            self._match_types(problem, pack, floors, est, fast_first)
        if self.params["grow"] and (not self.params["scale_up"] or self.params["grow_first"]):
            self._grow(problem, pack, order)
        if self.params["scale_up"]:
            self._climb(problem, pack, est)
        rank = np.empty(n, dtype=int)
        rank[order] = np.arange(n)
        lead = np.maximum(due - submit, 0.0) + hold  # a running job may stay ahead while due hold_s later
        notes = self._notes(problem, pack, rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch)
        x = pack.x()
        unmet = int(((sla_floor > 0) & ((x * problem.throughput).sum(axis=1) < sla_floor - 1e-9)).sum())
        alloc = self.result(problem, x, float((pack.col >= 0).sum()), f"sla-unmet:{unmet}" if unmet else "optimal")
        return Allocation(alloc.job_ids, alloc.cells, alloc.x, alloc.policy, alloc.objective, alloc.status, notes)

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
        row = np.asarray(problem.throughput[j], dtype=float)
        usable = np.nonzero(row > 0)[0]
        req = -1 if problem.requested is None else int(problem.requested[j])
        size = problem.cells[req].gpus if req >= 0 else None
        other = np.array([size is not None and problem.cells[c].gpus != size for c in usable], dtype=bool)
        if math.isinf(floor):  # a guaranteed job catching up on its wait (sla_catch_up): fastest of any size
            other[:] = False
        below = row[usable] < floor - 1e-12 if floor > 0 else np.zeros(usable.size, dtype=bool)
        return usable[np.lexsort((-row[usable], other, below))].tolist()

    def _stay_or_move(self, problem: AllocationProblem, j: int, fit: list[int]) -> int:
        """The fastest fitting column, unless the job runs in a fitting one that is nearly as fast."""
        cur = -1 if problem.current is None else int(problem.current[j])
        best = fit[0]
        if cur >= 0 and cur in fit and cur != best:
            thr = problem.throughput[j]
            if thr[best] <= thr[cur] * (1.0 + self.params["move_gain"]):
                return cur
        return best

    def _projected_stretch(self, problem: AllocationProblem, est: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per job: its finish-time ratio if it ran on its fastest GPU after the next round, (time in the system +
        a round + time left) / time alone on its fastest GPU, against its share of the cluster (first) and alone
        (second). For a job whose length is unknown (no steps told): time in the system / time served."""
        known = np.ones(problem.num_jobs, bool) if problem.steps_known is None else np.asarray(problem.steps_known)
        age = problem.column("time_since_start")
        attained = problem.column("attained_time")
        ids = problem.job_ids
        alone = np.array([self._alone_s.setdefault(i, e + a) for i, e, a in zip(ids, est, attained, strict=True)])
        if len(self._alone_s) > 4 * max(problem.num_jobs, 1024):  # forget jobs that left
            live = set(ids)
            self._alone_s = {i: v for i, v in self._alone_s.items() if i in live}
        # As finish-time fairness counts it (Gavel, sim/metrics.py): against the job alone on its 1/n share of
        # the cluster when n jobs share it and its GPUs exceed that share (a busy cluster stretches everyone).
        total = max(float(sum(problem.capacity.values())), 1.0)
        gpus = np.ones(problem.num_jobs)
        if problem.requested is not None:
            req = np.asarray(problem.requested, dtype=int)
            gpus = np.array([problem.cells[r].gpus if r >= 0 else 1 for r in req.tolist()], dtype=float)
        ok = known & np.isfinite(alone) & (alone > 0)
        # One round ahead: the ratio the job would have after one more round without progress, so that a short
        # job is moved before it passes the guard, not a round after.
        step = self.params["guard_ahead_s"]
        ahead = age + step + np.minimum(est, 1e12)
        # Unknown length: time in the system over time served, a round ahead (the ratio it would have if it
        # finished right after that round); a job left waiting passes the guard within rounds, as under LAS.
        unknown = (age + step) / (attained + step)
        plain = np.where(ok, ahead / np.where(ok, alone, 1.0), np.where(known, 1.0, unknown))
        return plain / np.maximum(1.0, gpus * problem.num_jobs / total), plain

    def _match_types(
        self, problem: AllocationProblem, pack: Packing, floors: np.ndarray, est: np.ndarray, guard: np.ndarray
    ) -> None:
        """Re-place the chosen jobs, same sizes, so that the sum of their speeds relative to their fastest
        type is largest (Gavel's heterogeneity lever: a Recommendation job is 2.3x faster on a P100 than on a
        V100, a ResNet-50 1.6x slower, so the P100 goes to the first). A transportation LP over the chosen jobs
        (integral for one-GPU jobs); a fractional answer is rounded greedily and kept only if it fits."""
        chosen = np.flatnonzero(pack.col >= 0)
        if chosen.size < 2:
            return
        thr = np.asarray(problem.throughput, dtype=float)
        best = thr.max(axis=1)
        # Fast GPUs go first to jobs already stretched the most: time in the system against time left (a job
        # 10 h in with 5 h to go weighs 1 + 2 x stretch_weight); this keeps the worst finish-time ratio low.
        age = problem.column("time_since_start")
        left = np.maximum(np.minimum(est, 1e12), 360.0)
        weight = 1.0 + (self.params["stretch_weight"] * age + self.params["short_bias_s"]) / left
        # A job at its stretch guard outweighs every unguarded one: it gets its fastest type; among guarded jobs the
        # same weights decide (shorter first: a short job on a slow GPU passes the guard within a round or two).
        weight = np.where(guard > 0, 1e3 * weight.max(initial=1.0) * weight, weight)
        rows, cols, vals = [], [], []
        for j in chosen.tolist():
            size = problem.cells[pack.col[j]].gpus
            floor = floors[j] if thr[j, pack.col[j]] >= floors[j] else 0.0  # never re-placed below its SLA
            here = pack.cell_type[pack.col[j]]
            for c in self._choices(problem, j, floors[j]):
                if pack.cell_type[c] >= 0 and self._blocked[pack.cell_type[c]] and pack.cell_type[c] != here:
                    continue  # reserved for a job past its guard
                if problem.cells[c].gpus == size and pack.cell_type[c] >= 0 and thr[j, c] >= floor:
                    rows.append(j)
                    cols.append(c)
                    # a move costs a restart: staying is worth stay_bonus of a round at full speed (ties: stay)
                    on = problem.current is not None and problem.current[j] == c
                    vals.append((thr[j, c] / best[j] + (self.params["stay_bonus"] if on else 0.0)) * weight[j])
                    vals[-1] += 1e-3 if on else 0.0
        if len(set(cols)) < 2:
            return
        rows_a, cols_a = np.array(rows), np.array(cols)
        x = transport(rows_a, cols_a, np.array(vals), pack, chosen)
        if x is None:
            return
        trial = pack.copy()
        for j in chosen.tolist():
            trial.release(j)
        # biggest shares first; a job whose share does not fit keeps trying its other columns, then its old one
        order = np.argsort(-x, kind="stable")
        placed = np.zeros(problem.num_jobs, dtype=bool)
        for k in order.tolist():
            j, c = int(rows_a[k]), int(cols_a[k])
            if not placed[j] and x[k] > 1e-6 and trial.fits(j, c):
                trial.assign(j, c)
                placed[j] = True
        for j in chosen.tolist():
            if not placed[j]:
                if not trial.fits(j, int(pack.col[j])):
                    trial = self._greedy_match(pack, chosen, rows_a, cols_a, np.array(vals))
                    if trial is None:
                        return  # no room either way: keep the selection's placement
                    break
                trial.assign(j, int(pack.col[j]))
        pack.col[:], pack.free[:] = trial.col, trial.free
        for (_, free), (_, tfree) in zip(pack.host, trial.host, strict=True):
            free[:] = tfree

    def _catch_up(self, problem, pack: Packing, order: np.ndarray, floors: np.ndarray, catch: np.ndarray) -> np.ndarray:
        """Guaranteed jobs that waited (``catch`` above their SLA floor), in order, move to the first column of
        ``_choices`` for the raised floor that has room and is faster than where they are, once every
        guaranteed job has its SLA column (so one job's catch-up never costs another's SLA). Returns the
        floors with those jobs' new speed as their floor (the matching keeps them that fast)."""
        out = floors.copy()
        thr = problem.throughput
        for j in order.tolist():
            if catch[j] <= floors[j]:
                continue
            now = thr[j, pack.col[j]] if pack.col[j] >= 0 else 0.0
            for c in self._choices(problem, j, catch[j]):
                if thr[j, c] > now and pack.fits(j, c):
                    pack.assign(j, c)
                    break
            if pack.col[j] >= 0:
                out[j] = max(out[j], thr[j, pack.col[j]])
        return out

    def _climb(self, problem: AllocationProblem, pack: Packing, est: np.ndarray) -> None:
        """Idle GPUs by gain per added GPU, weighted as ``climb_by`` says (flagship_sizing.py)."""
        score = np.asarray(problem.throughput, dtype=float) / reference_throughput(problem)[:, None]
        if self.params["climb_by"] == "speed":
            climb(pack, score)
        else:
            weighted_climb(pack, score, est, self.params["climb_floor_s"], self.params["climb_by"])

    @staticmethod
    def _greedy_match(pack: Packing, chosen: np.ndarray, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        """When the LP's shares do not round (gang jobs of several sizes): jobs by their best value (the guarded
        first), each to its best-valued column with room, else its old one; None if some job fits nowhere."""
        trial = pack.copy()
        for j in chosen.tolist():
            trial.release(j)
        best = {}
        for k in np.argsort(-vals, kind="stable").tolist():
            best.setdefault(int(rows[k]), []).append(int(cols[k]))
        for j in sorted(best, key=lambda j: -vals[rows == j].max()):
            c = next((c for c in best[j] if trial.fits(j, c)), int(pack.col[j]))
            if not trial.fits(j, c):
                return None
            trial.assign(j, c)
        for j in chosen.tolist():
            if j not in best:
                if not trial.fits(j, int(pack.col[j])):
                    return None
                trial.assign(j, int(pack.col[j]))
        return trial

    @staticmethod
    def _grow(problem: AllocationProblem, pack: Packing, order: np.ndarray) -> None:
        """Leftover GPUs: in due order, move a placed job to a larger column of its type if that is faster."""
        thr = problem.throughput
        for j in order.tolist():
            c = int(pack.col[j])
            if c < 0:
                continue
            t = problem.cells[c].gpu_type
            bigger = [
                k
                for k in np.nonzero(thr[j] > thr[j, c] * 1.05)[0].tolist()
                if problem.cells[k].gpu_type == t and problem.cells[k].gpus > problem.cells[c].gpus
            ]
            for k in sorted(bigger, key=lambda k: -thr[j, k]):
                if pack.fits(j, k):
                    pack.assign(j, k)
                    break

    def _notes(
        self, problem, pack, rank, est, source, lead, waited, overdue, floors, urgent, guarded, stretch
    ) -> tuple[str, ...]:
        """One admin-readable line per job: why it is where it is in the queue, and its wait bound."""
        out = []
        cap = self.params["max_wait_s"]
        unless = " unless past its stretch guard" if self.params["stretch_guard"] > 0 else ""
        for j in range(problem.num_jobs):
            if overdue[j]:
                why = f"first: waited {_hm(waited[j])}, over the {_hm(cap)} bound"
            elif urgent[j]:
                why = f"ahead to meet its deadline: {_hm(est[j])} left ({source[j]}), deadline first"
            elif floors[j] > 0:
                why = f"ahead as a guaranteed job; {_hm(est[j])} left ({source[j]})"
            else:
                why = f"queue place {rank[j] + 1}: {_hm(est[j])} left ({source[j]})"
            start = "" if pack.col[j] >= 0 else "; not this round"
            guard = ""
            if guarded[j] and not (overdue[j] or urgent[j] or floors[j] > 0):
                guard = (
                    f"; ahead of the due order, fastest GPU first: it would finish {stretch[j]:.1f}x its time "
                    f"alone, guard {self.params['stretch_guard']:.1f}x"
                )
            out.append(
                f"{why}; waited {_hm(waited[j])}, bound {_hm(cap)}; "
                f"no job submitted over {_hm(min(lead[j], cap))} after it can go ahead{unless}{guard}{start}"
            )
        return tuple(out)
