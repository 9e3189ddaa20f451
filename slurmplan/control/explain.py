"""Operator views over the journal: ``slurmplan explain JOBID`` and ``slurmplan history``.

Everything shown here is read back from the journal, never recomputed, so it is what the daemon actually
knew and did at the time: the candidates it priced (with where each figure came from), the share X the policy
gave the job, its priority, and the rule that kept or moved it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from slurmplan.control.codec import plan_from_dict
from slurmplan.control.journal import Journal
from slurmplan.domain import ValidationError
from slurmplan.progress import progress_from_row, progress_text


@dataclass(frozen=True)
class LiveView:
    """What ``explain`` adds to the journal: Slurm's state of the job now and the daemon's round length (for when
    the next round comes). The job's progress is the journal's (``job_progress``, ingested from its reports on
    every tick), not read again from its report file."""

    slurm_state: str | None = None
    round_s: float | None = None
    now: float | None = None


def explain_job(journal: Journal, job_id: int, live: LiveView = LiveView()) -> dict[str, Any]:
    """Everything the journal knows about why a job has its configuration; raises if it never saw the job."""
    job = journal.jobs.get(job_id)
    if job is None:
        where = f"explain, journal {journal.path}"
        allowed = (
            "a job the daemon has observed: one submitted since its last tick is seen at its next (every"
            " interval_s of its config); `slurmplan history` lists the jobs it saw"
        )
        raise ValidationError("job", job_id, allowed, where)
    decisions = journal.decisions.of(job_id, limit=10)
    last = decisions[-1] if decisions else None
    cands = []
    for row in journal.candidates.of(job_id):
        detail = json.loads(row["plan"])
        cands.append(
            {
                "cell": row["cell"],
                "throughput": row["throughput"],
                "source": row["source"],
                "plan": detail.get("plan"),
                "nodes": row["nodes"],
            }
        )
    shares = journal.decisions.allocation_of(job_id)
    return {
        "journal": str(journal.path),
        "job_id": job_id,
        "name": job.get("name"),
        "state": job.get("state"),
        "managed": bool(job.get("managed")),
        "hints": job.get("hints"),
        "hint_error": job.get("hint_error") or None,
        "candidates": cands,
        "share": {r["cell"]: r["share"] for r in shares},
        "share_round": shares[0]["round_index"] if shares else None,
        "decision": None
        if last is None
        else {
            k: last[k]
            for k in ("round_index", "time", "reason", "cell", "plan", "nodes", "priority", "share", "throughput")
        }
        | {"rule": last["detail"]},
        "recent_decisions": [{k: d[k] for k in ("round_index", "time", "reason", "cell", "detail")} for d in decisions],
        "actions": [
            {"id": r.id, "kind": r.action.kind.value, "status": r.status, "reason": r.action.reason, "msg": r.message}
            for r in journal.intents.rows(job_id=job_id, limit=10, newest=True)
        ],
        "events": journal.events.of(job_id, newest=10),
        "ignored_hints": _ignored_hints(journal, job_id),
        "reconfig_cost": _reconfig_cost(journal, job_id, last),
        **_live(journal, job_id, job, live),
    }


def _live(journal: Journal, job_id: int, job: dict[str, Any], live: LiveView) -> dict[str, Any]:
    """Slurm's state now (the journal's is the last tick's), progress and predicted finish as of the daemon's last
    ingestion of the job's reports, and the next round."""
    now = time.time() if live.now is None else live.now
    progress = progress_from_row(journal.measurements.progress_of(job_id))
    last_round = journal.state.get("last_round_start")
    next_round = None
    if live.round_s is not None and last_round is not None:
        next_round = max(float(last_round) + live.round_s, now)
    return {
        "slurm_state": live.slurm_state,
        "observed_at": job.get("last_seen"),
        "progress": None if progress is None else {**asdict(progress), "finish_time": progress.finish_time()},
        "progress_text": None if progress is None else progress_text(progress, now),
        "last_round_start": last_round,
        "next_round": next_round,
        "round_s": live.round_s,
    }


