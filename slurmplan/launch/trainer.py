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

from slurmplan.domain import Measurement, SlurmplanError, ValidationError
from slurmplan.launch import dist
from slurmplan.launch.activation import apply_activation_checkpointing
from slurmplan.launch.buffers import WorkerBuffers
from slurmplan.launch.checkpoint import CheckpointError, CheckpointStore, describe_mismatch
from slurmplan.launch.determinism import RngContext, enable_determinism, worker_seed
from slurmplan.launch.ests import GradientCombiner, WorkerSampler, assign_workers
from slurmplan.launch.ownership import Owner, claim
from slurmplan.launch.plan_env import AssignedPlan, load_assigned_plan
from slurmplan.launch.reports import Progress, ThroughputMeter, append_report, peak_memory_gb, report_path
from slurmplan.launch.requeue import RequeueMode, requeue_job
from slurmplan.launch.signals import StopFlag, resolve_signal
from slurmplan.launch.spec import Outcome, TrainResult, TrainSpec
from slurmplan.perf.hardware import gpu_type_of_device
from slurmplan.perf.stacks import stack_for_adapter

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 2
"""2: ``workers[v]`` also holds the worker's module buffers (``"buffers"``); format 1 checkpoints still load."""
TRAINER_STACK = stack_for_adapter("ddp").name
"""The framework this trainer is, as its throughput reports say (``Measurement.stack``): data parallelism with its
own gradient buckets over eager PyTorch, which is the performance model's ``ddp`` stack (unfused kernels, no
tensor or pipeline parallelism). The daemon's refit predicts the report under it, whatever the job's hint said."""


