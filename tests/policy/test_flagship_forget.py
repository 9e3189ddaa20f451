"""The flagship forgets the jobs that left (issue 23, seventeenth session): ``Slurmplan._pushed`` and ``_alone_s``
kept an entry for every job a daemon ever saw, so a month-long daemon grew without bound. ``_forget`` drops a push
older than ``hold_s`` and every entry of a job out of the problem for ``FORGET_S``; neither changes a decision."""

from __future__ import annotations

import pytest

from slurmplan.policy import flagship
from slurmplan.policy.registry import load_policy
from slurmplan.sim.cluster import CRIUS_CLUSTER, parse_cluster
from slurmplan.sim.engine import SimOptions, Simulation
from slurmplan.sim.generate import LlmTraceConfig, llm_trace, perf_feasible
from slurmplan.sim.workload import build_workloads
from tests.mechanism.helpers import preset_with


def _run(monkeypatch, forget: bool, policy_file: str) -> tuple[list[str], flagship.Slurmplan, set, float]:
    """The flagship on three hours of a busy LLM trace (``_forget`` on, with half an hour for a day, or off): every
    tick's decisions, the policy, the last round's jobs and its time."""
    monkeypatch.setattr(flagship, "FORGET_S", 1800.0)
    if not forget:
        monkeypatch.setattr(flagship.Slurmplan, "_forget", lambda self, problem: None)
    jobs = llm_trace(LlmTraceConfig(num_jobs=200, rate_per_h=80.0, seed=5), perf_feasible(CRIUS_CLUSTER))
    spec = parse_cluster(CRIUS_CLUSTER)
    options = SimOptions(round_s=300.0, tick_s=30.0, max_time_s=3 * 3600.0)
    sim = Simulation(build_workloads(jobs, spec, None), spec, load_policy(policy_file), options)
    policy = sim.policy
    seen: list[str] = []
    last: dict = {}
    allocate = policy.allocate

    def recording(problem):
        last["ids"], last["now"] = set(problem.job_ids), flagship._now(problem)
        return allocate(problem)

    policy.allocate = recording  # type: ignore[method-assign]
    step = sim.step

    def hashed():
        out = step()
        seen.append(repr(out.actions) + repr(out.assignments))
        return out

    sim.step = hashed  # type: ignore[method-assign]
    sim.run()
    return seen, policy, last["ids"], last["now"]


def test_jobs_that_left_are_forgotten_and_decisions_do_not_change(monkeypatch, tmp_path) -> None:
    # arrival_round off: with it on (twentieth session) this trace pushes almost no job, and the test needs pushes
    # for the forgetting to drop
    policy_file = preset_with(tmp_path, arrival_round=False)
    kept, never, _, _ = _run(monkeypatch, False, policy_file)
    assert never.params["protect_pushed"] and never._pushed  # the shield was used: pruning had work to do
    monkeypatch.undo()
    done, policy, live, now = _run(monkeypatch, True, policy_file)
    assert done == kept  # every tick's decisions, details included
    left = set(never._alone_s) - live
    assert len(left) > 20  # jobs finished during the run: without forgetting they stay
    assert set(policy._alone_s) <= set(policy._seen)
    for i in policy._seen:  # what is left: seen within FORGET_S of the last round
        assert now - policy._seen[i] <= 1800.0
    assert left - set(policy._alone_s), "some finished job must be forgotten"
    hold = policy.params["hold_s"]
    assert all(now - t < hold for t in policy._pushed.values())  # no push that shields nothing
    assert any(now - t >= hold for t in never._pushed.values())  # which the run without forgetting kept


@pytest.mark.parametrize("hold", [0.0, 600.0])
def test_forget_drops_expired_pushes_only(hold: float) -> None:
    policy = flagship.Slurmplan(flagship.PolicyConfig(name="slurmplan", objective="slurmplan", params={"hold_s": hold}))

    class _Problem:  # what ``_forget`` and ``_now`` read
        num_jobs = 2
        job_ids = (1, 2)

        @staticmethod
        def column(name: str):
            return [1000.0, 1000.0] if name == "submit_time" else [500.0, 500.0]

    policy._pushed = {1: 1200.0, 2: 1500.0 - hold, 3: 1499.0}  # now is 1500
    policy._alone_s = {1: 10.0, 9: 5.0}
    policy._seen = {9: 1500.0 - flagship.FORGET_S - 1}
    policy._forget(_Problem())  # type: ignore[arg-type]
    assert set(policy._pushed) == ({1, 3} if hold else set())  # 2's push is hold_s old: it shields nothing
    assert policy._alone_s == {1: 10.0} and set(policy._seen) == {1, 2}
