"""``benchmarks/restart_audit.py``: every restart of the flagship put under the rule that produced it (issue 23,
fifteenth session). The rules are read from the notes, so the classifier is pinned to the notes' own wording
(``reconfig.judge_move``, ``round._settle_running``, ``pricing.price_change``): a rewording breaks this test, not
the audit's counts silently."""

from __future__ import annotations

import pytest

from slurmplan.mechanism.pricing import price_change
from slurmplan.mechanism.reconfig import judge_move
from slurmplan.tick_types import TickConfig
from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def audit_module():
    return load_benchmark("restart_audit")


def test_the_rules_are_read_from_the_notes_own_wording(audit_module) -> None:
    move = judge_move(1.0, 2.5, 3600.0, TickConfig()).detail
    assert audit_module.rule_of(move, False, "moved") == "move"
    assert audit_module.rule_of(move, False, "resized") == "resize"
    stays = judge_move(1.0, 0.4, 3600.0, TickConfig()).detail
    forced = f"its GPUs went to higher-priority jobs, so it moves although {stays}"  # round._settle_running
    assert audit_module.rule_of(forced, False, "moved") == "forced move"
    assert audit_module.rule_of("re-placed on a100-0001 (so that larger jobs fit)", False, "moved") == "re-placed"
    assert audit_module.rule_of(forced, True, "preempted") == "stop"
    stop = price_change(2160.0, 1.0, 0.0, 82.0, others_gain_s=6480.0, own_delay_s=360.0).detail
    assert audit_module.guard_of("changed: " + stop) == "priced"
    assert (
        audit_module.guard_of("changed, slower, not priced: running jobs that took its GPUs cannot simply go back")
        == "unpriced"
    )
    assert audit_module.guard_of("changed: makes room for a job that cannot wait") == "cannot wait"
    assert audit_module.guard_of(stays) == "-"


def test_every_restart_the_simulator_counts_is_classified_once(audit_module) -> None:
    restarts, jobs, counted = audit_module.audit("u-replay-tiny", 6.0, 202)
    assert jobs > 0 and restarts, "the preset restarts jobs on this trace (RESULTS.md section 7)"
    assert len(restarts) == counted
    assert {r.rule for r in restarts} <= {"move", "resize", "forced move", "stop", "re-placed"}
    assert [r.at_s for r in restarts] == sorted(r.at_s for r in restarts)
    for r in restarts:
        if r.tenure_s is not None:
            assert r.rule in ("move", "resize") and r.tenure_s >= 0 and r.horizon_s > 0
