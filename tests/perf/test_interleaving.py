"""Interleaving factors beyond 2 in the plan search: the thesis's Table 4.1 ran v = 3 at 76B and 530B."""

from __future__ import annotations

import numpy as np

from slurmplan.perf.hardware import get_gpu
from slurmplan.perf.models import get_model
from slurmplan.perf.plans import VIRTUAL_STAGES, enumerate_plans
from slurmplan.perf.published import load_published
from slurmplan.perf.search import search_plans


def test_the_search_enumerates_every_interleaving_whose_chunks_hold_whole_layers() -> None:
    model = get_model("megatron-76b")  # 60 layers
    space = enumerate_plans(model, 1024, 1792, 8)
    assert VIRTUAL_STAGES == (1, 2, 3, 4)
    assert set(np.unique(space.virtual_stages)) == {1, 2, 3}  # v 4 needs pp 3 or 15, which 1,024 GPUs rule out
    assert 4 in set(enumerate_plans(get_model("megatron-1t"), 3072, 3072, 8).virtual_stages)
    v = space.virtual_stages
    chunks_whole = model.layers % (space.pp * v) == 0
    assert np.all((v == 1) | ((space.pp > 1) & chunks_whole & (space.grad_accum % space.pp == 0)))
    # pp 4: 15 layers a stage, so v 3 (5 a chunk) is searched and v 2 and 4 are not.
    at_p4 = space.pp == 4
    assert set(np.unique(v[at_p4])) == {1, 3}


def test_the_papers_v3_plans_are_ranked_and_the_model_puts_them_first() -> None:
    rows = {r.id: r for r in load_published()}
    for rid in ("t41-76b", "t41-530b"):
        row = rows[rid]
        assert row.run.plan.virtual_stages == 3
        search = search_plans(row.model, row.run.gpu, row.gpus, row.global_batch, stack=row.run.stack)
        ranked = [search.space.plan(int(j)) for j in search.order[:3]]
        assert row.run.plan in ranked, (rid, [p.short() for p in ranked])


def test_more_interleaving_is_not_free_in_the_model() -> None:
    """v cuts the bubble to (p-1)/(m v) but multiplies the pipeline's transfers by v over fewer slots (thesis 4.2.2)."""
    model, gpu = get_model("megatron-76b"), get_gpu("a100-80g")
    search = search_plans(model, gpu, 1024, 1792, stack="megatron-2021")
    s = search.space
    pick = (s.tp == 8) & (s.pp == 4) & (s.micro_batch == 2) & s.checkpointing & (s.zero_stage == 0) & ~s.offload
    by_v = {int(s.virtual_stages[j]): j for j in np.flatnonzero(pick)}
    assert set(by_v) == {1, 3}
    t = search.timing
    assert t.bubble[by_v[3]] < t.bubble[by_v[1]] / 2.9 and t.comm_pp[by_v[3]] > 2.5 * t.comm_pp[by_v[1]]
