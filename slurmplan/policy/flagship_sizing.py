"""How the flagship sizes elastic jobs once it has chosen who runs: idle GPUs by marginal gain, shortest first.

Why (issue 17, LLM trace on the Crius cluster, sim/RESULTS.md section 5 "third pass"): with Crius's climb (idle
GPUs to the job gaining most *relative* speed per added GPU, whatever its length) most of the excess over the
elastic bound is time spent in a slower configuration than the job's best, and it sits in the longest jobs,
which are grown into idle GPUs, then shrunk or moved again a round later when new jobs arrive (restarts at 78 s
each, plus time off GPUs). For the *average* JCT a GPU is worth most on a job that will finish soon: it frees
its GPUs for everyone after it (SRPT; with sublinear speedups heSRPT gives short jobs the larger shares). So the
climb's gain per GPU is weighted by ``1 / max(expected remaining, floor)``: the same water filling over all
jobs at once, marginal speed per GPU, but a job with 10 min left outbids one with 10 h left at equal slopes.
"""

from __future__ import annotations

import numpy as np

from slurmplan.policy.greedy import Packing, climb


def climb_weights(est_s: np.ndarray, floor_s: float, by: str) -> np.ndarray:
    """Per job, the factor on its gains: ``short``: 1 / max(remaining, floor_s); ``time_saved``: max(remaining,
    floor_s) (a relative speed gain g saves about g x remaining seconds); normalised so the largest is 1.
    A job with unknown length (inf) counts as the longest known one."""
    finite = est_s[np.isfinite(est_s)]
    top = float(finite.max()) if finite.size else floor_s
    left = np.maximum(np.where(np.isfinite(est_s), est_s, top), floor_s)
    w = 1.0 / left if by == "short" else left
    return w / w.max() if w.size and w.max() > 0 else np.ones_like(w)


def weighted_climb(pack: Packing, score: np.ndarray, est_s: np.ndarray, floor_s: float, by: str) -> int:
    """Crius's climb (idle GPUs by best gain per added GPU) with each job's gains weighted by its remaining
    time (see ``climb_weights``). Returns the number of moves made."""
    return climb(pack, score * climb_weights(est_s, floor_s, by)[:, None])
