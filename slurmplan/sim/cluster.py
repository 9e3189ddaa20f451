"""Simulated clusters: the ``--cluster`` spec and the nodes it stands for.

``v100:36,p100:36,k80:36`` means 36 single-GPU nodes of each type (Gavel simulates one GPU per server);
``a100:80x4`` means 80 nodes of 4 GPUs. Nodes get generous CPUs and memory so that, unless a candidate asks for
more, only GPUs bind, as in the papers' simulators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmplan.domain import GpuType, Node, NodeState, ValidationError

CRIUS_CLUSTER = "a100:80x4,a40:160x2,a10:160x2,v100:20x16"
"""Crius's simulated cluster (Table 3): 320 GPUs of each of four types, 1,280 in all."""
GAVEL_CLUSTER = "v100:36,p100:36,k80:36"
"""The continuous-trace cluster of Gavel's thesis (108 GPUs)."""
DEV_CLUSTER = "a100:2x4,v100:2x4,t4:2x2"
"""The development cluster's default layout (``site/devcluster/default.yaml``, 20 GPUs): what the replay-like
traces are made for and what ``slurmplan replay`` predicts on."""

_PART = re.compile(r"^(?P<type>[a-z0-9][a-z0-9_.-]*):(?P<count>\d+)(?:x(?P<per>\d+))?$")


@dataclass(frozen=True)
class NodeGroup:
    gpu_type: GpuType
    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class ClusterSpec:
    """What ``--cluster`` names; ``nodes()`` builds the Slurm-like nodes the backend starts from."""

    groups: tuple[NodeGroup, ...]
    cpus_per_gpu: int = 16
    memory_mb_per_gpu: int = 128 * 1024

    @property
    def total_gpus(self) -> int:
        return sum(g.gpus for g in self.groups)

    def gpus_by_type(self) -> dict[GpuType, int]:
        out: dict[GpuType, int] = {}
        for g in self.groups:
            out[g.gpu_type] = out.get(g.gpu_type, 0) + g.gpus
        return out

    def nodes(self) -> tuple[Node, ...]:
        out = []
        for group in self.groups:
            for i in range(group.nodes):
                out.append(
                    Node(
                        name=f"{group.gpu_type}-{i:04d}",
                        state=NodeState.IDLE,
                        gpu_type=group.gpu_type,
                        gpus=group.gpus_per_node,
                        cpus=group.gpus_per_node * self.cpus_per_gpu,
                        memory_mb=group.gpus_per_node * self.memory_mb_per_gpu,
                        partitions=("gpu",),
                    )
                )
        return tuple(out)

    def __str__(self) -> str:
        return ",".join(
            f"{g.gpu_type}:{g.nodes}" + (f"x{g.gpus_per_node}" if g.gpus_per_node != 1 else "") for g in self.groups
        )


def parse_cluster(spec: str) -> ClusterSpec:
    """Parse ``type:NODES[xGPUS_PER_NODE],...``; a GPU type may appear only once."""
    groups: list[NodeGroup] = []
    seen: set[str] = set()
    for part in (p.strip().lower() for p in spec.split(",")):
        match = _PART.match(part)
        if not match:
            raise ValidationError("cluster", part, "TYPE:NODES or TYPE:NODESxGPUS_PER_NODE, e.g. a100:80x4", "cluster")
        gpu = match["type"]
        nodes, per = int(match["count"]), int(match["per"] or 1)
        if nodes < 1 or per < 1:
            raise ValidationError("cluster", part, "positive node and GPU counts", "cluster")
        if gpu in seen:
            raise ValidationError("cluster", gpu, "each GPU type once", "cluster")
        seen.add(gpu)
        groups.append(NodeGroup(gpu, nodes, per))
    return ClusterSpec(tuple(groups))
