"""The layout's ``accounts:`` section and the accounting configuration, without starting anything."""

from __future__ import annotations

import os

import pytest

from slurmplan.domain import ValidationError
from slurmplan.slurm import devaccounting
from slurmplan.slurm.devaccounts import add_argv, modify_argv, parse_accounts
from slurmplan.slurm.devconf import ClusterPaths
from slurmplan.slurm.devlayout import load_layout


def test_default_layout_has_two_accounts_and_qos():
    spec = load_layout().accounts
    assert spec is not None
    assert spec.account_names() == ("alpha", "beta")
    assert [q.name for q in spec.qos] == ["high", "gpu2"]
    assert ("max_tres_per_job", "MaxTRESPerJob", "gres/gpu=2") in spec.qos[1].settings


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"acounts": []}, "accounts key"),
        ({"accounts": [{"name": "a", "fairshar": 3}]}, "account key"),
        ({"users": [{"name": "u", "account": "nope"}]}, "account"),
        ({"accounts": [{"name": "a", "parent": "b"}]}, "parent"),
        ({"qos": [{"name": "Bad Name"}]}, "name"),
        ({"qos": [{"name": "q", "priority": True}]}, "priority"),
        ({"qos": [{"name": "q", "max_tres_per_job": "gpu=2; rm -rf"}]}, "max_tres_per_job"),
        ({"qos": [{"name": "q"}, {"name": "q"}]}, "qos.name"),
    ],
)
def test_bad_accounts_section_names_the_field(raw, field):
    with pytest.raises(ValidationError) as err:
        parse_accounts(raw, "layout.yaml")
    assert err.value.field == field
    assert "layout.yaml: accounts" in str(err.value)


def test_unknown_top_level_key_in_layout_is_refused():
    with pytest.raises(ValidationError, match="user key"):
        load_layout(None, {"accounts": {"users": [{"name": "u", "account": "alpha", "maxjobs": 1}]}})


def test_sacctmgr_commands_set_one_field_each():
    spec = parse_accounts(
        {
            "accounts": [{"name": "a", "fairshare": 10}],
            "users": [{"name": "u", "account": ["a", "root"], "max_tres_per_job": "gres/gpu=2"}],
        },
        "x",
    )
    user = spec.users[0]
    assert add_argv(user, "c") == ["add", "user", "u", "Cluster=c", "Account=a,root", "DefaultAccount=a"]
    key, option, value = user.settings[0]
    assert modify_argv(user, "c", option, value) == [
        "modify", "user", "where", "name=u", "cluster=c", "account=a,root", "set", "MaxTRESPerJob=gres/gpu=2",
    ]  # fmt: skip


def test_dbd_conf_is_private_and_names_own_ports(tmp_path):
    paths = devaccounting.AccountingPaths(ClusterPaths(tmp_path))
    text = devaccounting.render_dbd_conf(paths, 23306, 26819)
    assert "StoragePort=23306" in text and "DbdPort=26819" in text and "StorageHost=127.0.0.1" in text
    lines = devaccounting.slurm_conf_lines(paths, 26819, ("a100",))
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:a100" in lines
    assert f"AccountingStoragePass={paths.cluster.munge_socket}" in lines
    argv = devaccounting.argv("mariadb", paths, 23306)
    assert "--port=23306" in argv and f"--datadir={paths.data_dir}" in argv and "--no-defaults" in argv
    assert os.path.basename(argv[0]) == "mariadbd"
