"""The training loop inside a job: logical workers, checkpoint on signal, resume with any process count.

``run(spec)`` is the one entry point. Per global step every process runs its logical workers in turn (each with
its own RNG context and data slice), the gradients are combined in virtual-rank order, and the replicated
optimizer steps. At every step boundary the ranks agree whether the checkpoint signal arrived anywhere; if it
did, all stop after that same step, rank 0 saves everything atomically and the job requeues.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import default_collate

from slurmplan.domain import Measurement, ValidationError
from slurmplan.launch import dist
from slurmplan.launch.activation import apply_activation_checkpointing
from slurmplan.launch.checkpoint import CheckpointStore
from slurmplan.launch.determinism import RngContext, enable_determinism, worker_seed
from slurmplan.launch.ests import GradientCombiner, WorkerSampler, assign_workers
from slurmplan.launch.plan_env import AssignedPlan, load_assigned_plan
from slurmplan.launch.reports import ThroughputMeter, append_report, peak_memory_gb, report_path
from slurmplan.launch.requeue import RequeueMode, requeue_job
from slurmplan.launch.signals import StopFlag, resolve_signal
from slurmplan.launch.spec import Outcome, TrainResult, TrainSpec

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def resolve_micro_batch(spec: TrainSpec, assigned: AssignedPlan) -> int:
    """The micro-batch inside a worker: the spec's; the plan's only when the spec opts in and it divides the
    worker batch (a different split changes the rounding, so by default a new plan never changes it)."""
    if spec.micro_batch is not None:
        return spec.micro_batch
    mb = assigned.plan.micro_batch
    if spec.follow_plan_micro_batch and assigned.managed:
        if spec.worker_batch % mb == 0:
            return mb
        log.warning(
            "plan micro_batch %d does not divide worker_batch %d; using %d", mb, spec.worker_batch, spec.worker_batch
        )
    return spec.worker_batch


class Trainer:
    """One process's share of the job. Built and driven by :func:`run`; holds no global state."""

    def __init__(self, spec: TrainSpec, assigned: AssignedPlan, denv: dist.DistEnv, device: torch.device) -> None:
        self.spec, self.assigned, self.denv, self.device = spec, assigned, denv, device
        self.micro_batch = resolve_micro_batch(spec, assigned)
        self.grad_accum = spec.worker_batch // self.micro_batch
        torch.manual_seed(spec.seed)  # identical initial parameters on every process
        self.model: nn.Module = spec.model_factory().to(device)
        checkpointing = (
            assigned.plan.checkpointing if spec.activation_checkpointing is None else spec.activation_checkpointing
        )
        if checkpointing:
            apply_activation_checkpointing(self.model, spec.checkpoint_modules)
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in self.model.modules()):
            log.warning("BatchNorm running statistics are per process: bitwise equality across spreads is lost")
        self.optimizer = spec.optimizer_factory(self.model.parameters())
        self.scheduler = spec.scheduler_factory(self.optimizer) if spec.scheduler_factory else None
        self.assignment = assign_workers(spec.max_p, denv.world_size)
        self.local = self.assignment[denv.rank]
        self.contexts = {v: RngContext.seeded(worker_seed(spec.seed, v)) for v in self.local}
        self.sampler = WorkerSampler(len(spec.dataset), spec.max_p, spec.worker_batch, spec.seed, spec.shuffle)
        self.combiner = GradientCombiner(list(self.model.parameters()), self.assignment, denv.rank)
        self.collate = spec.collate_fn or default_collate
        self.store = CheckpointStore(spec.checkpoint_dir, spec.keep_checkpoints) if spec.checkpoint_dir else None
        self.step = 0

    # ------------------------------------------------------------------ one global step

    def _loss(self, batch: Any) -> torch.Tensor:
        if self.spec.batch_loss is not None:
            return self.spec.batch_loss(self.model, batch)
        inputs, targets = batch
        return self.spec.loss_fn(self.model(inputs), targets)  # type: ignore[misc]

    def train_step(self) -> float:
        """One global step; returns the mean loss of this process's workers (for logging only)."""
        self.model.train()
        losses = []
        for v in self.local:
            self.contexts[v].restore()
            for micro in range(self.grad_accum):
                idx = self.sampler.indices(self.step, v, micro, self.micro_batch)
                batch = _to_device(self.collate([self.spec.dataset[i] for i in idx]), self.device)
                loss = self._loss(batch)
                (loss / self.grad_accum if self.grad_accum > 1 else loss).backward()
                losses.append(float(loss.detach()))
            self.contexts[v] = RngContext.capture()
            self.combiner.take()
        self.combiner.combine()
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return sum(losses) / len(losses)

    # ------------------------------------------------------------------ checkpoint state

    def save(self) -> Path | None:
        """Collective: gather every worker's context to rank 0, which writes the checkpoint atomically."""
        if self.store is None:
            return None
        contexts = {v: ctx.to_state() for v, ctx in self.contexts.items()}
        gathered = dist.gather_objects(contexts)
        path = None
        if self.denv.is_main:
            workers: dict[int, Any] = {}
            for part in gathered:
                workers.update(part)
            state = {
                "format": CHECKPOINT_FORMAT,
                "step": self.step,
                "max_p": self.spec.max_p,
                "worker_batch": self.spec.worker_batch,
                "seed": self.spec.seed,
                "micro_batch": self.micro_batch,
                "world_size": self.denv.world_size,
                "plan": dataclasses.asdict(self.assigned.plan),
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "workers": workers,
            }
            path = self.store.save(state, self.step)
        dist.barrier()
        return path

    def resume(self) -> int | None:
        """Load the latest complete checkpoint, if any; returns its step."""
        if self.store is None:
            return None
        state = self.store.load(map_location=self.device)
        if state is None:
            return None
        for name in ("max_p", "worker_batch", "seed"):
            if state[name] != getattr(self.spec, name):
                raise ValidationError(name, getattr(self.spec, name), f"{state[name]} as in the checkpoint", "resume")
        if state["micro_batch"] != self.micro_batch:
            log.warning("micro_batch %d -> %d: same maths, different rounding", state["micro_batch"], self.micro_batch)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        for v in self.local:
            self.contexts[v] = RngContext.from_state(state["workers"][v])
        self.step = int(state["step"])
        log.info(
            "resumed at step %d (saved by %d processes, now %d)", self.step, state["world_size"], self.denv.world_size
        )
        return self.step

    def measurement(self, rate: float) -> Measurement:
        gpu_type = self.assigned.gpu_type or (
            "cpu" if self.device.type == "cpu" else torch.cuda.get_device_name(self.device).lower()
        )
        job = os.environ.get("SLURM_JOB_ID")
        return Measurement(
            model=self.spec.model_name,
            gpu_type=gpu_type,
            gpus=self.denv.world_size,
            plan=self.assigned.plan,
            samples_per_s=rate,
            nodes=int(os.environ.get("SLURM_NNODES", "1") or 1),
            memory_gb=round(peak_memory_gb(self.device), 3),
            job_id=int(job) if job and job.isdigit() else None,
            time=time.time(),
        )


