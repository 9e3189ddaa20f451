"""``benchmarks/stop_audit.py``: the flagship's priced stops next to what they really cost (issue 23, thirteenth
session). The priced figures are read from the stop's note, so the parser is pinned to ``price_change``'s own
wording: a rewording breaks this test, not the audit's figures silently."""

from __future__ import annotations

import math

import pytest

from slurmplan.mechanism.pricing import price_change
from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def audit_module():
    return load_benchmark("stop_audit")


def test_the_priced_figures_are_read_from_price_changes_wording(audit_module) -> None:
    stop = price_change(2160.0, 1.0, 0.0, 82.0, others_gain_s=6480.0, own_delay_s=360.0)
    assert stop.pays
    assert audit_module.priced("queue place 3; changed: " + stop.detail) == (360.0, 2160.0, 6480.0)
    alone = price_change(2160.0, 1.0, 0.0, 82.0, own_delay_s=360.0)
    assert audit_module.priced(alone.detail) == (360.0, 2160.0, 0.0)
    move = price_change(2160.0, 1.0, 2.0, 82.0)  # a move gains for itself: no own delay, not a stop's wording
    assert audit_module.priced(move.detail)[0] < 0
    assert audit_module.priced("stays where it runs") is None


def test_a_tiny_cluster_trace_has_stops_each_with_its_real_cost(audit_module) -> None:
    stops = audit_module.audit("u-replay-tiny", 6.0, 202)
    assert stops, "the preset stops jobs on this trace (RESULTS.md section 7, thirteenth session)"
    for s in stops:
        assert s.priced_delay_s > 0 and s.priced_left_s > 0 and s.true_left_s > 0
        assert math.isfinite(s.off_gpus_s) and s.off_gpus_s > 0  # it ran again (or finished) later
    assert [s.at_s for s in stops] == sorted(s.at_s for s in stops)
