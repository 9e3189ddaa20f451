"""Slurm accounting for the dev cluster: Debian's MariaDB and slurmdbd, private to one cluster's state dir.

A production site runs slurmdbd; fairshare, QOS, limits and operator rights all live there. With
``devcluster up --accounting`` the dev cluster gets the same: a ``mariadbd`` with its own data directory,
socket and TCP port (not the system service, which may not exist or may belong to someone else), a
``slurmdbd`` on its own port talking to it, and the layout's ``accounts:`` section created with ``sacctmgr``.
Both daemons are started and stopped by ``DevCluster`` like its other daemons (pid files, own command lines);
this module says how to prepare, start, wait for and configure them.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmplan.domain import SlurmplanError
from slurmplan.slurm.devaccounts import AccountsSpec, add_argv, modify_argv
from slurmplan.slurm.devconf import ClusterPaths
from slurmplan.slurm.run import run_slurm

log = logging.getLogger(__name__)

DAEMONS = ("mariadb", "slurmdbd")
BINARIES = ("mariadbd", "mariadb-install-db", "slurmdbd", "sacctmgr", "sshare")
DEBIAN_PACKAGES = ("mariadb-server", "slurmdbd")
DB_NAME = "slurm_acct_db"
INIT_SQL = f"CREATE DATABASE IF NOT EXISTS {DB_NAME};\n"
"""Run by mariadbd at every start (``--init-file``), so slurmdbd never has to create its database. When it does,
it reconnects on the handle whose first connect failed (unknown database), and with MariaDB Connector/C 3.4
(libmariadb3 of Debian 13's MariaDB 11.8) that handle's next query fails with client error 5027 ("Number of
columns in result (=1) set exceeds maximum allowed number of columns (=0)"): slurmdbd 24.11 then exits with
``_check_mysql_concat_is_sane: null result from query``. Connector/C 3.3 (Debian 12) reuses the handle fine."""
BILLING_WEIGHTS = "CPU=0.1,GRES/gpu=1.0"
"""Partitions' TRESBillingWeights with accounting: fairshare usage is then mostly GPU seconds."""


class AccountingError(SlurmplanError):
    """Accounting cannot be set up; the message names the field or daemon and quotes the tool's own words."""


@dataclass(frozen=True)
class AccountingPaths:
    """Everything accounting keeps, under ``<state dir>/accounting`` (slurmdbd.conf sits beside slurm.conf,
    where slurmdbd looks for it: the directory of ``$SLURM_CONF``)."""

    cluster: ClusterPaths

    @property
    def root(self) -> Path:
        return self.cluster.root / "accounting"

    @property
    def data_dir(self) -> Path:
        return self.root / "mysql"

    @property
    def socket(self) -> Path:
        return self.root / "mysqld.sock"

    @property
    def init_sql(self) -> Path:
        return self.root / "init.sql"

    @property
    def dbd_conf(self) -> Path:
        return self.cluster.conf_dir / "slurmdbd.conf"


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def prepare(paths: AccountingPaths, db_port: int, dbd_port: int) -> None:
    """Create the database files once (kept across ``down``/``up``: they are the cluster's history) and write
    slurmdbd.conf, which slurmdbd refuses unless only its owner can read it."""
    paths.root.mkdir(parents=True, exist_ok=True)
    if not (paths.data_dir / "mysql").is_dir():
        shutil.rmtree(paths.data_dir, ignore_errors=True)
        argv = [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={paths.data_dir}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            out = (proc.stderr or proc.stdout).strip()[-1500:]
            raise AccountingError(f"mariadb-install-db failed ({proc.returncode}): {out}")
    paths.init_sql.write_text(INIT_SQL)
    text = render_dbd_conf(paths, db_port, dbd_port)
    fd = os.open(paths.dbd_conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(paths.dbd_conf, 0o600)


def render_dbd_conf(paths: AccountingPaths, db_port: int, dbd_port: int) -> str:
    c = paths.cluster
    return "\n".join(
        [
            "# Written by `slurmplan devcluster up --accounting`.",
            "AuthType=auth/munge",
            f"AuthInfo=socket={c.munge_socket}",
            "DbdHost=localhost",
            "DbdAddr=127.0.0.1",
            f"DbdPort={dbd_port}",
            "SlurmUser=root",
            "DebugLevel=info",
            f"LogFile={c.log_dir}/slurmdbd.log",
            f"PidFile={c.pid_file('slurmdbd-own')}",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={db_port}",
            "StorageUser=root",
            f"StorageLoc={DB_NAME}",
            "",
        ]
    )


def slurm_conf_lines(paths: AccountingPaths, dbd_port: int, gpu_types: tuple[str, ...]) -> list[str]:
    """What slurm.conf says instead of ``accounting_storage/none``: slurmdbd, enforcement, multifactor priority
    with fairshare and QOS, QOS preemption, and GPUs as tracked TRES so GPU limits can be set.
    ``AccountingStoragePass`` names the munge socket for connections to slurmdbd (AuthInfo's is not used)."""
    tres = ["gres/gpu", *(f"gres/gpu:{t}" for t in gpu_types)]
    return [
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=localhost",
        f"AccountingStoragePort={dbd_port}",
        f"AccountingStoragePass={paths.cluster.munge_socket}",
        "AccountingStorageEnforce=associations,limits,qos",
        f"AccountingStorageTRES={','.join(tres)}",
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=100000",
        "PriorityWeightQOS=10000",
        "PriorityWeightAge=100",
        "PriorityDecayHalfLife=7-0",
        "PriorityCalcPeriod=1",
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
    ]


def argv(name: str, paths: AccountingPaths, db_port: int) -> list[str]:
    if name == "mariadb":
        return [
            "mariadbd",
            "--no-defaults",
            f"--datadir={paths.data_dir}",
            f"--socket={paths.socket}",
            f"--port={db_port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={paths.root / 'mysqld.pid'}",
            f"--init-file={paths.init_sql}",  # creates slurmdbd's database (INIT_SQL says why)
            f"--log-error={paths.cluster.log_dir / 'mariadb.log'}",
            "--user=root",
            "--skip-name-resolve",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=128M",  # what slurmdbd asks for at least (it logs an error below)
            "--innodb-lock-wait-timeout=900",
            "--innodb-flush-log-at-trx-commit=2",  # a test database: speed over durability on power loss
        ]
    return ["slurmdbd", "-D"]


def wait_listening(port: int, timeout: float, what: str, alive: Callable[[], bool]) -> None:
    """Wait until something accepts TCP connections on 127.0.0.1:``port`` (while ``alive()`` holds)."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if not alive():
            raise AccountingError(f"{what} exited during start")
        if time.monotonic() > deadline:
            raise AccountingError(f"{what} not listening on port {port} after {timeout:g} s")
        time.sleep(0.1)


def register_cluster(cluster: str, env: Mapping[str, str]) -> None:
    """``sacctmgr add cluster``: slurmctld then registers into it (and adds its TRES such as gres/gpu)."""
    _sacctmgr(["add", "cluster", cluster], env, "cluster")


def wait_tres_known(tres: str, env: Mapping[str, str], timeout: float) -> None:
    """Wait until slurmdbd knows ``tres`` (slurmctld adds the TRES of AccountingStorageTRES when it registers)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = run_slurm(["sacctmgr", "-n", "-P", "show", "tres", "format=type,name"], env, timeout=30, check=False)
        known = {line.replace("|", "/").rstrip("/") for line in proc.stdout.split()}
        if tres in known:
            return
        if time.monotonic() > deadline:
            raise AccountingError(f"slurmdbd does not know TRES {tres} after {timeout:g} s (known: {sorted(known)})")
        time.sleep(0.3)


def wait_ctld_knows(spec: AccountsSpec | None, env: Mapping[str, str], timeout: float) -> None:
    """Wait until slurmctld's association cache holds every user of the layout (slurmdbd pushes them)."""
    users = set(spec.user_names()) if spec else set()
    deadline = time.monotonic() + timeout
    while users:
        proc = run_slurm(["scontrol", "show", "assoc_mgr", "flags=users"], env, timeout=30, check=False)
        seen = set(re.findall(r"UserName=([^(\s]+)", proc.stdout))
        if users <= seen:
            return
        if time.monotonic() > deadline:
            raise AccountingError(f"slurmctld does not know users {sorted(users - seen)} after {timeout:g} s")
        time.sleep(0.3)


def apply_accounts(spec: AccountsSpec | None, cluster: str, env: Mapping[str, str]) -> None:
    """Create each QOS, account and user and set its fields one by one, so that a value sacctmgr refuses is
    reported with its layout field and sacctmgr's own message."""
    for entity in spec.entities() if spec else ():
        _sacctmgr(add_argv(entity, cluster), env, entity.where)
        for key, option, value in entity.settings:
            _sacctmgr(modify_argv(entity, cluster, option, value), env, f"{entity.where}: {key}")


def _sacctmgr(args: list[str], env: Mapping[str, str], what: str) -> None:
    proc = run_slurm(["sacctmgr", "-i", *args], env, timeout=30, check=False)
    out = f"{proc.stdout}\n{proc.stderr}".strip()
    if proc.returncode == 0 or "Nothing new added" in out or "already exists" in out:
        return
    message = " ".join(line.strip() for line in out.splitlines() if line.strip())
    raise AccountingError(f"{what}: sacctmgr {' '.join(args)} refused: {message or f'exit {proc.returncode}'}")
