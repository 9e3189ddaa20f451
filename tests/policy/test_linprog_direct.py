"""The flagship's type-matching LP solved through scipy's HiGHS directly gives linprog's answer, bit for bit.

``flagship_match._transport_direct`` (``policy/linprog_direct.py``) skips ``linprog``'s Python but must end on the
very same vertex, or the flagship's decisions move (issue 27 allows no other change). Its reference is the old
path, ``_transport_linprog``: both solve random LPs of the transport's form, many with tied values (where another
solve order would pick another vertex of the same optimum), and must return the same bytes or both refuse.
"""

from __future__ import annotations

import numpy as np
import pytest

from slurmplan.policy import linprog_direct
from slurmplan.policy.flagship_match import _transport_direct, _transport_linprog

needs_direct = pytest.mark.skipif(not linprog_direct.available(), reason="not a scipy release checked (CHECKED)")


def _instance(rng: np.random.Generator, tied: bool) -> tuple:
    """A transport LP like the flagship's: jobs of 1-8 GPUs, each with a variable on 1-3 of 3 GPU types."""
    jobs, n_types = int(rng.integers(2, 60)), 3
    types, pos, gpus = [], [], []
    for j in range(jobs):
        size = int(rng.choice([1, 1, 2, 4, 8]))
        for t in sorted(rng.choice(n_types, size=int(rng.integers(1, n_types + 1)), replace=False).tolist()):
            types.append(t)
            pos.append(j)
            gpus.append(size)
    nv = len(types)
    values = rng.choice([0.5, 1.0, 1.0005], size=nv) if tied else rng.uniform(0.1, 3.0, size=nv)
    need = np.bincount(types, weights=gpus, minlength=n_types)
    cap = np.maximum(0, (need * rng.uniform(0.2, 0.9, size=n_types)).astype(np.int64))
    return np.array(types), np.array(pos), np.array(gpus), -values, cap, jobs


@needs_direct
@pytest.mark.parametrize("tied", [False, True])
def test_the_direct_solve_ends_on_linprogs_vertex(tied: bool) -> None:
    rng = np.random.default_rng(27)
    solved = refused = 0
    for _ in range(150):
        args = _instance(rng, tied)
        want, got = _transport_linprog(*args), _transport_direct(*args)
        if want is None:
            assert got is None
            refused += 1
            continue
        assert got is not None
        assert got.tobytes() == want.tobytes()
        solved += 1
    assert solved > 50  # the comparison covered real solves, not only refusals


@needs_direct
def test_one_instance_reused_solves_as_a_new_one_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``linprog_direct._solver`` hands out one HiGHS instance per thread (``passModel`` clears it): a run of LPs,
    tied and not, refused and not, one after another on it ends on the same bytes as on a new instance each."""
    rng = np.random.default_rng(2722)
    lps = [_instance(rng, tied=bool(k % 2)) for k in range(200)]
    made = []
    new = linprog_direct._h._Highs
    monkeypatch.setattr(linprog_direct._h, "_Highs", lambda: made.append(1) or new())
    linprog_direct._local.highs = None
    reused = [_transport_direct(*args) for args in lps]
    assert len(made) == 1 + sum(x is None for x in reused[:-1])  # a new one only after a refusal
    monkeypatch.setattr(linprog_direct, "_solver", new)
    fresh = [_transport_direct(*args) for args in lps]
    assert [x is None for x in reused] == [x is None for x in fresh]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(reused, fresh, strict=True) if a is not None)
    assert 50 < sum(x is not None for x in reused) < len(lps)  # solves and refusals in the run


@needs_direct
def test_an_infeasible_lp_is_refused_by_both() -> None:
    """Two one-GPU jobs, one GPU type with room for one: no answer either way."""
    args = (np.array([0, 0]), np.array([0, 1]), np.array([1, 1]), np.array([-1.0, -1.0]), np.array([1]), 2)
    assert _transport_linprog(*args) is None
    assert _transport_direct(*args) is None


def test_a_scipy_release_not_checked_goes_through_linprog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another release's wrapper may pass other options (another vertex on ties): it is not driven directly."""
    import scipy

    monkeypatch.setattr(scipy, "__version__", "9.99.0")
    assert not linprog_direct.available()
