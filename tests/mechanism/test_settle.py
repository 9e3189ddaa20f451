"""``engine.settle`` gives the states and actions that ``_next_state`` then ``plan_actions`` gave, on real runs.

``decide`` used to build every row's next state into a dict, then run ``job_actions`` for every row, most of which
(the steady rows: kept where they run, their comment already naming their configuration) answer "no action, the
same state". ``settle`` does both in one pass and skips ``job_actions`` for those rows (``kept_quietly``, issue
27). This runs LAS and the flagship on the first hours of a generated trace and, at every tick, compares the two
ways byte for byte (``repr`` of the actions in order and of every state, in order), and checks that the shortcut
was taken and that rows with actions (starts, holds, stops) were compared too. Every seventh step an "admin"
overwrites some running jobs' comments, so that kept jobs whose comment no longer names their configuration (which
``job_actions`` annotates again) are among the rows compared.
"""

from __future__ import annotations

import pytest

from slurmplan.mechanism import actions as actions_mod
from slurmplan.mechanism import engine
from slurmplan.mechanism.state import evolve

from .helpers import crius_llm_simulation, overwrite_comments_every


def _plain(ctx, assignments, states, new_round, now, stamp, config):
    """The two passes ``decide`` made before ``settle``."""
    decided = list(zip(ctx.jobs, assignments, strict=True))
    running = ctx.running.tolist()
    after = {
        a.job_id: engine._next_state(states[a.job_id], a, running[j], new_round) for j, a in enumerate(assignments)
    }
    for mj, a in ctx.excluded:
        decided.append((mj, a))
        after[a.job_id] = evolve(states[a.job_id], planned=None)
    return actions_mod.plan_actions(decided, after, now, stamp, config)


@pytest.mark.parametrize("policy", ["las", "slurmplan"])
def test_settle_equals_next_state_then_plan_actions_on_every_tick(policy: str, monkeypatch) -> None:
    seen = {"ticks": 0, "quiet": 0, "rows": 0, "actions": 0, "annotated": 0}
    plain_settle, plain_quietly = engine.settle, engine.kept_quietly

    def counting_quietly(mj, a, st):
        quiet = plain_quietly(mj, a, st)
        seen["quiet"] += quiet
        return quiet

    def checked_settle(ctx, assignments, states, new_round, now, stamp, config, settled=None):
        # without ``assign``'s steady rows (``settled``): every row through ``settle``'s own shortcut here
        # (``test_steady_rows.py`` compares the two ways ``decide`` takes)
        got = plain_settle(ctx, assignments, states, new_round, now, stamp, config)
        want = _plain(ctx, assignments, states, new_round, now, stamp, config)
        assert repr(got[0]) == repr(want[0])
        assert list(got[1]) == list(want[1])  # the same jobs, in the same order
        assert repr(list(got[1].values())) == repr(list(want[1].values()))
        seen["ticks"] += 1
        seen["rows"] += len(assignments)
        seen["actions"] += len(got[0])
        seen["annotated"] += sum(1 for act in got[0] if act.reason == "decision written")
        return got

    monkeypatch.setattr(engine, "kept_quietly", counting_quietly)
    monkeypatch.setattr(engine, "settle", checked_settle)
    sim = crius_llm_simulation(policy)
    overwrite_comments_every(monkeypatch, sim, 7)
    sim.run()
    assert seen["ticks"] > 50
    assert seen["quiet"] > seen["rows"] // 3  # the shortcut was taken for most running rows
    assert seen["actions"] > 100  # and the rows that act were compared too
    assert seen["annotated"] > 20  # among them kept jobs whose comment no longer named their configuration
