"""The simulator's memo of managed jobs gives what pricing every job afresh gives, tick after tick.

``pipeline.managed_jobs`` with the simulator's memo keeps a job's Job, hints and candidates from the tick before
when only its progress moved (every running job, every tick; issue 27), except for a job whose GPU type is read
from its nodes, which depends on the cluster. This compares the memo's answer with the memo-less one at every tick
of a real run, and checks that a job typed by its nodes is read again when the nodes changed.
"""

from __future__ import annotations

from slurmplan import pipeline
from slurmplan.domain import Candidate, Cell, Cluster, Hints, Job, JobState
from slurmplan.pipeline import Observed, managed_jobs
from tests.mechanism.helpers import crius_llm_simulation, node


def test_the_memo_answers_as_pricing_afresh_on_a_real_run(monkeypatch) -> None:
    seen = {"ticks": 0, "rows": 0, "priced": 0}
    plain, plain_request = pipeline.managed_jobs, pipeline.with_request

    counting_on = [False]

    def checked(observed, cluster, source, memo=None):
        counting_on[0] = True  # count the memo's pass only, not the reference's
        got = plain(observed, cluster, source, memo)
        counting_on[0] = False
        assert got == plain(observed, cluster, source, None)
        seen["ticks"] += 1
        seen["rows"] += len(got[0])
        return got

    def counting(hints, job):
        seen["priced"] += counting_on[0]
        return plain_request(hints, job)

    monkeypatch.setattr(pipeline, "managed_jobs", checked)
    monkeypatch.setattr(pipeline, "with_request", counting)
    crius_llm_simulation("las", num_jobs=80, rate_per_h=40.0, seed=2, hours=2.0).run()
    assert seen["ticks"] > 30 and seen["rows"] > 500
    assert seen["priced"] < seen["rows"] // 4  # running jobs' moved progress did not re-read their hints


class _Source:
    """A job source that prices every job alike and reports the progress it is told (the edge under test is the
    memo, not pricing)."""

    def __init__(self) -> None:
        self.steps = 0.0

    def price(self, hints: Hints, job: Job, cluster: Cluster) -> tuple[Candidate, ...]:
        return (Candidate(Cell(job.gpu_type or "a100", 1), 1.0),)

    def progress(self, job: Job) -> float:
        return self.steps


def test_a_job_typed_by_its_nodes_is_read_again_when_only_its_progress_moved() -> None:
    untyped = Job(7, state=JobState.RUNNING, gpus_per_node=1, node_count=1, nodes=("n0",), start_time=0.0)
    typed = Job(8, state=JobState.RUNNING, gpu_type="a100", gpus_per_node=1, node_count=1, nodes=("n1",))
    observed = [Observed(untyped, Hints()), Observed(typed, Hints(gpus=1))]
    source, memo = _Source(), {}
    first, _ = managed_jobs(observed, Cluster((node("n0", "a100"), node("n1", "a100"))), source, memo)
    assert first[0].job.gpu_type == "a100" and first[0].job.gpu_type_preferred
    source.steps = 5.0
    again, _ = managed_jobs(observed, Cluster((node("n0", "v100"), node("n1", "a100"))), source, memo)
    assert again[0].job.gpu_type == "v100"  # read from the nodes again, not kept
    assert again[1].hints is first[1].hints and again[1].candidates is first[1].candidates  # kept
    assert [m.steps_done for m in again] == [5.0, 5.0]
