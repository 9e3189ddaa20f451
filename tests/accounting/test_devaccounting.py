"""``devcluster up --accounting``: MariaDB and slurmdbd in the state directory, the layout's accounts created,
associations, QOS and limits enforced for jobs of real unprivileged users."""

from __future__ import annotations

import pytest
from acct_helpers import sbatch_as, sbatch_as_result

from slurmplan.slurm import devaccounting
from slurmplan.slurm.devaccounts import parse_accounts

pytestmark = pytest.mark.slurm


def test_daemons_run_privately_and_status_shows_them(acctcluster):
    cluster = acctcluster.cluster
    status = {d.name: d.running for d in cluster.status().daemons}
    assert status["mariadb"] and status["slurmdbd"]
    assert (cluster.acct_paths.data_dir / "slurm_acct_db").is_dir(), "the database lives in the state directory"
    # mariadbd creates it (--init-file), never slurmdbd: slurmdbd 24.11 with Debian 13's Connector/C 3.4 exits
    # when it had to (devaccounting.INIT_SQL); this whole module running on 24.11 is the test of that
    assert "slurm_acct_db" in cluster.acct_paths.init_sql.read_text()
    conf = cluster.paths.slurm_conf.read_text()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf
    assert "AccountingStorageEnforce=associations,limits,qos" in conf
    assert "PriorityType=priority/multifactor" in conf
    ports = {cluster._port_of("mariadb"), cluster._port_of("slurmdbd")}
    assert not ports & {3306, 6819}, "never the system services' ports"
    sshare = acctcluster.run("sshare", "-a", "-P", "-n", "-o", "Account,User,RawShares", check=True).stdout
    rows = {tuple(line.split("|")[:2]) for line in sshare.split()}
    assert ("alpha", "slurmplan-t1") in rows and ("beta", "slurmplan-t2") in rows


def test_user_without_association_is_refused(acctcluster):
    proc = sbatch_as_result(acctcluster, "nobody", "--gres=gpu:t4:1")
    assert proc.returncode != 0
    assert "Invalid account" in proc.stderr


def test_qos_limit_holds_a_users_job(acctcluster):
    """QOS gpu2: MaxTRESPerJob=gres/gpu=2 with DenyOnLimit, so a bigger job is refused at submission."""
    within = sbatch_as(acctcluster, "slurmplan-t2", "sleep 30", "--qos=gpu2", "--gres=gpu:t4:2", "-A", "alpha")
    job = acctcluster.wait_state(within, "RUNNING")
    assert job["qos"] == "gpu2" and job["user_name"] == "slurmplan-t2"
    over = sbatch_as_result(acctcluster, "slurmplan-t2", "--qos=gpu2", "--gres=gpu:a100:3", "-A", "alpha")
    assert over.returncode != 0 and "QOSMaxGRESPerJob" in over.stderr
    acctcluster.run("scancel", str(within), check=True)


def test_a_limit_sacctmgr_refuses_names_the_field_and_quotes_sacctmgr(acctcluster):
    spec = parse_accounts({"qos": [{"name": "badlimit", "max_tres_per_job": "gres/nonsense=2"}]}, "test.yaml")
    with pytest.raises(devaccounting.AccountingError) as err:
        devaccounting.apply_accounts(spec, acctcluster.cluster.cluster_name, acctcluster.env)
    text = str(err.value)
    assert "accounts.qos[0] (badlimit): max_tres_per_job" in text
    assert "sacctmgr" in text and "gres/nonsense" in text


def test_an_update_past_a_limit_is_taken_from_root_but_the_job_then_never_runs(acctcluster, tmp_path):
    """Why the daemon caps GPU hints itself (``slurm.accounting.gpu_cap``): Slurm takes root's update of a job in
    QOS gpu2 (MaxTRESPerJob=gres/gpu=2, DenyOnLimit) to 3 GPUs without a word, and the job then pends for good
    with reason QOSMaxGRESPerJob. (A refusal Slurm does send is journaled with its message by the act step.)"""
    from slurmplan.domain import Action, ActionKind
    from slurmplan.slurm.backend import SlurmBackend

    job = sbatch_as(acctcluster, "slurmplan-t2", "sleep 30", "--hold", "--qos=gpu2", "--gres=gpu:a100:1", "-A", "alpha")
    backend = SlurmBackend(env=acctcluster.env)
    results = backend.apply([Action(ActionKind.UPDATE, job, gpu_type="a100", gpus_per_node=3)])
    assert results[0].ok, results[0].message
    assert backend.apply([Action(ActionKind.RELEASE, job)])[0].ok
    rec = acctcluster.wait_for(job, lambda j: "QOSMaxGRES" in j["state_reason"], what="pending on the QOS limit")
    assert rec["job_state"] == "PENDING"
    acctcluster.run("scancel", str(job), check=True)