class ReportedByAnotherRank(SlurmplanError):
    """Raised on the other ranks when rank 0 found (and reports) an error that stops the whole job."""


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
    worker batch (a different split changes results with dropout, augmentation or BatchNorm, and the rounding
    otherwise, so by default a new plan never changes it)."""
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
        self.optimizer = spec.optimizer_factory(self.model.parameters())
        self.scheduler = spec.scheduler_factory(self.optimizer) if spec.scheduler_factory else None
        self.assignment = assign_workers(spec.max_p, denv.world_size)
        self.local = self.assignment[denv.rank]
        self.contexts = {v: RngContext.seeded(worker_seed(spec.seed, v)) for v in self.local}
        self.buffers = WorkerBuffers(self.model, self.local)
        self.sampler = WorkerSampler(len(spec.dataset), spec.max_p, spec.worker_batch, spec.seed, spec.shuffle)
        self.combiner = GradientCombiner(list(self.model.parameters()), self.assignment, denv.rank)
        self.collate = spec.collate_fn or default_collate
        self.store = CheckpointStore(spec.checkpoint_dir, spec.keep_checkpoints) if spec.checkpoint_dir else None
        self.step = 0
        self.checkpoint_step: int | None = None
        """Step of the newest checkpoint this job wrote or resumed from (for the progress in reports)."""

    # ------------------------------------------------------------------ one global step

    def _loss(self, batch: Any) -> torch.Tensor:
        if self.spec.batch_loss is not None:
            return self.spec.batch_loss(self.model, batch)
        inputs, targets = batch
        return self.spec.loss_fn(self.model(inputs), targets)  # type: ignore[misc]

    def train_step(self) -> dict[int, float]:
        """One global step; returns each of this process's workers' loss (mean over its micro-batches)."""
        self.model.train()
        losses: dict[int, list[torch.Tensor]] = {}
        for v in self.local:
            worker: list[torch.Tensor] = []
            self.contexts[v].restore()
            self.buffers.enter(v)
            for micro in range(self.grad_accum):
                idx = self.sampler.indices(self.step, v, micro, self.micro_batch)
                batch = _to_device(self.collate([self.spec.dataset[i] for i in idx]), self.device)
                loss = self._loss(batch)
                if micro == self.grad_accum - 1:
                    self.combiner.arm()  # no-op unless this is the process's last worker
                (loss / self.grad_accum if self.grad_accum > 1 else loss).backward()
                worker.append(loss.detach())  # read after the step: a read here waits for the GPU every micro-batch
            losses[v] = worker
            self.contexts[v] = RngContext.capture()
            self.buffers.leave(v)
            self.combiner.take()
        self.buffers.enter(self.local[0])
        self.combiner.combine()
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return {v: sum(float(x) for x in worker) / len(worker) for v, worker in losses.items()}

    def global_loss(self, losses: dict[int, float]) -> float:
        """Collective: the mean loss over all ``max_p`` logical workers, bitwise the same on any process count.

        Each rank puts its workers' losses in their virtual-rank slots of a zero vector and the vectors are summed
        (adding zeros is exact, so every rank then holds every worker's value unchanged); the mean is then taken
        in virtual-rank order. Before, rank 0 logged its own workers' mean: 2.32164 on 1 process, 2.31622 on 4.
        """
        slots = torch.zeros(self.spec.max_p, dtype=torch.float64, device=self.device)
        for v, value in losses.items():
            slots[v] = value
        every = dist.all_reduce_sum(slots).tolist()
        return sum(every) / len(every)

    # ------------------------------------------------------------------ checkpoint state

    def save(self) -> Path | None:
        """Collective: gather every worker's context to rank 0, which writes the checkpoint atomically."""
        if self.store is None:
            return None
        contexts = {v: {**ctx.to_state(), "buffers": self.buffers.state(v)} for v, ctx in self.contexts.items()}
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
                "job_id": os.environ.get("SLURM_JOB_ID") or "local",
            }
            path = self.store.save(state, self.step)
        self.checkpoint_step = self.step
        dist.barrier()
        return path

    def _check_state(self, state: dict[str, Any], folder: Path) -> None:
        """Raise a clear error when ``state`` was not saved by this job's spec and model."""
        keys = ("model", "step", "max_p", "worker_batch", "seed", "workers")
        missing = [k for k in keys if k not in state] if isinstance(state, dict) else list(keys)
        if missing:
            raise CheckpointError(f"checkpoint {folder} is not a slurmplan launcher checkpoint (no {missing})")
        for name in ("max_p", "worker_batch", "seed"):
            if state[name] != getattr(self.spec, name):
                allowed = f"{state[name]} as in the checkpoint {folder}"
                raise ValidationError(name, getattr(self.spec, name), allowed, "resume")
        mismatch = describe_mismatch(state["model"], self.model.state_dict())
        if mismatch:
            raise CheckpointError(f"checkpoint {folder} was saved by a different model: {mismatch}")

    def _choose_checkpoint(self) -> tuple[str | None, str | None]:
        """Rank 0: (folder to resume from or None, error message or None), after checking the folder is writable."""
        assert self.store is not None
        try:
            self.store.check_writable()
            claim(self.store.root, Owner.of_this_process())  # refuses a folder another live job holds
            found = self.store.load_newest_intact(map_location=self.device)
            if found is None:
                return None, None
            folder, state = found
            self._check_state(state, folder)
            writer = state.get("job_id", "unknown (saved before job ids were recorded)")
            log.info("resuming from %s: step %s, written by job %s", folder, state.get("step"), writer)
            self._loaded = state
            return str(folder), None
        except SlurmplanError as exc:
            return None, str(exc)

    def resume(self) -> int | None:
        """Load the newest intact checkpoint, if any; returns its step.

        Collective: rank 0 checks the folder is writable (now, not at the final save), picks the newest
        checkpoint that loads, and checks it was saved by this model; every rank then loads that same folder. An
        error stops every rank: rank 0 raises it and the others raise :class:`ReportedByAnotherRank`.
        """
        if self.store is None:
            return None
        self._loaded: dict[str, Any] | None = None
        choice = self._choose_checkpoint() if self.denv.is_main else None
        folder, error = dist.broadcast_object(choice)
        if error is not None:
            if self.denv.is_main:
                raise CheckpointError(error)
            raise ReportedByAnotherRank(f"rank 0 stopped the job: {error}")
        if folder is None:
            return None
        state = self._loaded if self._loaded is not None else self.store.load(Path(folder), self.device)
        self._loaded = None
        assert state is not None
        if state["micro_batch"] != self.micro_batch:
            log.warning(
                "micro_batch %d -> %d: results change (dropout, augmentation, BatchNorm) from here on",
                state["micro_batch"],
                self.micro_batch,
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        for v in self.local:
            self.contexts[v] = RngContext.from_state(state["workers"][v])
            if "buffers" in state["workers"][v]:
                self.buffers.load(v, state["workers"][v]["buffers"])
        self.buffers.enter(self.local[0])
        self.step = int(state["step"])
        self.checkpoint_step = self.step
        log.info(
            "resumed at step %d (saved by %d processes, now %d)", self.step, state["world_size"], self.denv.world_size
        )
        return self.step

    def measurement(self, rate: float) -> Measurement:
        gpu_type = self.assigned.gpu_type or ("cpu" if self.device.type == "cpu" else _device_type(self.device))
        job = os.environ.get("SLURM_JOB_ID")
        return Measurement(
            model=self.assigned.model or self.spec.model_name,  # the hint's name: what the daemon looks up
            gpu_type=gpu_type,
            gpus=self.denv.world_size,
            plan=self.assigned.plan,
            samples_per_s=rate,
            nodes=int(os.environ.get("SLURM_NNODES", "1") or 1),
            memory_gb=round(peak_memory_gb(self.device), 3),
            job_id=int(job) if job and job.isdigit() else None,
            time=time.time(),
            stack=TRAINER_STACK,
        )


def _device_type(device: torch.device) -> str:
    """The GPU type a job without a plan reports: the catalog's name where it knows the device, else its own."""
    name = torch.cuda.get_device_name(device)
    try:
        return gpu_type_of_device(name) or name.lower()
    except (SlurmplanError, OSError) as exc:  # a site catalog that does not load must not stop the training
        log.warning("GPU catalog unreadable (%s): reporting the device as %r", exc, name.lower())
        return name.lower()


def check_workers(spec: TrainSpec, assigned: AssignedPlan, denv: dist.DistEnv) -> None:
    """Stop at start, with what to change, when the script's ``max_p`` cannot serve this job.

    Two ways it cannot: the job's ``--plan-workers`` hint differs from ``max_p`` (the daemon sizes the job up to
    that many GPUs, so it would fail on the first resize beyond ``max_p``), or the job already runs more processes
    than ``max_p``. Rank 0 raises the error; the others raise :class:`ReportedByAnotherRank`, so the job's log
    shows it once, not once per GPU.
    """
    error: ValidationError | None = None
    if assigned.workers is not None and assigned.workers != spec.max_p:
        allowed = (
            f"{assigned.workers}, the job's --plan-workers (workers={assigned.workers} in its hints): pass"
            f" --max-p {assigned.workers} to the training script, or submit with --plan-workers={spec.max_p}"
        )
        error = ValidationError("max_p", spec.max_p, allowed, "launcher")
    else:
        try:
            assign_workers(spec.max_p, denv.world_size)
        except ValidationError as exc:
            error = exc
    if error is None:
        return
    if denv.is_main:
        raise error
    raise ReportedByAnotherRank(f"rank 0 stopped the job: {error}")


def quiet_other_ranks() -> None:
    """Every rank runs the same steps: only rank 0 logs INFO lines (``SLURMPLAN_LOG_ALL_RANKS=1`` keeps all).

    The rank is read from the variables ``dist.DistEnv`` reads (torchrun's ``RANK``, srun's ``SLURM_PROCID``), so
    this runs before anything logs; a value that is not a number leaves logging as it is."""
    rank = os.environ.get("RANK") or (os.environ.get("SLURM_PROCID") if "SLURM_STEP_ID" in os.environ else None)
    if (
        rank
        and rank.isdigit()
        and int(rank) > 0
        and os.environ.get("SLURMPLAN_LOG_ALL_RANKS", "") not in ("1", "yes", "true")
    ):
        logging.getLogger().setLevel(max(logging.getLogger().level, logging.WARNING))
        logging.getLogger("slurmplan").setLevel(logging.WARNING)


def _device(denv: dist.DistEnv, backend: str) -> torch.device:
    if backend == "nccl":
        return torch.device("cuda", denv.local_rank % max(1, torch.cuda.device_count()))
    return torch.device("cpu")


def _report(trainer: Trainer, meter: ThroughputMeter, force: bool) -> float | None:
    if not trainer.denv.is_main or not (force or meter.due()):
        return None
    rate = meter.take()
    _write_report(trainer, rate)
    return rate


def _write_report(trainer: Trainer, rate: float | None) -> None:
    """Rank 0: one report line with the rate and the progress (steps, newest checkpoint, total)."""
    if rate is not None and trainer.denv.is_main:
        progress = Progress(trainer.step, trainer.checkpoint_step, trainer.spec.steps)
        append_report(trainer.measurement(rate), report_path(), progress)


def _delegates_to_submitit(spec: TrainSpec, flag: StopFlag) -> bool:
    return spec.requeue is RequeueMode.AUTO and flag.previous_is_submitit


def _requeue(spec: TrainSpec, flag: StopFlag, assigned: AssignedPlan, is_main: bool) -> Outcome:
    """After the checkpoint: hand over to submitit's handler when run by submitit, else requeue through Slurm."""
    if spec.requeue is RequeueMode.NONE:
        return Outcome.CHECKPOINTED
    if _delegates_to_submitit(spec, flag):
        previous = flag.previous
        flag.uninstall()
        log.info("delegating requeue to the handler installed before the launcher (submitit)")
        previous(int(flag.signum), None)  # type: ignore[operator]  # submitit exits here on rank 0
        return Outcome.REQUEUED
    if not is_main or "SLURM_JOB_ID" not in os.environ:
        return Outcome.CHECKPOINTED
    log.info(
        "checkpoint saved; requeueing the job: Slurm ends this run now, so the 'CANCELLED ... DUE TO JOB REQUEUE'"
        " and 'Terminated' lines that follow are expected; the job waits in the queue for its next configuration"
    )
    result = requeue_job(hold=assigned.managed, max_requeues=spec.max_requeues)
    return Outcome.REQUEUED if result.requeued else Outcome.CHECKPOINTED


def run(spec: TrainSpec, assigned: AssignedPlan | None = None) -> TrainResult:
    """Train ``spec`` in this process (one of the job's processes), resuming from its latest checkpoint."""
    quiet_other_ranks()  # reads two variables; cannot fail
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
        check_workers(spec, assigned, denv)
        trainer = Trainer(spec, assigned, denv, _device(denv, backend))
        resumed = trainer.resume()
        meter, rate, outcome = ThroughputMeter(spec.report_every_s), None, Outcome.FINISHED
        while trainer.step < spec.steps:
            worker_losses = trainer.train_step()
            meter.step_done(spec.global_batch)
            logging_step = trainer.step % max(1, spec.log_every) == 0
            loss = trainer.global_loss(worker_losses) if spec.on_step is not None or logging_step else float("nan")
            if spec.on_step is not None:
                spec.on_step(trainer.step, loss)
            if logging_step and denv.is_main:
                log.info("step %d/%d loss %.5f", trainer.step, spec.steps, loss)
            rate = _report(trainer, meter, force=False) or rate
            if dist.any_rank(flag.triggered, trainer.device):
                if trainer.step >= spec.steps:
                    log.info("checkpoint signal during the last step: finished, not requeued")
                    break
                log.info("checkpoint signal: stopping after step %d", trainer.step)
                outcome = Outcome.CHECKPOINTED
                break
            if spec.checkpoint_every and trainer.step % spec.checkpoint_every == 0 and trainer.step < spec.steps:
                trainer.save()
        final_rate = meter.take() if denv.is_main else None  # measured before the save's own time
        path = trainer.save()
        _write_report(trainer, final_rate)  # after the save, so the line names the checkpoint just written
        rate = final_rate or rate
        if outcome is Outcome.CHECKPOINTED and not _delegates_to_submitit(spec, flag):
            # rank 0 requeues; every rank then reports the same outcome (and exits with the same status)
            outcome = dist.broadcast_object(_requeue(spec, flag, assigned, denv.is_main) if denv.is_main else None)
            dist.shutdown()
        elif outcome is Outcome.CHECKPOINTED:
            dist.shutdown()
            outcome = _requeue(spec, flag, assigned, denv.is_main)
        else:
            dist.shutdown()
        if outcome is Outcome.CHECKPOINTED and denv.is_main:
            where = "not requeued" if "SLURM_JOB_ID" in os.environ else "outside Slurm, nothing to requeue"
            log.warning(
                "checkpointed at step %d and stopped (%s; exit status 75): run the same command again to resume",
                trainer.step, where,
            )  # fmt: skip
        return TrainResult(outcome, trainer.step, denv.world_size, path, rate, resumed)
    finally:
        flag.uninstall()
        dist.shutdown()
