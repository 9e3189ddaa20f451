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
    over = sbatch_as(acctcluster, "slurmplan-t1", "sleep 30", "--qos=gpu2", "--gres=gpu:t4:2", "-A", "alpha")
    big = sbatch_as(acctcluster, "slurmplan-t1", "sleep 30", "--qos=gpu2", "--gres=gpu:a100:3", "-A", "alpha")
    acctcluster.wait_state(over, "RUNNING")
    job = acctcluster.wait_for(big, lambda j: j["state_reason"] == "QOSMaxGRESPerJob", what="QOS limit reason")
    assert job["job_state"] == "PENDING" and job["qos"] == "gpu2" and job["user_name"] == "slurmplan-t1"
    acctcluster.run("scancel", str(over), str(big), check=True)


def test_a_limit_sacctmgr_refuses_names_the_field_and_quotes_sacctmgr(acctcluster):
    spec = parse_accounts({"qos": [{"name": "badlimit", "max_tres_per_job": "gres/nonsense=2"}]}, "test.yaml")
    with pytest.raises(devaccounting.AccountingError) as err:
        devaccounting.apply_accounts(spec, acctcluster.cluster.cluster_name, acctcluster.env)
    text = str(err.value)
    assert "accounts.qos[0] (badlimit): max_tres_per_job" in text
    assert "sacctmgr" in text and "gres/nonsense" in text
