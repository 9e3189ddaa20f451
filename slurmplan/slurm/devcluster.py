"""A real Slurm cluster on localhost for development and tests: munged, slurmctld and one slurmd per node.

Several of these run side by side on one machine (engineers, test sessions), so each one keeps everything in
its own state directory: configuration, spool, logs, pid files, StateSaveLocation, and its own munged with its
own key and socket. Ports are chosen free (or refused clearly when a requested one is taken), and the cluster
name is derived from the state directory. ``down`` stops exactly the processes this cluster started, by pid,
plus the job steps its slurmds spawned, and waits until they are gone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from slurmplan.domain import SlurmplanError
from slurmplan.slurm import devaccounting, procs
from slurmplan.slurm.devconf import ClusterPaths, render_cgroup_conf, render_gres_conf, render_slurm_conf
from slurmplan.slurm.devlayout import Layout, load_layout
from slurmplan.slurm.reader import parse_version
from slurmplan.slurm.run import SlurmCommandError, run_slurm

log = logging.getLogger(__name__)

REQUIRED_BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch", "scancel")
DEBIAN_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "libslurm-dev")
_READY_STATES = {"idle", "mixed", "allocated", "completing"}


class DevClusterError(SlurmplanError):
    """The development cluster cannot be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class DaemonStatus:
    name: str
    pid: int | None
    running: bool


@dataclass(frozen=True)
class NodeStatus:
    name: str
    state: str
    gpu_type: str | None
    gpus: int


@dataclass(frozen=True)
class ClusterStatus:
    state_dir: str
    cluster_name: str
    slurm_conf: str
    daemons: tuple[DaemonStatus, ...]
    nodes: tuple[NodeStatus, ...]

    @property
    def running(self) -> bool:
        return bool(self.daemons) and all(d.running for d in self.daemons)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "running": self.running}


