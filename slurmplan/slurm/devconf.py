"""Renders slurm.conf and gres.conf for a local development cluster.

Pure functions from a layout plus the chosen paths and ports to file text, so the configuration can be read
and tested without starting anything. The settings follow what was checked on Debian's Slurm 22.05 (see
DESIGN.md): one NodeName line per virtual node on localhost with its own port, ``config_overrides`` so a
node may declare more CPUs than the host has, placeholder GPU files, no cgroups.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurmplan.slurm.devlayout import Layout, NodeSpec


@dataclass(frozen=True)
class ClusterPaths:
    """Every file and directory one development cluster uses; all of them live under ``root``."""

    root: Path

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    @property
    def slurm_conf(self) -> Path:
        return self.conf_dir / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.conf_dir / "gres.conf"

    @property
    def cgroup_conf(self) -> Path:
        return self.conf_dir / "cgroup.conf"

    @property
    def plugstack_conf(self) -> Path:
        return self.conf_dir / "plugstack.conf"

    @property
    def munge_dir(self) -> Path:
        return self.root / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    @property
    def spool_dir(self) -> Path:
        return self.root / "spool"

    @property
    def state_save(self) -> Path:
        return self.spool_dir / "ctld"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def gpu_dir(self) -> Path:
        return self.root / "gpus"

    @property
    def state_file(self) -> Path:
        """Ports and cluster name chosen at the first ``up``, kept so a restart reuses them."""
        return self.root / "cluster.json"

    def pid_file(self, daemon: str) -> Path:
        return self.run_dir / f"{daemon}.pid"

    def gpu_files(self, node: NodeSpec) -> list[Path]:
        return [self.gpu_dir / node.name / f"gpu{i}" for i in range(node.gpus)]


def render_slurm_conf(
    layout: Layout, paths: ClusterPaths, cluster_name: str, ctld_port: int, node_ports: dict[str, int], host: str
) -> str:
    """The full slurm.conf text; ``layout.slurm_conf_extra`` lines come last so they can override."""
    gpu_types = sorted({n.gpu_type for n in layout.nodes if n.gpu_type})
    lines = [
        "# Written by `slurmplan devcluster up`; regenerated on every start.",
        f"ClusterName={cluster_name}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # cred_expire: a requeued batch job becomes eligible again cred_expire+1 s later (121 s by default)
        f"AuthInfo=socket={paths.munge_socket}" + (f",cred_expire={layout.cred_expire}" if layout.cred_expire else ""),
        f"StateSaveLocation={paths.state_save}",
        f"SlurmdSpoolDir={paths.spool_dir}/slurmd-%n",
        f"SlurmctldPidFile={paths.pid_file('slurmctld-own')}",
        f"SlurmdPidFile={paths.run_dir}/slurmd-%n-own.pid",
        f"SlurmctldLogFile={paths.log_dir}/slurmctld.log",
        f"SlurmdLogFile={paths.log_dir}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"PlugStackConfig={paths.plugstack_conf}",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "DefMemPerCPU=1024",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=2,bf_interval=2",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        f"GresTypes={'gpu' if gpu_types else ''}".rstrip("="),
        "ReturnToService=2",
        "JobRequeue=1",
        "MinJobAge=600",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmctldTimeout=60",
        "SlurmdTimeout=300",
        "MessageTimeout=20",
        "UnkillableStepTimeout=100",  # 24.11 logs an error below 5 x MessageTimeout (nodes go down KillTaskFailed)
        "",
    ]
    if not gpu_types:
        lines = [ln for ln in lines if not ln.startswith("GresTypes")]
    for node in layout.nodes:
        lines.append(_node_line(node, node_ports[node.name]))
    lines.append("")
    for part in layout.partitions:
        default = "YES" if part.default else "NO"
        lines.append(
            f"PartitionName={part.name} Nodes={','.join(part.nodes)} Default={default} "
            f"MaxTime={part.max_time} PriorityTier={part.priority_tier} State=UP"
        )
    if layout.slurm_conf_extra:
        lines += ["", "# slurm_conf_extra from the layout", *layout.slurm_conf_extra]
    return "\n".join(lines) + "\n"


def _node_line(node: NodeSpec, port: int) -> str:
    parts = [
        f"NodeName={node.name}",
        "NodeHostname=localhost",
        "NodeAddr=127.0.0.1",
        f"Port={port}",
        f"CPUs={node.cpus}",
        f"RealMemory={node.memory_mb}",
    ]
    if node.gpus:
        parts.append(f"Gres=gpu:{node.gpu_type}:{node.gpus}")
    if node.features:
        parts.append(f"Feature={','.join(node.features)}")
    parts.append("State=UNKNOWN")
    return " ".join(parts)


def render_cgroup_conf(version: tuple[int, int]) -> str | None:
    """cgroup.conf for Slurm ``version``, or None to write none.

    22.05 runs without one (and has no ``CgroupPlugin=disabled``); 24.11's slurmd initialises a cgroup plugin
    even with ``proctrack/linuxproc`` and ``task/none`` and exits ("Unable to initialize cgroup plugin") where
    no cgroup filesystem is mounted, as in a container, unless the plugin is disabled (checked on 24.11.5).
    """
    if version < (23, 2):
        return None
    return "# Written by `slurmplan devcluster up`: no cgroups in a development cluster\nCgroupPlugin=disabled\n"


def render_gres_conf(layout: Layout, paths: ClusterPaths) -> str:
    """One line per GPU node; slurmd drops a GPU GRES that has no ``File=``, so each GPU gets a placeholder."""
    lines = ["# Written by `slurmplan devcluster up`: placeholder files stand in for GPU devices."]
    for node in layout.nodes:
        if not node.gpus:
            continue
        files = paths.gpu_dir / node.name / (f"gpu[0-{node.gpus - 1}]" if node.gpus > 1 else "gpu0")
        lines.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={files}")
    return "\n".join(lines) + "\n"
