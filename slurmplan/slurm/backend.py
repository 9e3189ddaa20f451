"""The Slurm backend: one ``sinfo --json`` and one ``squeue --json`` per snapshot, ``scontrol``/``scancel``
per action.

It works on Slurm 22.05 (OpenAPI v0.0.38 data), where ``scontrol show --json`` does not exist yet and pyslurm
cannot be built. Everything Slurm-specific ends here: nodes and jobs leave as domain values, and a reply of an
unexpected shape raises :class:`SlurmOutputError` naming the field rather than passing a half-read value on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from slurmplan.domain import (
    Action,
    ActionKind,
    ActionResult,
    Cluster,
    Job,
    JobState,
    Node,
    NodeState,
    Snapshot,
    ValidationError,
)
from slurmplan.rules import SLURM_22_05, SlurmRules, rules_for
from slurmplan.slurm.parse import compress_hostlist, format_tres_per_node, gpu_request, gpu_type_term
from slurmplan.slurm.reader import (
    JobRecord,
    NodeRecord,
    Reader,
    SlurmOutputError,
    log_skipped,
    read_records,
    reader_for,
    slurm_version,
)
from slurmplan.slurm.run import SlurmCommandError, run_slurm

log = logging.getLogger(__name__)

_HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")
_JOB_STATES = {s.name: s for s in JobState}
_JOB_STATES.update({"REQUEUE_HOLD": JobState.REQUEUED, "REQUEUE_FED": JobState.REQUEUED, "BOOT_FAIL": JobState.FAILED})
_JOB_STATES.update({"DEADLINE": JobState.TIMEOUT, "RESIZING": JobState.RUNNING, "STOPPED": JobState.SUSPENDED})
_NODE_BASE = {
    "idle": NodeState.IDLE,
    "mixed": NodeState.MIXED,
    "allocated": NodeState.ALLOCATED,
    "completing": NodeState.COMPLETING,
    "down": NodeState.DOWN,
    "error": NodeState.DOWN,
    "future": NodeState.DOWN,
    "drained": NodeState.DRAINED,
    "draining": NodeState.DRAINED,
    "unknown": NodeState.UNKNOWN,
}
DEFAULT_SIGNAL = "USR2"


def node_from_record(r: NodeRecord) -> Node:
    """A read node as a domain :class:`Node`: its base state and flags folded into one :class:`NodeState`."""
    state = _NODE_BASE.get(r.state.lower(), NodeState.UNKNOWN)
    if r.flags & {"DRAIN", "FAIL", "MAINTENANCE"} and state is not NodeState.DOWN:
        state = NodeState.DRAINED
    elif r.flags & {"NOT_RESPONDING", "POWERED_DOWN", "POWER_DOWN", "REBOOT_ISSUED"}:
        state = NodeState.DOWN
    elif "COMPLETING" in r.flags and state is NodeState.IDLE:
        state = NodeState.COMPLETING
    return Node(
        name=r.name,
        state=state,
        gpu_type=r.gpu_type,
        gpus=r.gpus,
        gpus_used=r.gpus_used,
        cpus=r.cpus,
        cpus_used=r.alloc_cpus,
        memory_mb=r.real_memory,
        memory_used_mb=r.alloc_memory,
        features=r.active_features or r.features,
        partitions=r.partitions,
    )


def _time_limit_s(minutes: int | None) -> int | None:
    return None if minutes is None or minutes <= 0 else minutes * 60


def job_from_record(r: JobRecord, gpu_types: frozenset[str] = frozenset()) -> Job:
    """A read job as a domain :class:`Job` (totals for CPUs and memory).

    An untyped GPU request constrained to one feature that names a GPU type in ``gpu_types``
    (``--gres=gpu:2 --constraint=v100``) reads as that type *preferred* (``gpu_type_preferred``): the daemon may
    move it to another type through the node features, unless the job's hints restrict its types.
    """
    state = _JOB_STATES.get(r.job_state, JobState.OTHER)
    node_count = max(1, r.node_count or 1)
    gpu_type, per_node = r.gpu_per_node
    if not per_node and r.gpu_per_job[1]:
        gpu_type, per_node = r.gpu_per_job[0], math.ceil(r.gpu_per_job[1] / node_count)
    type_term = gpu_type_term(r.features.strip().lower(), gpu_types)
    preferred = bool(per_node and gpu_type is None and type_term)
    if preferred:
        gpu_type = type_term  # a preference (rules.py): an untyped request moves between types by node feature
    cpus = r.cpus or 1
    if r.memory_per_node:
        memory_mb = r.memory_per_node * node_count
    elif r.memory_per_cpu:
        memory_mb = r.memory_per_cpu * cpus
    else:
        memory_mb = 0
    held = state is JobState.PENDING and (r.state_reason in _HELD_REASONS or r.priority == 0)
    return Job(
        job_id=r.job_id,
        name=r.name,
        user=r.user_name,
        account=r.account,
        partition=r.partition,
        qos=r.qos,
        cluster=r.cluster,
        state=state,
        state_reason="" if r.state_reason == "None" else r.state_reason,
        gpu_type=gpu_type,
        gpus_per_node=per_node,
        node_count=node_count,
        nodes=r.node_names,
        cpus=cpus,
        memory_mb=memory_mb,
        time_limit_s=_time_limit_s(r.time_limit),
        submit_time=float(r.submit_time or 0),
        start_time=float(r.start_time) if r.start_time and state is not JobState.PENDING else None,
        comment=r.comment,
        admin_comment=r.admin_comment,
        restart_count=r.restart_cnt,
        held=held,
        gpu_type_preferred=preferred,
    )


def snapshot_from_json(nodes_doc: Any, squeue: Any, now: float) -> Snapshot:
    """Build a snapshot from the two parsed JSON documents of any Slurm version the reader knows (pure: tested
    on recorded 22.05 and 24.11 output): ``nodes_doc`` is the output of that version's ``Reader.nodes_argv``
    (``sinfo --json`` on 22.05, ``scontrol show nodes --json`` on 24.11).

    A record that cannot be read is skipped and logged (once per record and problem), never the whole snapshot:
    names, comments, accounts and work directories are users' bytes, and one hostile job must not stop the
    scheduler for everybody. A document of the wrong shape still raises.
    """
    source = " ".join(reader_for(nodes_doc, "nodes").nodes_argv)
    nodes = tuple(node_from_record(n) for n in read_records(nodes_doc, source, "nodes", log_skipped).records)
    types = frozenset(n.gpu_type for n in nodes if n.gpu_type)
    jobs = []
    for record in job_records(squeue):
        try:
            jobs.append(job_from_record(record, gpu_types=types))
        except (ValidationError, ValueError, TypeError, OverflowError) as exc:
            err = SlurmOutputError("squeue --json", "(job)", str(exc)[:200])
            err.record_id = str(record.job_id)
            log_skipped(err)
    return Snapshot(time=now, cluster=Cluster(nodes=nodes), jobs=tuple(jobs))


def unexplained_gpus(snapshot: Snapshot) -> tuple[str, ...]:
    """The nodes that use more GPUs than the jobs the queue shows on them hold.

    The queue is read before the nodes, so a job Slurm starts between the two reads is still pending in the one
    and holds its GPUs in the other. Taken as it is, that snapshot shows the job's node full and the job waiting:
    the daemon held the job it had just released (too late: it runs) and wrote "held (unplaceable)" over the
    decision its launcher had read (seen on the development cluster, once in three tries while ticking without
    pause). A node whose usage the queue does not explain asks for the queue once more; a job that ends between
    the reads errs the safe way (its GPUs count as used for one tick). A site that hides other users' jobs from
    the daemon (``PrivateData=jobs``) sees unexplained usage every tick, and pays one more ``squeue`` a tick.
    """
    held: dict[str, int] = {}
    for job in snapshot.jobs:
        if job.state.active:
            for name in job.nodes:
                held[name] = held.get(name, 0) + job.gpus_per_node
    return tuple(n.name for n in snapshot.cluster.nodes if n.gpus_used > held.get(n.name, 0))


def job_records(squeue: Any) -> tuple[JobRecord, ...]:
    """The readable job records of one ``squeue --json`` document (the others logged once and left out)."""
    return read_records(squeue, "squeue --json", "jobs", log_skipped).records


def other_features(records: tuple[JobRecord, ...], gpu_types: frozenset[str]) -> dict[int, tuple[str, ...]]:
    """job id -> the features of its constraint that are not its GPU type (kept when the type moves)."""
    out: dict[int, tuple[str, ...]] = {}
    for r in records:
        feature = r.features.strip()
        if "&" in feature and gpu_type_term(feature.lower(), gpu_types):
            out[r.job_id] = tuple(t for t in feature.split("&") if t.lower() not in gpu_types)
    return out


def action_commands(
    action: Action,
    current_request: str | None = None,
    rules: SlurmRules = SLURM_22_05,
    keep_features: tuple[str, ...] = (),
) -> list[list[str]]:
    """The Slurm command lines that carry out ``action`` (pure; an empty list means nothing to do).

    ``current_request`` is the job's ``tres_per_node`` now; an UPDATE of the GPU request depends on it (see
    :func:`_gpu_fields`). Raises :class:`ValidationError` for an action Slurm cannot carry out.
    """
    jid = str(action.job_id)
    kind = action.kind
    if kind is ActionKind.HOLD:  # a user hold: only an admin's own ``scontrol hold`` shows JobHeldAdmin
        return [["scontrol", "uhold", jid]]
    if kind is ActionKind.RELEASE:
        return [["scontrol", "release", jid]]
    if kind is ActionKind.REQUEUE:
        return [["scontrol", "requeue", jid]]
    if kind is ActionKind.REQUEUE_HOLD:
        return [["scontrol", "requeuehold", jid]]
    if kind is ActionKind.CANCEL:
        return [["scancel", jid]]
    if kind is ActionKind.SIGNAL:
        return [["scancel", f"--signal={action.signal or DEFAULT_SIGNAL}", "--batch", jid]]
    if kind is ActionKind.ANNOTATE:
        return [["scontrol", "update", f"jobid={jid}", f"AdminComment={action.admin_comment or ''}"]]
    if kind is ActionKind.UPDATE:
        fields = _update_fields(action, current_request, rules, keep_features)
        return [["scontrol", "update", f"jobid={jid}", *fields]] if fields else []
    raise ValidationError("action kind", kind, f"one of {', '.join(k.value for k in ActionKind)}", "slurm backend")


def _gpu_fields(
    action: Action, current_request: str | None, rules: SlurmRules, keep_features: tuple[str, ...] = ()
) -> list[str]:
    """How to change a pending job's GPU request on Slurm 22.05, checked on this platform:

    * the count of a typed request can change (``TresPerNode=gres:gpu:a100:1``);
    * the *type* of a typed request cannot: Slurm accepts the update but the job then stays pending forever
      with reason BadConstraints, so it is refused here with the reason;
    * a typed request cannot become untyped (Slurm refuses "with and without type identification");
    * an untyped request (``--gres=gpu:N``) moves between types through the node feature named after the
      type: ``TresPerNode=gres:gpu:N Features=TYPE``. Managed jobs are therefore best submitted untyped
      with ``--constraint=TYPE``, and nodes should carry their GPU type as a feature.
    """
    assert action.gpus_per_node is not None
    current_type, current_count = gpu_request(current_request) if current_request else (None, 0)
    typed_now = current_type is not None
    refusal = rules.type_change_error(action.job_id, typed_now, current_type, action.gpu_type, current_request)
    if refusal is not None:
        raise refusal
    if typed_now:
        kept = current_type if action.gpu_type is None else action.gpu_type  # a retype only where rules allow it
        return [f"TresPerNode={format_tres_per_node(kept, action.gpus_per_node)}"]
    fields = [f"TresPerNode={format_tres_per_node(None, action.gpus_per_node)}"]
    if action.gpu_type is not None:  # the user's other features stay (``ib&a100`` -> ``ib&v100``)
        fields.append(f"Features={'&'.join((*keep_features, action.gpu_type))}")
    return fields


def _update_fields(
    action: Action, current_request: str | None, rules: SlurmRules, keep_features: tuple[str, ...] = ()
) -> list[str]:
    fields: list[str] = []
    if action.gpus_per_node is not None:
        fields += _gpu_fields(action, current_request, rules, keep_features)
    elif action.gpu_type is not None:
        raise ValidationError("gpus_per_node", None, "a GPU count whenever gpu_type is set", "update action")
    if action.node_count is not None:
        if action.node_count < 1:
            raise ValidationError("node_count", action.node_count, "an integer >= 1", "update action")
        # min-max: a job submitted with -N2 has max_nodes 2, and growing it with NumNodes=4 alone is refused
        fields.append(f"NumNodes={action.node_count}-{action.node_count}")
    if action.nodelist is not None:
        fields.append(f"ReqNodeList={compress_hostlist(action.nodelist) if action.nodelist else ''}")
    if action.admin_comment is not None:
        fields.append(f"AdminComment={action.admin_comment}")
    return fields


_BATCHABLE = {
    ActionKind.HOLD: ("scontrol", "uhold"),
    ActionKind.RELEASE: ("scontrol", "release"),
    ActionKind.REQUEUE: ("scontrol", "requeue"),
    ActionKind.REQUEUE_HOLD: ("scontrol", "requeuehold"),
    ActionKind.CANCEL: ("scancel",),
}
"""Kinds whose command takes a list of jobs (``scontrol hold 1,2,3``, ``scancel 1 2 3``): one call for many jobs."""

BATCH_MAX = 200
"""Jobs per batched command: keeps one command line short and one refusal cheap to bisect."""


def batch_commands(kind: ActionKind, job_ids: Sequence[int]) -> list[list[str]]:
    """The command lines that apply ``kind`` to every job in ``job_ids`` (pure; ``BATCH_MAX`` jobs each)."""
    head = list(_BATCHABLE[kind])
    out = []
    for i in range(0, len(job_ids), BATCH_MAX):
        chunk = [str(j) for j in job_ids[i : i + BATCH_MAX]]
        out.append(head + chunk if kind is ActionKind.CANCEL else head + [",".join(chunk)])
    return out


_JOB_ERROR = re.compile(r"^(?P<text>.*) for job (?P<job>\d+)\s*$")


def batch_results(
    actions: Sequence[Action], keys: Sequence[int], returncode: int, stderr: str
) -> dict[int, ActionResult]:
    """Per action, what one batched command did (pure; tested on recorded scontrol output).

    ``scontrol hold 1,2,3`` carries out every job it can and prints one ``<error> for job N`` line per refusal,
    exiting 1: those jobs failed with that line, the others took. A failure naming no job leaves every action
    out of the result, so the caller applies them one by one (hold/release/requeue of a job that already took
    is then refused harmlessly or is a no-op).
    """
    if returncode == 0:
        return {k: ActionResult(a, True, "ok") for k, a in zip(keys, actions, strict=True)}
    refused: dict[int, str] = {}
    for line in stderr.splitlines():
        m = _JOB_ERROR.match(line.strip())
        if m:
            refused[int(m["job"])] = line.strip()
    if not refused:
        log.info("batched %s of %d jobs refused without naming a job: %s", actions[0].kind.value, len(actions), stderr)
        return {}
    pairs = zip(keys, actions, strict=True)
    return {k: ActionResult(a, a.job_id not in refused, refused.get(a.job_id, "ok")) for k, a in pairs}


def start_now_command(job_ids: Sequence[int]) -> list[str]:
    """Make requeued jobs eligible now (pure).

    Slurm sets a requeued batch job's begin time to ``cred_expire + 1`` seconds later (121 s by default), so
    that a new launch cannot meet the revoked credential of the old one on the same node. slurmplan's restart
    is a checkpoint, requeue-hold and release into a new configuration; when that configuration's nodes are
    all other nodes (``SlurmRules.may_skip_requeue_wait``) it clears the wait before releasing.
    """
    return ["scontrol", "update", f"jobid={','.join(map(str, job_ids))}", "StartTime=now"]


class SlurmBackend:
    """:class:`~slurmplan.domain.ClusterBackend` over Slurm's command-line tools.

    ``env`` is laid over the process environment for every command (e.g. ``{"SLURM_CONF": ...}`` of a
    development cluster). ``calls`` counts the Slurm commands run (the tick benchmark reports it).

    Scale: the last snapshot's GPU requests are remembered, so an UPDATE needs no extra ``squeue``; actions
    of one batchable kind in one :meth:`apply` call go to Slurm as one command per ``BATCH_MAX`` jobs.
    """

    @property
    def rules(self) -> SlurmRules:
        """What the Slurm this backend talks to lets the daemon change (``slurmplan.rules``, per version): from
        the version its JSON named at the last snapshot, else from ``scontrol --version``."""
        return self.detect_rules()

    def detect_rules(self) -> SlurmRules:
        if self.reader is not None:
            return rules_for(self.reader.version)
        if self._version is None:
            self._version = slurm_version(self.env)
        return rules_for(self._version)

    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 60.0) -> None:
        self.env = dict(env or {})
        self.timeout = timeout
        self.calls = 0
        self.reader: Reader | None = None  # known after the first snapshot: the version of Slurm's JSON
        self._version: tuple[int, int] | None = None
        self._requests: dict[int, str] = {}
        self._features: dict[int, tuple[str, ...]] = {}
        self._restarted: set[int] = set()
        self._begin_wait: set[int] = set()  # released jobs still waiting out Slurm's requeue begin time
        self._ran_on: dict[int, frozenset[str]] = {}  # the nodes each job was last seen running on
        self._target: dict[int, frozenset[str]] = {}  # the node list the last applied UPDATE pinned

    def _run(self, argv: Sequence[str], check: bool = True) -> Any:
        self.calls += 1
        return run_slurm(argv, self.env, timeout=self.timeout, check=check)

    def _json(self, argv: Sequence[str]) -> Any:
        proc = self._run(argv, check=False)
        if proc.returncode != 0:  # 24.11 exits 1 when slurmctld cannot be reached (22.05: 0, see below)
            raise SlurmCommandError(argv, proc.returncode, f"{proc.stderr.strip()}; {self._is_it_running()}")
        try:
            payload = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmOutputError(" ".join(argv), "(document)", f"not JSON ({exc})") from exc
        errors = payload.get("errors") if isinstance(payload, Mapping) else None
        if errors:  # 22.05 exits 0 with an "Unspecified error" here when slurmctld cannot be reached
            raise SlurmCommandError(argv, proc.returncode, f"Slurm reported {errors!r}; {self._is_it_running()}")
        return payload

    def _is_it_running(self) -> str:
        conf = self.env.get("SLURM_CONF") or os.environ.get("SLURM_CONF") or "the default slurm.conf"
        return f"is slurmctld running for {conf}?"

    def snapshot(self) -> Snapshot:
        """Nodes and jobs at one instant: one ``squeue --json`` (all states) and one node listing, whose command
        depends on the Slurm version the queue's JSON names (``Reader.nodes_argv``)."""
        now = time.time()
        queue = ["squeue", "--json", "--states=all"]
        squeue = self._json(queue)
        self.reader = reader_for(squeue, "squeue --json")
        nodes_doc = self._json(list(self.reader.nodes_argv))
        snapshot = snapshot_from_json(nodes_doc, squeue, now)
        busy = unexplained_gpus(snapshot)
        if busy:  # Slurm started a job between the two reads: read the queue once more
            log.debug("queue read again: GPUs in use on %s that no job in it held", ",".join(busy[:5]))
            squeue = self._json(queue)
            snapshot = snapshot_from_json(nodes_doc, squeue, now)
        records = job_records(squeue)
        self._requests = {r.job_id: r.tres_per_node for r in records}
        self._features = other_features(records, frozenset(n.gpu_type for n in snapshot.cluster.nodes if n.gpu_type))
        self._restarted = {
            j.job_id for j in snapshot.jobs if j.restart_count > 0 and j.state in (JobState.PENDING, JobState.REQUEUED)
        }
        self._begin_wait = {j.job_id for j in snapshot.jobs if j.state_reason == "BeginTime"}
        self._ran_on.update({j.job_id: frozenset(j.nodes) for j in snapshot.jobs if j.nodes})
        return snapshot

    def _current_requests(self, job_ids: Sequence[int]) -> dict[int, str]:
        """Each job's ``tres_per_node`` now: from the last snapshot, one ``squeue`` only for jobs it lacks."""
        missing = sorted({j for j in job_ids if j not in self._requests})
        if missing:
            argv = ["squeue", "--json", "--states=all", f"--jobs={','.join(map(str, missing))}"]
            with contextlib.suppress(SlurmCommandError):  # squeue --jobs fails when all are unknown: none to read
                self._requests.update({r.job_id: r.tres_per_node for r in job_records(self._json(argv))})
        return {j: self._requests[j] for j in job_ids if j in self._requests}

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        """Carry out the actions; a refused action is reported (``ok=False`` with Slurm's message) and the
        others still run; only a Slurm that cannot be run at all raises.

        Batchable actions (hold, release, requeue, cancel) of different jobs run as one command per kind; the
        others in order. Callers that need one job's actions in order pass at most one action per job (the
        act step does: it applies in waves). A refused batch is retried job by job to say which job failed.
        """
        updates = [a.job_id for a in actions if a.kind is ActionKind.UPDATE and a.gpus_per_node is not None]
        requests = self._current_requests(updates) if updates else {}
        results: dict[int, ActionResult] = {}
        by_kind: dict[ActionKind, list[int]] = {}
        per_job = Counter(a.job_id for a in actions)
        for i, a in enumerate(actions):
            if a.kind in _BATCHABLE and per_job[a.job_id] == 1:  # a job with several actions keeps their order
                by_kind.setdefault(a.kind, []).append(i)
        batched_releases = [actions[i] for i in by_kind.get(ActionKind.RELEASE, [])]
        if len(batched_releases) > 1:  # one command for all of them, before their batched release
            self._start_now(batched_releases)
        for kind, idx in by_kind.items():
            if len(idx) == 1:
                continue
            for chunk_start in range(0, len(idx), BATCH_MAX):
                chunk = idx[chunk_start : chunk_start + BATCH_MAX]
                argv = batch_commands(kind, [actions[i].job_id for i in chunk])[0]
                proc = self._run(argv, check=False)
                results.update(batch_results([actions[i] for i in chunk], chunk, proc.returncode, proc.stderr))
        failed_jobs: set[int] = set()
        repinned: list[Action] = []
        for i, a in enumerate(actions):
            if i not in results and a.job_id in failed_jobs:  # never release a job whose update did not take
                results[i] = ActionResult(a, False, "skipped: an earlier action of this job failed")
            elif i not in results:
                if a.kind is ActionKind.RELEASE:
                    self._start_now([a])
                results[i] = self._apply_one(a, requests.get(a.job_id))
            if not results[i].ok:
                failed_jobs.add(a.job_id)
                continue
            if a.kind is ActionKind.UPDATE and a.gpus_per_node is not None:
                self._requests.pop(a.job_id, None)  # changed: read it again if asked
            if a.kind is ActionKind.UPDATE and a.nodelist is not None:
                self._target[a.job_id] = frozenset(a.nodelist)
                if a.job_id in self._begin_wait:
                    repinned.append(a)
        if repinned:  # a released job still waiting out its begin time, now pinned elsewhere: it may start now
            self._start_now(repinned)
        return [results[i] for i in range(len(actions))]

    def _start_now(self, releases: Sequence[Action]) -> None:
        """Reset the begin time of the requeued jobs among ``releases`` that go to other nodes (best effort: a
        refusal only leaves Slurm's own wait in place)."""
        ids = [
            a.job_id
            for a in releases
            if a.job_id in self._restarted
            and self.rules.may_skip_requeue_wait(self._ran_on_of(a) or (), self._target.get(a.job_id))
        ]
        for chunk in range(0, len(ids), BATCH_MAX):
            self._run(start_now_command(ids[chunk : chunk + BATCH_MAX]), check=False)
        self._restarted.difference_update(ids)

    def _ran_on_of(self, release: Action) -> frozenset[str] | None:
        """Where a job last ran: seen by this backend (a long-running daemon), else as the RELEASE says from
        the journaled scheduler state (a cron tick's backend is new and never saw the job run)."""
        seen = self._ran_on.get(release.job_id)
        return seen if seen else frozenset(release.previous_nodes) if release.previous_nodes else None

    def _apply_one(self, action: Action, current_request: str | None) -> ActionResult:
        try:
            commands = action_commands(action, current_request, self.rules, self._features.get(action.job_id, ()))
        except ValidationError as exc:
            return ActionResult(action, False, str(exc))
        if not commands:
            return ActionResult(action, True, "nothing to change")
        messages: list[str] = []
        for argv in commands:
            proc = self._run(argv, check=False)
            text = (proc.stderr.strip() or proc.stdout.strip()).replace("\n", " ")
            if proc.returncode != 0:
                log.info("job %s: %s refused: %s", action.job_id, action.kind.value, text)
                return ActionResult(action, False, str(SlurmCommandError(argv, proc.returncode, proc.stderr)))
            if text:
                messages.append(text)
        return ActionResult(action, True, "; ".join(messages) or "ok")