def _ignored_hints(journal: Journal, job_id: int) -> dict[str, Any] | None:
    """The newest note that the site's trust rules dropped some of the job's hints (``control/trust.py``)."""
    from slurmplan.control.trust import EVENT

    rows = [e for e in journal.events.of(job_id) if e["event"] == EVENT]
    return {"time": rows[-1]["time"], "detail": rows[-1]["detail"]} if rows else None


def _cell_gpus(cell: str | None) -> int:
    """GPUs of a Cell as journaled (``a100x4``, ``a100x4 pp2``); 0 when there is none (a held job's decision)."""
    size = (cell or "").split(" ")[0].rpartition("x")[2]
    return int(size) if size.isdigit() else 0


def _reconfig_cost(journal: Journal, job_id: int, last: dict[str, Any] | None) -> dict[str, Any]:
    """What moving this job would cost, as measured on this cluster for jobs of its size (control/calibration).

    Its size is that of its last decision, or, while it is held, that of its largest candidate Cell.
    """
    from slurmplan.control.calibration import calibrate, restart_samples

    gpus = _cell_gpus((last or {}).get("cell")) or max(
        (_cell_gpus(c["cell"]) for c in journal.candidates.of(job_id)), default=0
    )
    gpus = gpus or 1
    calibration = calibrate(restart_samples(journal.intents.restart_timeline()))
    seconds, source = calibration.cost_for(gpus)
    return {"gpus": gpus, "seconds": round(seconds, 2), "source": source, "by_gpus": calibration.to_dict()}