def _device(denv: dist.DistEnv, backend: str) -> torch.device:
    if backend == "nccl":
        return torch.device("cuda", denv.local_rank % max(1, torch.cuda.device_count()))
    return torch.device("cpu")


def _report(trainer: Trainer, meter: ThroughputMeter, force: bool) -> float | None:
    if not trainer.denv.is_main or not (force or meter.due()):
        return None
    rate = meter.take()
    if rate is not None:
        append_report(trainer.measurement(rate), report_path())
    return rate


def _requeue(spec: TrainSpec, flag: StopFlag, assigned: AssignedPlan, is_main: bool) -> Outcome:
    """After the checkpoint: hand over to submitit's handler when run by submitit, else requeue through Slurm."""
    if spec.requeue is RequeueMode.NONE:
        return Outcome.CHECKPOINTED
    if spec.requeue is RequeueMode.AUTO and flag.previous_is_submitit:
        previous = flag.previous
        flag.uninstall()
        log.info("delegating requeue to the handler installed before the launcher (submitit)")
        previous(int(flag.signum), None)  # type: ignore[operator]  # submitit exits here on rank 0
        return Outcome.REQUEUED
    if not is_main or "SLURM_JOB_ID" not in os.environ:
        return Outcome.CHECKPOINTED
    result = requeue_job(hold=assigned.managed, max_requeues=spec.max_requeues)
    return Outcome.REQUEUED if result.requeued else Outcome.CHECKPOINTED


def run(spec: TrainSpec, assigned: AssignedPlan | None = None) -> TrainResult:
    """Train ``spec`` in this process (one of the job's processes), resuming from its latest checkpoint."""
    flag = StopFlag(resolve_signal(spec.checkpoint_signal)).install()  # first: USR2's default action kills
    try:
        enable_determinism(spec.cpu_threads)
        denv = dist.DistEnv.from_env()
        backend = spec.backend or dist.default_backend()
        dist.init(denv, backend)
        if assigned is None:
            assigned = dist.broadcast_object(load_assigned_plan(query_slurm=denv.is_main) if denv.is_main else None)
        if assigned.managed and assigned.plan.dp != denv.world_size:
            log.warning("plan has dp=%d but the job runs %d processes", assigned.plan.dp, denv.world_size)
        trainer = Trainer(spec, assigned, denv, _device(denv, backend))
        resumed = trainer.resume()
        meter, rate, outcome = ThroughputMeter(spec.report_every_s), None, Outcome.FINISHED
        while trainer.step < spec.steps:
            loss = trainer.train_step()
            meter.step_done(spec.global_batch)
            if spec.on_step is not None:
                spec.on_step(trainer.step, loss)
            if trainer.step % max(1, spec.log_every) == 0 and denv.is_main:
                log.info("step %d/%d loss %.5f", trainer.step, spec.steps, loss)
            rate = _report(trainer, meter, force=False) or rate
            if dist.any_rank(flag.triggered, trainer.device):
                log.info("checkpoint signal: stopping after step %d", trainer.step)
                outcome = Outcome.CHECKPOINTED
                break
            if spec.checkpoint_every and trainer.step % spec.checkpoint_every == 0 and trainer.step < spec.steps:
                trainer.save()
        rate = _report(trainer, meter, force=True) or rate
        path = trainer.save()
        dist.shutdown()
        if outcome is Outcome.CHECKPOINTED:
            outcome = _requeue(spec, flag, assigned, denv.is_main)
        return TrainResult(outcome, trainer.step, denv.world_size, path, rate, resumed)
    finally:
        flag.uninstall()
        dist.shutdown()
