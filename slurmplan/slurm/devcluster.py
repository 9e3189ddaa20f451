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
from slurmplan.slurm import procs
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


def install_packages() -> None:
    """apt-get install Debian's Slurm and munge packages (only when asked with ``--install``)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *DEBIAN_PACKAGES]):
        log.info("running %s", " ".join(argv))
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise DevClusterError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")


class DevCluster:
    """One local cluster, identified by its state directory. ``up`` is idempotent; ``down`` stops it all."""

    def __init__(self, layout: Layout | None = None, state_dir: str | Path | None = None) -> None:
        self.layout = layout if layout is not None else load_layout()
        self.paths = ClusterPaths(Path(state_dir or default_state_dir()).resolve())
        self.cluster_name = "dev" + hashlib.sha1(str(self.paths.root).encode()).hexdigest()[:8]
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def env(self) -> dict[str, str]:
        """What a subprocess needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.paths.slurm_conf)}

    def daemon_names(self) -> list[str]:
        return ["munged", "slurmctld", *(f"slurmd-{n}" for n in self.layout.node_names())]

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
            self._wait_nodes_ready(timeout)
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
        p.state_file.write_text(
            json.dumps({"cluster_name": self.cluster_name, "slurmctld_port": ctld_port, "node_ports": node_ports})
        )
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
        return render_slurm_conf(self.layout, self.paths, self.cluster_name, ctld_port, node_ports, host)

    def _choose_ports(self) -> tuple[int, dict[str, int]]:
        """Requested ports must be free (else refuse); others reuse the last run's when free, or pick new."""
        try:
            previous = json.loads(self.paths.state_file.read_text())
        except (OSError, ValueError):
            previous = {}
        wanted: dict[str, int | None] = {"slurmctld": self.layout.slurmctld_port}
        wanted.update({n.name: n.port for n in self.layout.nodes})
        old = {"slurmctld": previous.get("slurmctld_port"), **previous.get("node_ports", {})}
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
        node = name.removeprefix("slurmd-")
        return ["slurmd", "-D", "-N", node, "-f", str(p.slurm_conf)]

    def _start(self, name: str) -> None:
        if name.startswith("slurmd-") or name == "slurmctld":
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

    def _port_of(self, name: str) -> int | None:
        try:
            state = json.loads(self.paths.state_file.read_text())
        except (OSError, ValueError):
            return None
        if name == "slurmctld":
            return state.get("slurmctld_port")
        return state.get("node_ports", {}).get(name.removeprefix("slurmd-"))

    def _own_pid(self, name: str) -> int | None:
        """The pid of daemon ``name`` if it runs and is ours (its command line names our state directory)."""
        proc = self._procs.get(name)
        if proc is not None:  # started by this object: no need to read its command line
            return proc.pid if proc.poll() is None else None
        pid = procs.read_pid(self.paths.pid_file(name))
        if pid is None or not procs.is_alive(pid):
            return None
        return pid if str(self.paths.root) in procs.cmdline(pid) else None

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
        order = [n for n in self.daemon_names() if n.startswith("slurmd-")] + ["slurmctld", "munged"]
        left: list[int] = []
        for group in (order[:-2], ["slurmctld"], ["munged"]):
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