def _t(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def _state_text(e: dict[str, Any]) -> str:
    """Slurm's state now when it was asked, with the journal's (last tick's) when they differ."""
    journaled, live = e["state"], e.get("slurm_state")
    if not live:
        return f"{journaled} (as of the daemon's last tick)"
    live = live.lower()
    return live if live == str(journaled).lower() else f"{live} now (the daemon's last tick saw {journaled})"


def _round_text(e: dict[str, Any]) -> str | None:
    if e.get("round_s") is None:
        return None
    if e.get("last_round_start") is None:
        return "no round yet: is the daemon running (`slurmplan daemon`, or `slurmplan tick` from cron)?"
    return (
        f"next round at {_t(e['next_round'])} (every {e['round_s']:g} s; last at {_t(e['last_round_start'])}):"
        " a new or held job is decided then"
    )


def format_explanation(e: dict[str, Any]) -> str:
    managed = "managed" if e["managed"] else "not managed"
    lines = [f"job {e['job_id']} ({e['name'] or '-'}): {_state_text(e)}, {managed}"]
    if e.get("progress_text"):
        lines.append(f"  progress: {e['progress_text']}")
    if _round_text(e):
        lines.append(f"  {_round_text(e)}")
    if e["hints"]:
        lines.append(f"  hints: {e['hints']}")
    if e["hint_error"]:
        lines.append(f"  left alone, bad hints: {e['hint_error']}")
    if e.get("ignored_hints"):
        ignored = e["ignored_hints"]
        lines.append(f"  scheduled without some of its hints (since {_t(ignored['time'])}): {ignored['detail']}")
    d = e["decision"]
    if d and not d["cell"]:  # held: no configuration, nothing runs; "on - ... predicted 0 samples/s" said nothing
        lines.append(f"  round {d['round_index']} at {_t(d['time'])}: held ({d['reason']}), not running this round")
        lines.append(f"  priority {d['priority']:.3g}, share of the cluster this round {d['share']:.3g}")
        if d["rule"]:
            lines.append(f"  why: {d['rule']}")
    elif d:
        lines.append(
            f"  round {d['round_index']} at {_t(d['time'])}: {d['reason']}"
            f" {d['cell'] or ''} {d['plan'] or ''} on {d['nodes'] or '-'}".rstrip()
        )
        lines.append(
            f"  priority {d['priority']:.3g}, share {d['share']:.3g}, predicted {d['throughput']:.4g} samples/s"
        )
        if d["rule"]:
            lines.append(f"  rule: {d['rule']}")
    if e["share"]:
        shares = ", ".join(f"{cell} {x:.3f}" for cell, x in sorted(e["share"].items(), key=lambda kv: -kv[1]))
        lines.append(f"  share X (round {e['share_round']}): {shares}")
    if e["candidates"]:
        lines.append("  candidates (predicted samples/s, source):")
        for c in e["candidates"]:
            plan = plan_from_dict(c["plan"])
            plan = plan.short() if plan else ""
            lines.append(f"    {c['cell']:<14} {c['throughput']:>10.4g}  {c['source']:<9} {plan}")
        if any(c["source"] == "default" for c in e["candidates"]):
            lines.append(
                "    (default: a model slurmplan does not know, not measured yet: a relative figure, GPUs x peak"
                " TFLOP/s, until the job reports its throughput)"
            )
    if e.get("reconfig_cost"):
        rc = e["reconfig_cost"]
        gpus = f"{rc['gpus']} GPU" + ("s" if rc["gpus"] != 1 else "")
        lines.append(f"  reconfiguration cost for {gpus}: {rc['seconds']:.1f} s ({rc['source']})")
    for a in e["actions"]:
        lines.append(f"  action #{a['id']} {a['kind']:<12} {a['status']:<9} {a['reason']} {a['msg']}".rstrip())
    for ev in e["events"]:
        lines.append(f"  event {_t(ev['time'])} {ev['event']} {ev['detail']}".rstrip())
    return "\n".join(lines)


def check_limit(limit: int | None) -> int | None:
    """``--limit``: None or 0 mean every row; a negative number is refused (it used to drop rows silently)."""
    if limit is None or limit == 0:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("--limit", limit, "a number of rows >= 1, or 0 for every row", "history")
    return limit


def history(journal: Journal, job_id: int | None = None, limit: int | None = 50) -> list[dict[str, Any]]:
    """The latest ``limit`` rows of one time-ordered list of decisions, actions and events.

    For one job or the whole cluster; ``limit`` None or 0 gives every row. The limit applies to the merged
    list: each kind contributes its latest ``limit`` rows, and the latest ``limit`` of their union are kept.
    """
    n = check_limit(limit)
    out: list[dict[str, Any]] = []
    for d in journal.decisions.of(job_id, limit=n):
        what = f"{d['reason']} {d['cell'] or ''} {d['plan'] or ''}".strip()
        out.append({"time": d["time"], "job_id": d["job_id"], "kind": "decision", "round": d["round_index"],
                    "what": what, "detail": d["detail"]})  # fmt: skip
    for r in journal.intents.rows(job_id=job_id, limit=n, newest=True):
        out.append({"time": r.created_at, "job_id": r.action.job_id, "kind": "action", "round": r.round_index,
                    "what": f"{r.action.kind.value} [{r.status}]", "detail": r.message or r.action.reason})  # fmt: skip
    for ev in journal.events.of(job_id, newest=n):
        out.append({"time": ev["time"], "job_id": ev["job_id"], "kind": "event", "round": None, "what": ev["event"],
                    "detail": ev["detail"]})  # fmt: skip
    out.sort(key=lambda r: r["time"] or 0.0)
    return out[-n:] if n else out


def format_history(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "nothing journaled yet"
    # a header and full dates: a journal spans days, and bare columns of numbers did not say what they were
    lines = [f"{'TIME':<19} {'JOBID':>7} {'ROUND':>5} {'KIND':<8} WHAT  DETAIL"]
    for r in rows:
        rnd = "" if r["round"] is None else f"r{r['round']}"
        when = "-" if r["time"] is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["time"]))
        line = f"{when:<19} {r['job_id']:>7} {rnd:>5} {r['kind']:<8} {r['what']}  {r['detail'] or ''}"
        lines.append(line.rstrip())
    return "\n".join(lines)