def default_state_dir() -> Path:
    """``$SLURMPLAN_DEVCLUSTER_DIR``, else ``.state/devcluster`` in the checkout, else /var/lib/slurmplan."""
    env = os.environ.get("SLURMPLAN_DEVCLUSTER_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / "site" / "devcluster").is_dir() and (parent / "pyproject.toml").is_file():
            return parent / ".state" / "devcluster"
    return Path("/var/lib/slurmplan/devcluster")


def check_prerequisites() -> None:
    """Refuse clearly where a cluster cannot run: not root, or Slurm/munge not installed."""
    if os.geteuid() != 0:
        raise DevClusterError("the development cluster runs Slurm daemons as root; run as root")
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if missing:
        raise DevClusterError(
            f"missing {', '.join(missing)}: install Slurm and munge "
            f"(`slurmplan devcluster up --install`, or apt-get install {' '.join(DEBIAN_PACKAGES)})"
        )


def daemon_version() -> tuple[int, int]:
    """The installed slurmd's version (``slurmd -V`` needs no configuration, unlike the client commands)."""
    return parse_version(run_slurm(["slurmd", "-V"], timeout=30).stdout)


def install_packages(accounting: bool = False) -> None:
    """apt-get install Debian's Slurm and munge packages, with MariaDB and slurmdbd for ``accounting`` (only
    when asked with ``--install``)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    packages = [*DEBIAN_PACKAGES, *(devaccounting.DEBIAN_PACKAGES if accounting else ())]
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *packages]):
        log.info("running %s", " ".join(argv))
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise DevClusterError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")


class DevCluster:
    """One local cluster, identified by its state directory. ``up`` is idempotent; ``down`` stops it all."""

    def __init__(
        self, layout: Layout | None = None, state_dir: str | Path | None = None, accounting: bool | None = None
    ) -> None:
        self.layout = layout if layout is not None else load_layout()
        self.paths = ClusterPaths(Path(state_dir or default_state_dir()).resolve())
        self.cluster_name = "dev" + hashlib.sha1(str(self.paths.root).encode()).hexdigest()[:8]
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.acct_paths = devaccounting.AccountingPaths(self.paths)
        self.accounting = self._last_accounting() if accounting is None else accounting
        """MariaDB + slurmdbd with the layout's ``accounts:`` (``--accounting``); None: as the last ``up`` had it."""

    def _last_accounting(self) -> bool:
        try:
            return bool(json.loads(self.paths.state_file.read_text()).get("accounting"))
        except (OSError, ValueError):
            return False

    @property
    def env(self) -> dict[str, str]:
        """What a subprocess needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.paths.slurm_conf)}

    def daemon_names(self) -> list[str]:
        accounting = devaccounting.DAEMONS if self.accounting else ()
        return ["munged", *accounting, "slurmctld", *(f"slurmd-{n}" for n in self.layout.node_names())]

    # ------------------------------------------------------------------------------------------------ up

    def up(self, timeout: float = 90.0, detach: bool = False) -> ClusterStatus:
        """Start whatever is not running yet and wait until every node can take jobs.

        With ``detach`` (what the CLI uses) the daemons are started by a keeper process that outlives the
        caller and reaps them when they stop, so no zombie is left where PID 1 does not reap.
        """
        check_prerequisites()
        if detach:
            try:
                procs.run_in_keeper(lambda: self._up(timeout).cluster_name)
            except RuntimeError as exc:
                raise DevClusterError(str(exc)) from exc
            return self.status()
        return self._up(timeout)

    def _up(self, timeout: float) -> ClusterStatus:
        """Start what is missing; if anything fails, stop what this call started and raise naming the daemon.

        Every wait here is bounded (``timeout`` for the nodes, 10 s for munged's socket), so ``up`` ends.
        """
        running = {name for name in self.daemon_names() if self._own_pid(name) is not None}
        if running:
            self._check_config_unchanged()
        else:
            self._prepare()
        started: list[str] = []
        try:
            for name in self.daemon_names():
                if name not in running:
                    self._start(name)
                    started.append(name)
                    if name == "munged":
                        self._wait_for(lambda: self.paths.munge_socket.exists(), 10.0, "munged to open its socket")
                    elif name in devaccounting.DAEMONS:
                        self._accounting_step(name, lambda n=name: self._accounting_listening(n))
            self._wait_nodes_ready(timeout)
            if self.accounting and "slurmdbd" not in running:
                self._accounting_step("accounts", self._accounting_apply)
        except BaseException as exc:
            left = self._stop(started)
            if isinstance(exc, DevClusterError):
                note = f"\nstopped what this start had started: {', '.join(started)}"
                raise DevClusterError(f"{exc}{note}" + (f" (still alive: {left})" if left else "")) from exc
            raise
        return self.status()

    def _stop(self, names: list[str]) -> list[int]:
        """Stop the daemons ``names`` of this cluster (slurmds first, munged last); returns pids still alive."""
        order = sorted(names, key=lambda n: (n == "munged", n == "slurmctld"))
        left = procs.stop_pids([pid for pid in (self._own_pid(n) for n in order) if pid is not None], 10.0)
        for name in order:
            self.paths.pid_file(name).unlink(missing_ok=True)
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.poll()
        return left

    def _prepare(self) -> None:
        """Write a fresh configuration (ports reused from the last run when still free)."""
        p = self.paths
        for d in (p.conf_dir, p.spool_dir, p.state_save, p.log_dir, p.run_dir, p.gpu_dir):
            d.mkdir(parents=True, exist_ok=True)
        p.munge_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(p.munge_dir, 0o755)  # munged wants its socket directory searchable by all
        if not p.munge_key.exists():
            fd = os.open(p.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(1024))
        ctld_port, node_ports = self._choose_ports()
        acct_ports = {n: node_ports.pop(n) for n in devaccounting.DAEMONS if n in node_ports}
        p.state_file.write_text(
            json.dumps(
                {
                    "cluster_name": self.cluster_name,
                    "slurmctld_port": ctld_port,
                    "node_ports": node_ports,
                    **({"accounting": acct_ports} if self.accounting else {}),
                }
            )
        )
        if self.accounting:
            self._check_accounting_binaries()
            self._wrap(lambda: devaccounting.prepare(self.acct_paths, acct_ports["mariadb"], acct_ports["slurmdbd"]))
        for node in self.layout.nodes:
            (p.gpu_dir / node.name).mkdir(parents=True, exist_ok=True)
            for f in p.gpu_files(node):
                f.touch()
        for name, src in self.layout.conf_files.items():
            shutil.copyfile(src, p.conf_dir / name)
            os.chmod(p.conf_dir / name, 0o755 if os.access(src, os.X_OK) else 0o644)
        if "plugstack.conf" not in self.layout.conf_files:
            p.plugstack_conf.write_text("# no SPANK plugins in this development cluster\n")
        p.slurm_conf.write_text(self._render(ctld_port, node_ports))
        p.gres_conf.write_text(render_gres_conf(self.layout, p))
        cgroup = render_cgroup_conf(daemon_version())
        if cgroup is not None and "cgroup.conf" not in self.layout.conf_files:
            p.cgroup_conf.write_text(cgroup)

    def _render(self, ctld_port: int, node_ports: dict[str, int]) -> str:
        host = socket.gethostname().split(".")[0]
        text = render_slurm_conf(self.layout, self.paths, self.cluster_name, ctld_port, node_ports, host)
        dbd_port = self._port_of("slurmdbd")
        if self.accounting and dbd_port is not None:
            types = tuple(sorted({n.gpu_type for n in self.layout.nodes if n.gpu_type}))
            lines = "\n".join(devaccounting.slurm_conf_lines(self.acct_paths, dbd_port, types))
            text = text.replace("AccountingStorageType=accounting_storage/none", lines)
        return text

    def _choose_ports(self) -> tuple[int, dict[str, int]]:
        """Requested ports must be free (else refuse); others reuse the last run's when free, or pick new."""
        try:
            previous = json.loads(self.paths.state_file.read_text())
        except (OSError, ValueError):
            previous = {}
        wanted: dict[str, int | None] = {"slurmctld": self.layout.slurmctld_port}
        wanted.update({n.name: n.port for n in self.layout.nodes})
        wanted.update({n: None for n in devaccounting.DAEMONS if self.accounting})
        old = {"slurmctld": previous.get("slurmctld_port"), **previous.get("node_ports", {})}
        old.update(previous.get("accounting") or {})
        chosen: dict[str, int] = {}
        for name, port in wanted.items():
            if port is not None:
                if not procs.port_free(port) or port in chosen.values():
                    raise DevClusterError(f"port {port} requested for {name} in {self.layout.source} is taken")
                chosen[name] = port
        for name in wanted:
            if name in chosen:
                continue
            port = old.get(name)
            if isinstance(port, int) and port not in chosen.values() and procs.port_free(port):
                chosen[name] = port
            else:
                chosen[name] = procs.pick_free_ports(1, set(chosen.values()))[0]
        ctld = chosen.pop("slurmctld")
        return ctld, chosen

    def _check_config_unchanged(self) -> None:
        """A running cluster keeps its configuration; a different layout needs ``down`` first."""
        try:
            state = json.loads(self.paths.state_file.read_text())
            current = self.paths.slurm_conf.read_text()
        except (OSError, ValueError) as exc:
            raise DevClusterError(f"{self.paths.root} has running daemons but no readable configuration") from exc
        same_nodes = set(state.get("node_ports", {})) == set(self.layout.node_names())
        if not same_nodes or self._render(state["slurmctld_port"], state["node_ports"]) != current:
            raise DevClusterError(
                f"the cluster in {self.paths.root} runs with another layout; run `slurmplan devcluster down` first"
            )

    def _argv(self, name: str) -> list[str]:
        p = self.paths
        if name == "munged":
            return [
                "munged",
                "-F",
                "--force",  # state dirs under 0700 parents (pytest tmp) would otherwise be refused
                f"--socket={p.munge_socket}",
                f"--key-file={p.munge_key}",
                f"--pid-file={p.munge_dir / 'munged.pid'}",
                f"--log-file={p.log_dir / 'munged.log'}",
                f"--seed-file={p.munge_dir / 'munged.seed'}",
            ]
        if name == "slurmctld":
            return ["slurmctld", "-D", "-f", str(p.slurm_conf)]
        if name in devaccounting.DAEMONS:
            return devaccounting.argv(name, self.acct_paths, self._port_of("mariadb") or 0)
        node = name.removeprefix("slurmd-")
        return ["slurmd", "-D", "-N", node, "-f", str(p.slurm_conf)]

    def _start(self, name: str) -> None:
        if name.startswith("slurmd-") or name in ("slurmctld", *devaccounting.DAEMONS):
            port = self._port_of(name)
            if port is not None and not procs.port_free(port):
                raise DevClusterError(f"port {port} for {name} of {self.paths.root} is taken by another process")
        out = open(self.paths.log_dir / f"{name}.out", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                self._argv(name),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        finally:
            out.close()
        self._procs[name] = proc
        self.paths.pid_file(name).write_text(f"{proc.pid}\n")
        log.info("started %s (pid %d)", name, proc.pid)

    def _check_accounting_binaries(self) -> None:
        missing = devaccounting.missing_binaries()
        if missing:
            raise DevClusterError(
                f"--accounting needs {', '.join(missing)}: apt-get install {' '.join(devaccounting.DEBIAN_PACKAGES)}"
                " (or `slurmplan devcluster up --accounting --install`)"
            )

    def _accounting_listening(self, name: str) -> None:
        """Wait until MariaDB or slurmdbd listens; register the cluster with slurmdbd before slurmctld starts."""
        port = self._port_of(name) or 0
        devaccounting.wait_listening(port, 60.0, name, lambda: self._own_pid(name) is not None)
        if name == "slurmdbd":
            devaccounting.register_cluster(self.cluster_name, self.env)

    def _accounting_apply(self) -> None:
        """Create the layout's accounts once slurmctld has registered its TRES (GPU limits need gres/gpu), and
        wait until slurmctld knows them, so a job submitted right after ``up`` finds its association."""
        devaccounting.wait_tres_known("gres/gpu", self.env, 30.0)
        devaccounting.apply_accounts(self.layout.accounts, self.cluster_name, self.env)
        devaccounting.wait_ctld_knows(self.layout.accounts, self.env, 30.0)

    def _accounting_step(self, what: str, step: Callable[[], None]) -> None:
        """Run one accounting step; a failure stops everything this cluster started and names what failed."""
        try:
            step()
        except devaccounting.AccountingError as exc:
            hint = self._log_hint()
            self.down()
            raise DevClusterError(f"{exc}; {hint}") from exc

    def _wrap(self, step: Callable[[], None]) -> None:
        try:
            step()
        except devaccounting.AccountingError as exc:
            raise DevClusterError(str(exc)) from exc

    def _port_of(self, name: str) -> int | None:
        try:
            state = json.loads(self.paths.state_file.read_text())
        except (OSError, ValueError):
            return None
        if name == "slurmctld":
            return state.get("slurmctld_port")
        if name in devaccounting.DAEMONS:
            return (state.get("accounting") or {}).get(name)
        return state.get("node_ports", {}).get(name.removeprefix("slurmd-"))

    def _own_pid(self, name: str) -> int | None:
        """The pid of daemon ``name`` if it runs and is ours (its command line names our state directory)."""
        proc = self._procs.get(name)
        if proc is not None:  # started by this object: no need to read its command line
            return proc.pid if proc.poll() is None else None
        pid = procs.read_pid(self.paths.pid_file(name))
        if pid is None or not procs.is_alive(pid):
            return None
        if str(self.paths.root) in procs.cmdline(pid):
            return pid
        # slurmdbd takes no path argument: it finds slurmdbd.conf beside our $SLURM_CONF
        return pid if procs.environ(pid).get("SLURM_CONF") == str(self.paths.slurm_conf) else None

    def _wait_for(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise DevClusterError(f"timed out after {timeout:g} s waiting for {what}; {self._log_hint()}")
            time.sleep(0.2)

    def _log_hint(self) -> str:
        dead = [n for n in self.daemon_names() if self._own_pid(n) is None]
        tail = ""
        if dead:
            log_file = self.paths.log_dir / f"{dead[0]}.out"
            real = self.paths.log_dir / f"{dead[0]}.log"
            for f in (real, log_file):
                if f.exists() and f.stat().st_size:
                    tail = f"; last lines of {f}:\n" + "\n".join(f.read_text(errors="replace").splitlines()[-8:])
                    break
        return f"not running: {', '.join(dead) or 'none'}; logs in {self.paths.log_dir}{tail}"

    def _node_states(self) -> dict[str, str]:
        try:
            proc = run_slurm(["sinfo", "-h", "-N", "-o", "%N|%T"], self.env, timeout=10, check=False)
        except SlurmCommandError as exc:  # timed out: a controller still starting, or one that never will
            log.info("sinfo: %s", exc)
            return {}
        if proc.returncode != 0:
            return {}
        states: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            name, _, state = line.partition("|")
            states[name.strip()] = state.strip().lower()
        return states

    def _wait_nodes_ready(self, timeout: float) -> None:
        """Poll sinfo; resume nodes that come up drained or down once (new nodes do); fail with the logs."""
        deadline = time.monotonic() + timeout
        resumed: set[str] = set()
        while True:
            dead = [n for n in self.daemon_names() if self._own_pid(n) is None]
            if dead:
                raise DevClusterError(f"daemon exited during start; {self._log_hint()}")
            states = self._node_states()
            not_ready = {n: s for n, s in states.items() if s.rstrip("*~#!%$@^-") not in _READY_STATES}
            if states and not not_ready and set(states) >= set(self.layout.node_names()):
                return
            for node, state in not_ready.items():
                if node not in resumed and ("drain" in state or state.startswith("down")):
                    args = ["scontrol", "update", f"nodename={node}", "state=resume"]
                    if run_slurm(args, self.env, timeout=10, check=False).returncode == 0:
                        resumed.add(node)
            if time.monotonic() > deadline:
                raise DevClusterError(f"nodes not ready after {timeout:g} s: {not_ready or 'no answer from sinfo'}")
            time.sleep(0.5)

    # ---------------------------------------------------------------------------------------------- down

    def down(self, timeout: float = 30.0) -> None:
        """Cancel this cluster's jobs, stop its daemons and job steps by pid, and wait until all are gone."""
        if self._own_pid("slurmctld") is not None:
            try:
                run_slurm(["scancel", "--full", "--state=RUNNING"], self.env, timeout=10, check=False)
                run_slurm(["scancel", "--state=PENDING"], self.env, timeout=10, check=False)
            except SlurmCommandError as exc:
                log.warning("could not cancel jobs before stopping: %s", exc)
        steps = self._job_step_pids()
        acct = [n for n in ("slurmdbd", "mariadb") if n in self.daemon_names()]
        order = [n for n in self.daemon_names() if n.startswith("slurmd-")] + ["slurmctld", *acct, "munged"]
        left: list[int] = []
        slurmds = [n for n in order if n.startswith("slurmd-")]
        for group in (slurmds, ["slurmctld"], *([n] for n in acct), ["munged"]):
            pids = [pid for pid in (self._own_pid(n) for n in group) if pid is not None]
            left += procs.stop_pids(pids, timeout)
        left += procs.stop_pids(procs.descendants(steps), 10.0)
        for name in order:
            self.paths.pid_file(name).unlink(missing_ok=True)
            self._procs.pop(name, None)
        if left:
            raise DevClusterError(f"processes still alive after down: {left}")

    def _job_step_pids(self) -> list[int]:
        """slurmstepd processes of this cluster.

        On 22.05 a step inherits our SLURM_CONF from the slurmd that forked it; on 24.11 its environment is
        empty, but it keeps our slurmd's log file open and listens on a socket in our spool directory.
        """
        conf = str(self.paths.slurm_conf)
        root = str(self.paths.root) + "/"
        ours = procs.unix_socket_inodes(root)
        return [
            pid
            for pid in procs.all_pids()
            if procs.comm(pid) == "slurmstepd"
            and (procs.environ(pid).get("SLURM_CONF") == conf or procs.holds_path(pid, root, ours))
        ]

    # -------------------------------------------------------------------------------------------- status

    def status(self) -> ClusterStatus:
        """Each daemon (pid, running) and each node (Slurm state) as seen now."""
        daemons = tuple(
            DaemonStatus(name, procs.read_pid(self.paths.pid_file(name)), self._own_pid(name) is not None)
            for name in self.daemon_names()
        )
        states: dict[str, str] = {}
        if any(d.running for d in daemons if d.name == "slurmctld"):
            try:
                states = self._node_states()
            except SlurmCommandError as exc:
                log.warning("sinfo failed: %s", exc)
        nodes = tuple(
            NodeStatus(n.name, states.get(n.name, "not running"), n.gpu_type, n.gpus) for n in self.layout.nodes
        )
        return ClusterStatus(str(self.paths.root), self.cluster_name, str(self.paths.slurm_conf), daemons, nodes)
