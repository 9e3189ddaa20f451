"""EasyScale's inter-job scheduler (easyscale.md section 4): accept scale-out proposals by speedup per GPU.

Each elastic data-parallel job proposes its top-K scale-outs in same-type increments from what it holds now
(from nothing: its configurations of any type); the cluster accepts the proposal with the highest speedup per
added GPU (ties: more GPUs) while free GPUs remain, the job re-proposes from its new size, and so on. A job
never changes GPU type once it holds GPUs (a Cell here has one type; EasyScale's mixed-type jobs would need a
mixed Cell). Jobs start from their ``current`` column when it is still valid, as elastic jobs keep their GPUs.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from slurmplan.domain import Allocation, AllocationProblem
from slurmplan.policy.base import Param, Policy, positive
from slurmplan.policy.greedy import Packing, climb, reference_throughput


class EasyScale(Policy):
    objective: ClassVar[str] = "easyscale"
    PARAMS: ClassVar = {
        "top_k": Param(int, 2, "a positive integer (proposals per job)", positive),
        "keep_current": Param(bool, True, "true (running jobs keep their GPUs) or false"),
    }

    def allocate(self, problem: AllocationProblem) -> Allocation:
        pack = Packing.empty(problem)
        if self.params["keep_current"] and problem.current is not None:
            for j, c in enumerate(np.asarray(problem.current, dtype=int)):
                if c >= 0 and pack.fits(j, int(c)):
                    pack.assign(j, int(c))
        score = problem.throughput / reference_throughput(problem)[:, None]
        top_k = self.params["top_k"]
        gpus, ctype = pack.cell_gpus, pack.cell_type

        def proposals(col: np.ndarray, ok: np.ndarray) -> np.ndarray:
            on = col >= 0
            cur = np.where(on, col, 0)
            same_type = ctype[None, :] == np.where(on, ctype[cur], -2)[:, None]
            bigger = gpus[None, :] > np.where(on, gpus[cur], 0.0)[:, None]
            ok &= np.where(on[:, None], same_type & bigger, True)
            # top-K by speedup per GPU among each job's proposals
            cur_s = np.where(on, score[np.arange(len(col)), cur], 0.0)
            added = gpus[None, :] - np.where(on, gpus[cur], 0.0)[:, None]
            per_gpu = np.where(ok, (score - cur_s[:, None]) / np.maximum(added, 1e-12), -np.inf)
            if per_gpu.shape[1] > top_k:
                kth = -np.partition(-per_gpu, top_k - 1, axis=1)[:, top_k - 1]
                ok &= per_gpu >= kth[:, None]
            return ok

        climb(pack, score, proposals)
        return self.result(problem, pack.x(), pack.value(score))
