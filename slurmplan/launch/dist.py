"""Which process this is, and the few collective operations the launcher needs.

The process layout comes from torchrun's variables (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...) when present,
else from an ``srun`` step (``SLURM_PROCID``, ``SLURM_NTASKS``...). A batch script run without ``srun`` is a
single process even when the job asked for several tasks. With one process no process group is created at
all, so a one-GPU job needs no free port.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as tdist

from slurmplan.domain import ValidationError

log = logging.getLogger(__name__)

_FIRST_HOST = re.compile(r"^(?P<prefix>[^\[,]+)(?:\[(?P<first>[0-9]+))?")


def first_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist (``gpu[03-05,9],cpu1`` -> ``gpu03``) without calling scontrol."""
    match = _FIRST_HOST.match(nodelist.strip())
    if not match:
        raise ValidationError("nodelist", nodelist, "a Slurm hostlist such as node[01-04]", "SLURM_JOB_NODELIST")
    return match["prefix"] + (match["first"] or "")


def reachable(host: str, env: Mapping[str, str]) -> str:
    """``host`` if it resolves, else the address of the node srun was started from (rank 0's node in a batch
    job); node names that are not host names occur on virtual-node clusters such as the dev cluster."""
    try:
        socket.gethostbyname(host)
        return host
    except OSError:
        fallback = env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1"
        log.info("node name %s does not resolve; rendezvous at %s", host, fallback)
        return fallback


def rendezvous_host(nodelist: str, env: Mapping[str, str], one_node: bool) -> str:
    """Where rank 0 listens: loopback when every process is on one node (no name lookup, no route off the
    machine to get wrong), else the first node of ``nodelist`` as ``reachable`` finds it."""
    if one_node:
        return "127.0.0.1"
    return reachable(first_host(nodelist), env)


@dataclass(frozen=True)
class DistEnv:
    """One process's place in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DistEnv:
        env = os.environ if env is None else env
        if "RANK" in env and "WORLD_SIZE" in env:
            return cls(
                rank=int(env["RANK"]),
                world_size=int(env["WORLD_SIZE"]),
                local_rank=int(env.get("LOCAL_RANK", "0")),
                master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
                master_port=int(env.get("MASTER_PORT", "29500")),
            )
        if "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:
            job_id = int(env.get("SLURM_JOB_ID", "0"))
            nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
            return cls(
                rank=int(env["SLURM_PROCID"]),
                world_size=int(env.get("SLURM_NTASKS", env.get("SLURM_STEP_NUM_TASKS", "1"))),
                local_rank=int(env.get("SLURM_LOCALID", "0")),
                master_addr=env.get("MASTER_ADDR")
                or rendezvous_host(nodelist, env, (env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES")) == "1"),
                master_port=int(env.get("MASTER_PORT") or 20000 + job_id % 20000),
            )
        return cls()

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def default_backend() -> str:
    return "nccl" if torch.cuda.is_available() else "gloo"


def init(env: DistEnv, backend: str | None = None, timeout_s: float = 600.0) -> None:
    """Join the process group (no-op for one process)."""
    if env.world_size == 1 or tdist.is_initialized():
        return
    import datetime

    backend = backend or default_backend()
    if backend == "nccl":
        visible = torch.cuda.device_count()
        if env.local_rank >= visible:  # CUDA's own word for it is "invalid device ordinal", raised mid-start
            allowed = (
                f"below the {visible} GPU(s) this process sees: start one process per GPU of the node"
                " (srun --ntasks-per-node, or --nproc, at most the GPUs; or the gloo backend for a CPU run)"
            )
            raise ValidationError("LOCAL_RANK", env.local_rank, allowed, "launcher (NCCL)")
        torch.cuda.set_device(env.local_rank)
    tdist.init_process_group(
        backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    log.info(
        "rank %d/%d joined the %s group at %s:%d", env.rank, env.world_size, backend, env.master_addr, env.master_port
    )


def shutdown() -> None:
    if tdist.is_initialized():
        tdist.destroy_process_group()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when any rank's flag is set: how all ranks agree to stop after the same step."""
    if not tdist.is_initialized():
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return bool(t.item())


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """The element-wise sum of every rank's tensor, on every rank (in place)."""
    if tdist.is_initialized():
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return t


def all_gather_tensor(t: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's tensor (all the same shape), in rank order."""
    if not tdist.is_initialized():
        return [t]
    out = [torch.empty_like(t) for _ in range(tdist.get_world_size())]
    tdist.all_gather(out, t)
    return out


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's picklable object, in rank order (for the small per-worker contexts at a checkpoint)."""
    if not tdist.is_initialized():
        return [obj]
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    if tdist.is_initialized():
        tdist.barrier()


def broadcast_object(obj: Any) -> Any:
    """Rank 0's object on every rank."""
    if not tdist.is_initialized():
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=0)
    return box[0]
