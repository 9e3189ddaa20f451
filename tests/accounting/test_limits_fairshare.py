"""The daemon inside the site's accounting, on the real cluster with slurmdbd: association limits cap what it
gives a job, fairshare from Slurm's own usage weighs accounts, and ``explain`` shows each factor."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from acct_helpers import sbatch_as

from slurmplan.control.config import DaemonConfig
from slurmplan.control.explain import explain_job
from slurmplan.control.journal import Journal
from slurmplan.control.runner import Daemon
from slurmplan.control.trust import HintTrust
from slurmplan.slurm.accounting import read_accounting
from slurmplan.slurm.backend import SlurmBackend

pytestmark = pytest.mark.slurm

ELASTIC = "slurmplan:model=gpt2;gpus=2;min=1;max=4"
BODY = "for i in $(seq 1 120); do sleep 1; done"


def _daemon(acctcluster, tmp_path: Path, **fields) -> Daemon:
    config = DaemonConfig(
        database=tmp_path / "journal.db", report_dir=tmp_path / "reports", round_s=20.0, grace_s=5.0, **fields
    )
    return Daemon(config, backend=SlurmBackend(env=acctcluster.env))


def _gpus(record) -> int:
    return int(record["tres_per_node"].rpartition(":")[2] or 0) * max(1, record["node_count"])


def test_user_limited_to_2_gpus_per_job_is_never_grown_past_2(acctcluster, tmp_path):
    """slurmplan-t1 has MaxTRESPerJob=gres/gpu=2 (default layout); its hints allow max=4 and GPUs are free.
    The control: the same hints from slurmplan-t2 (no limit), alone on the cluster, are grown past 2."""
    daemon = _daemon(acctcluster, tmp_path)
    free = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:2", "-A", "alpha", "--comment", ELASTIC)
    daemon.tick()
    assert _gpus(acctcluster.wait_state(free, "RUNNING")) > 2, "without the limit the same hints grow past 2"
    acctcluster.run("scancel", str(free), check=True)
    acctcluster.wait_for(free, lambda j: j["job_state"] != "RUNNING", what="control job gone")

    capped = sbatch_as(acctcluster, "slurmplan-t1", BODY, "--hold", "--gres=gpu:2", "-A", "alpha", "--comment", ELASTIC)
    seen: list[int] = []
    deadline = time.monotonic() + 45  # a job new since the round started is decided at the next (round_s 20)
    while time.monotonic() < deadline:
        assert daemon.tick().managed >= 1
        rec = acctcluster.squeue_job(capped)
        seen.append(_gpus(rec))
        if rec["job_state"] == "RUNNING" and len(seen) > 2:
            break
        time.sleep(1.0)
    assert acctcluster.squeue_job(capped)["job_state"] == "RUNNING", "the capped job runs, at its limit"
    assert max(seen) <= 2, f"the capped job was given {seen} GPUs"
    with Journal(tmp_path / "journal.db", readonly=True) as journal:
        events = [e for e in explain_job(journal, capped)["events"] if e["event"] == "accounting"]
    assert events and "MaxTRESPerJob gres/gpu=2 of slurmplan-t1@alpha" in events[-1]["detail"]
    assert "hints capped from 4" in events[-1]["detail"]
    acctcluster.run("scancel", str(capped), check=True)


def test_account_that_used_more_gets_less_weight_next_round(acctcluster, tmp_path):
    """Managed or not, a job's GPU time is charged by Slurm to its account; the daemon's weight for the account
    (shares x 2^(-usage/shares), from slurmctld's associations) drops accordingly in the next round."""
    before = read_accounting(acctcluster.env).account_factors()
    job = sbatch_as(acctcluster, "slurmplan-t2", "sleep 6", "--gres=gpu:a100:4", "-A", "alpha", "-o", "/dev/null")
    acctcluster.wait_for(job, lambda j: j["job_state"] == "COMPLETED", timeout=60, what="completed")
    deadline = time.monotonic() + 90  # usage is charged from slurmctld's first fairshare pass (1 min after start)
    after = read_accounting(acctcluster.env).account_factors()
    while after["alpha"].usage_efctv <= before["alpha"].usage_efctv and time.monotonic() < deadline:
        time.sleep(0.5)
        after = read_accounting(acctcluster.env).account_factors()
    assert after["alpha"].usage_efctv > before["alpha"].usage_efctv
    ratio_before = before["alpha"].weight / before["beta"].weight
    ratio_after = after["alpha"].weight / after["beta"].weight
    assert ratio_after < ratio_before

    # the next round: the daemon's hierarchical policy is given these weights, and explain shows the factors
    a = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:2", "-A", "alpha", "--comment", ELASTIC)
    b = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:2", "-A", "beta", "--comment", ELASTIC)
    daemon = _daemon(acctcluster, tmp_path, policy="hierarchical", shadow=True)
    daemon.tick()
    weights = daemon.site_accounting.account_weights()
    assert weights["alpha"] < weights["beta"]
    with Journal(tmp_path / "journal.db", readonly=True) as journal:
        for job_id, account in ((a, "alpha"), (b, "beta")):
            notes = [e["detail"] for e in explain_job(journal, job_id)["events"] if e["event"] == "accounting"]
            assert notes and f"{account}: shares" in notes[-1] and "fairshare 2^(-" in notes[-1]
            assert "QOS normal: priority 0" in notes[-1]
    acctcluster.run("scancel", str(a), str(b), check=True)
    _flagship_serves_the_lighter_account_first(acctcluster, tmp_path)


def _flagship_serves_the_lighter_account_first(acctcluster, tmp_path: Path) -> None:
    """The flagship under the same fairshare: three 8-GPU jobs, room for two (a100 and v100 hold 8 each). alpha's,
    submitted first, waits behind beta's two; with the weights overridden to equal, submission order wins."""
    rigid = "slurmplan:model=gpt2;gpus=8;min=8;max=8"
    opts = ("--hold", "--gres=gpu:4", "-N", "2", "--comment", rigid)
    first = sbatch_as(acctcluster, "slurmplan-t2", BODY, *opts, "-A", "alpha")
    later = [sbatch_as(acctcluster, "slurmplan-t2", BODY, *opts, "-A", "beta") for _ in range(2)]

    def placed(name: str, **fields) -> dict[int, str]:
        daemon = _daemon(acctcluster, tmp_path / name, policy="slurmplan", shadow=True, **fields)
        report = daemon.tick()
        return {a.job_id: a.detail for a in report.assignments if a.cell is not None}

    fair = placed("fairshare")
    assert sorted(fair) == sorted(later), f"beta's jobs start, alpha's waits: {fair}"
    equal = placed("equal", account_weights={"alpha": 1.0, "beta": 1.0})
    assert first in equal and len(equal) == 2, f"equal weights: the first submitted starts: {equal}"
    assert "account beta's fairshare weight" in fair[later[0]]
    acctcluster.run("scancel", str(first), *map(str, later), check=True)


def test_config_weights_override_fairshare(acctcluster, tmp_path):
    daemon = _daemon(acctcluster, tmp_path, shadow=True, account_weights={"alpha": 3.0, "beta": 1.0})
    daemon.tick()
    assert daemon.site_accounting.account_weights() == {"alpha": 3.0, "beta": 1.0}


def test_guaranteed_class_comes_from_the_sites_qos_not_the_users_hint(acctcluster, tmp_path, caplog):
    """QOS ``high`` (priority 1000, preempt mode requeue in slurmdbd) is named in ``guaranteed_qos``: a job in it
    is guaranteed without asking; a job that only declares ``class=guaranteed`` in its hints is best-effort."""
    hint = "slurmplan:model=gpt2;gpus=1;min=1;max=1"
    vip = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:1", "-A", "alpha", "--qos=high",
                    "--comment", hint)  # fmt: skip
    claims = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:1", "-A", "beta",
                       "--comment", hint + ";class=guaranteed")  # fmt: skip
    daemon = _daemon(acctcluster, tmp_path, shadow=True, trust=HintTrust(guaranteed_qos=("high",)))
    with caplog.at_level("WARNING", logger="slurmplan.control.trust"):
        daemon.tick()
    with Journal(tmp_path / "journal.db", readonly=True) as journal:
        notes = {j: [e["detail"] for e in explain_job(journal, j)["events"] if e["event"] == "accounting"][-1]
                 for j in (vip, claims)}  # fmt: skip
    assert "class best-effort -> guaranteed" in notes[vip]
    assert "QOS high: priority 1000, preempt mode REQUEUE" in notes[vip]
    # the user's own class=guaranteed is dropped by the trust rules (control.trust) before accounting sees it
    assert "guaranteed" not in notes[claims]
    refusals = [r.getMessage() for r in caplog.records if f"job {claims}:" in r.getMessage()]
    assert refusals and "class=guaranteed is not allowed for account 'beta'" in refusals[0]
    acctcluster.run("scancel", str(vip), str(claims), check=True)


def test_only_a_listed_account_may_opt_out_with_managed_no(acctcluster, tmp_path):
    """``unmanaged_accounts`` names who may use ``managed=no`` (control.trust): beta's job that opts out is left
    to Slurm; alpha's job that says the same has the hint dropped and is scheduled like any managed job."""
    hints = "slurmplan:model=gpt2;gpus=1;managed=no"
    beta = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:1", "-A", "beta", "--comment", hints)
    alpha = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:1", "-A", "alpha", "--comment", hints)
    report = _daemon(acctcluster, tmp_path, shadow=True, trust=HintTrust(unmanaged_accounts=("beta",))).tick()
    decided = {a.job_id for a in report.assignments}
    assert beta not in decided and all(a.job_id != beta for a in report.actions)
    assert alpha in decided
    acctcluster.run("scancel", str(beta), str(alpha), check=True)


def test_a_job_over_its_associations_max_jobs_waits_undecided(acctcluster, tmp_path):
    """MaxJobs=1 for slurmplan-t2 in beta with one job running: a second (managed, held) job of that association
    could not start, so the daemon gives it nothing this tick and says why; GPUs go to jobs that can run."""
    limit = ["sacctmgr", "-i", "modify", "user", "where", "name=slurmplan-t2", "account=beta", "set"]
    acctcluster.run(*limit, "MaxJobs=1", check=True)
    try:
        running = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--gres=gpu:t4:1", "-A", "beta", "-o", "/dev/null")
        acctcluster.wait_state(running, "RUNNING")
        waiting = sbatch_as(acctcluster, "slurmplan-t2", BODY, "--hold", "--gres=gpu:2", "-A", "beta",
                            "--comment", ELASTIC)  # fmt: skip
        deadline = time.monotonic() + 20  # slurmctld counts the running job against MaxJobs
        daemon = _daemon(acctcluster, tmp_path, shadow=True)
        while True:
            report = daemon.tick()
            note = daemon.site_accounting.notes.get(waiting, "")
            if "MaxJobs=1" in note or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert note == "waits: MaxJobs=1 of slurmplan-t2@beta reached (1 running)"
        assert waiting not in {a.job_id for a in report.assignments}
        assert all(a.job_id != waiting for a in report.actions)
    finally:
        acctcluster.run(*limit, "MaxJobs=-1", check=True)
        acctcluster.run("scancel", *map(str, acctcluster.submitted[-2:]))
