"""The text formats slurmplan writes into Slurm and reads back: one module, imported by every room that needs one.

Three formats cross process boundaries as text, and each used to be written in several rooms; they live here
only (imports: ``domain`` and the standard library), so the daemon, the simulator, the launcher and the Slurm
backend cannot drift apart:

1. plan hints, the user's ``--comment "slurmplan:..."`` (grammar below; ``site/job_submit.lua`` implements the
   same grammar and ``tests/integration/test_hint_parity.py`` fuzzes both);
2. the daemon's decision in the admin comment: ``<hints> || slurmplan: a100x8 dp2 ... | since round N``;
3. the plan environment variables (``SLURMPLAN_DP`` ...) the SPANK plugin exports to the job's tasks.

Hints travel through Slurm as text. The SPANK plugin's sbatch options (``--plan-gpus=2:8``), or a
``--comment "slurmplan:..."``, reach ``site/job_submit.lua``, which writes them into the job's admin comment in
the canonical form below; the daemon reads that admin comment back from ``squeue --json`` and parses it here.
The lua side keeps the same keys, limits and error texts, so a hint refused at submit time is exactly a hint
the daemon could not parse.

Grammar (whitespace around ``;`` and ``=`` is ignored, empty segments are skipped)::

    hints  := "slurmplan:" [ pair { ";" pair } ]
    pair   := key "=" value

    key       value                                   Hints field
    model     name: [A-Za-z0-9][A-Za-z0-9._/-]{0,63}   model
    gpus      integer 1..999999999                    gpus
    min       integer 1..999999999                    min_gpus
    max       integer 1..999999999                    max_gpus
    types     type{,type}: type = [a-z0-9][a-z0-9_-]{0,31}, lower-cased, no repeats   gpu_types
    class     guaranteed | best-effort                job_class
    workers   integer 1..999999999                    workers (EasyScale maxP)
    batch     integer 1..999999999                    global_batch
    seq       integer 1..999999999                    seq_len
    stack     megatron | deepspeed | ddp | fsdp       stack (the framework; the model predicts for it)
    steps     integer 1..999999999                    steps
    deadline  YYYY-MM-DDTHH:MM[:SS][Z], UTC            deadline (Unix time)
    managed   yes | no                                managed
    asked     TYPE:N (TYPE lower-cased, 1-32 of [A-Za-z0-9_-]; N 1..999999999)   asked
              the typed --gres request job_submit.lua made movable (gpu:a100:4 -> gpu:4 + constraint a100)
    nodes     integer 1..999999999                    max_nodes
              the most nodes the job may span: job_submit.lua records the job's own --nodes (max) here

Integers are plain decimal digits (at most 9). Cross-field rules: ``min <= max``; ``gpus`` lies within
``[min, max]`` where those are given; ``workers`` is at least ``gpus`` and ``max`` (a job cannot use more GPUs
than it has logical workers). A key may appear once.

The canonical form lists the keys in the table's order, omits defaults (``class=best-effort``,
``managed=yes``) and unset fields, writes integers without leading zeros and the deadline as
``YYYY-MM-DDTHH:MM`` (``:SS`` only when the seconds are not zero). ``parse_hints(format_hints(h)) == h`` for
every ``Hints`` whose deadline is a whole second.

Admin comment layout (the daemon owns the part after the separator)::

    <hints> || <decision>
    slurmplan:model=llama2-7b;gpus=8 || slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | since round 17

The hints come first and are never rewritten by the daemon; the decision follows `` || ``. A comment without
the separator is all hints when it starts with ``slurmplan:`` and has a ``=`` or nothing after the prefix, and
all decision when it starts with ``slurmplan:`` otherwise, or with ``slurmplan! bad hints:`` (the decision of a
job left alone because its hints were refused; not ``slurmplan:``, so no launcher reads it as a plan).
"""

from __future__ import annotations

import calendar
import functools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slurmplan.domain import Cell, Hints, JobClass, Plan, ValidationError

# ------------------------------------------------------------------------------------------------------ hints

PREFIX = "slurmplan:"
BAD_HINTS_PREFIX = "slurmplan! bad hints:"
"""Decision of a job left alone because its hints were refused (``bad_hints_decision``)."""
SEPARATOR = " || "
WHERE = "hints"
_BLANK = " \t"
"""Only spaces and tabs count as blanks (as in lua's patterns), so both parsers strip the same characters."""

INT_MAX_DIGITS = 9
_INT_ALLOWED = "an integer from 1 to 999999999 (digits only)"
_MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,63}")
_MODEL_ALLOWED = "a name of 1-64 characters from A-Z a-z 0-9 . _ / - starting with a letter or digit"
_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_TYPES_ALLOWED = "a comma-separated list of GPU types like a100,h100 (each 1-32 of a-z 0-9 _ -, no repeats)"
_DEADLINE_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?Z?")
_DEADLINE_ALLOWED = "a UTC time YYYY-MM-DDTHH:MM[:SS][Z] between 1970 and 9999"
_CLASS_ALLOWED = "guaranteed or best-effort"
_BOOL_ALLOWED = "yes or no"
_ASKED_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_-]*):([0-9]+)")
_ASKED_ALLOWED = "a typed GPU request TYPE:N like a100:4 (TYPE 1-32 of a-z 0-9 _ -, N an integer from 1 to 999999999)"
STACKS: tuple[str, ...] = ("megatron", "deepspeed", "ddp", "fsdp")
"""Frameworks a job may name in ``stack=`` (each is a ``perf.stacks`` stack; ``site/job_submit.lua`` lists the same)."""
_STACK_ALLOWED = "one of " + ", ".join(STACKS)

KEYS: tuple[str, ...] = (
    "model",
    "gpus",
    "min",
    "max",
    "types",
    "class",
    "workers",
    "batch",
    "seq",
    "stack",
    "steps",
    "deadline",
    "managed",
    "asked",
    "nodes",
)
"""Keys in canonical order."""

_INT_KEYS = {
    "gpus": "gpus",
    "min": "min_gpus",
    "max": "max_gpus",
    "workers": "workers",
    "batch": "global_batch",
    "seq": "seq_len",
    "steps": "steps",
    "nodes": "max_nodes",
}


def _parse_int(key: str, value: str) -> int:
    if not value.isascii() or not value.isdigit() or len(value) > INT_MAX_DIGITS or int(value) < 1:
        raise ValidationError(key, value, _INT_ALLOWED, WHERE)
    return int(value)


def _parse_model(key: str, value: str) -> str:
    if not _MODEL_RE.fullmatch(value):
        raise ValidationError(key, value, _MODEL_ALLOWED, WHERE)
    return value


def _parse_types(key: str, value: str) -> tuple[str, ...]:
    names = [part.strip(_BLANK).lower() for part in value.split(",")] if value.isascii() else [""]
    if not all(_TYPE_RE.fullmatch(n) for n in names) or len(set(names)) != len(names):
        raise ValidationError(key, value, _TYPES_ALLOWED, WHERE)
    return tuple(names)


def _parse_stack(key: str, value: str) -> str:
    if value not in STACKS:
        raise ValidationError(key, value, _STACK_ALLOWED, WHERE)
    return value


def _parse_class(key: str, value: str) -> JobClass:
    for job_class in JobClass:
        if value == job_class.value:
            return job_class
    raise ValidationError(key, value, _CLASS_ALLOWED, WHERE)


def _parse_bool(key: str, value: str) -> bool:
    if value not in ("yes", "no"):
        raise ValidationError(key, value, _BOOL_ALLOWED, WHERE)
    return value == "yes"


def _parse_asked(key: str, value: str) -> str:
    match = _ASKED_RE.fullmatch(value)
    if not match or len(match[1]) > 32 or len(match[2]) > INT_MAX_DIGITS or int(match[2]) < 1:
        raise ValidationError(key, value, _ASKED_ALLOWED, WHERE)
    return f"{match[1].lower()}:{int(match[2])}"


def _parse_deadline(key: str, value: str) -> float:
    """UTC only, so that the lua side (which has no time-zone database) computes the same number."""
    match = _DEADLINE_RE.fullmatch(value)
    if not match:
        raise ValidationError(key, value, _DEADLINE_ALLOWED, WHERE)
    year, month, day, hour, minute = (int(g) for g in match.groups()[:5])
    second = int(match.group(6) or 0)
    if not (
        1970 <= year <= 9999
        and 1 <= month <= 12
        and 1 <= day <= calendar.monthrange(year, month)[1]
        and hour <= 23
        and minute <= 59
        and second <= 59
    ):
        raise ValidationError(key, value, _DEADLINE_ALLOWED, WHERE)
    return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))


_PARSERS: dict[str, tuple[str, Callable[[str, str], object]]] = {
    "model": ("model", _parse_model),
    **{key: (name, _parse_int) for key, name in _INT_KEYS.items()},
    "types": ("gpu_types", _parse_types),
    "class": ("job_class", _parse_class),
    "deadline": ("deadline", _parse_deadline),
    "managed": ("managed", _parse_bool),
    "asked": ("asked", _parse_asked),
    "stack": ("stack", _parse_stack),
}


def _check_consistent(h: Hints) -> None:
    """The cross-field rules, shared by parse and format so both refuse the same hints."""
    if h.min_gpus is not None and h.max_gpus is not None and h.min_gpus > h.max_gpus:
        raise ValidationError("min", h.min_gpus, f"at most max={h.max_gpus}", WHERE)
    if h.gpus is not None and h.min_gpus is not None and h.gpus < h.min_gpus:
        raise ValidationError("gpus", h.gpus, f"at least min={h.min_gpus}", WHERE)
    if h.gpus is not None and h.max_gpus is not None and h.gpus > h.max_gpus:
        raise ValidationError("gpus", h.gpus, f"at most max={h.max_gpus}", WHERE)
    if h.workers is not None:
        for key, value in (("gpus", h.gpus), ("max", h.max_gpus)):
            if value is not None and h.workers < value:
                raise ValidationError("workers", h.workers, f"at least {key}={value}", WHERE)


def parse_hints(text: str) -> Hints:
    """Parse ``slurmplan:key=value;...`` into ``Hints``; raise ``ValidationError`` naming the bad key or value."""
    stripped = text.strip(_BLANK)
    if not stripped.startswith(PREFIX):
        raise ValidationError("prefix", text, f"text starting with {PREFIX!r}", WHERE)
    fields: dict[str, object] = {}
    seen: set[str] = set()
    for segment in stripped[len(PREFIX) :].split(";"):
        if not segment.strip(_BLANK):
            continue
        key, eq, value = (s.strip(_BLANK) for s in segment.partition("="))
        if key not in _PARSERS:
            raise ValidationError("key", key, "one of " + ", ".join(KEYS), WHERE)
        if not eq:
            raise ValidationError(key, segment.strip(_BLANK), f"{key}=VALUE", WHERE)
        if key in seen:
            raise ValidationError(key, value, "given once only", WHERE)
        seen.add(key)
        name, parser = _PARSERS[key]
        fields[name] = parser(key, value)
    hints = Hints(**fields)  # type: ignore[arg-type]
    _check_consistent(hints)
    return hints


def _format_deadline(deadline: float) -> str:
    t = time.gmtime(round(deadline))
    text = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}"
    return text + (f":{t.tm_sec:02d}" if t.tm_sec else "")


def _canonical_values(h: Hints) -> dict[str, str | None]:
    """Each key's canonical text, or None when the field is unset or at its default."""
    types = ",".join(_parse_types("types", ",".join(h.gpu_types))) if h.gpu_types else None
    deadline = _format_deadline(_checked_deadline(h.deadline)) if h.deadline is not None else None
    values: dict[str, str | None] = {
        "model": _parse_model("model", h.model) if h.model is not None else None,
        "types": types,
        "class": h.job_class.value if h.job_class is not JobClass.BEST_EFFORT else None,
        "deadline": deadline,
        "managed": None if h.managed else "no",
        "asked": _parse_asked("asked", h.asked) if h.asked is not None else None,
        "stack": _parse_stack("stack", h.stack) if h.stack is not None else None,
    }
    for key, name in _INT_KEYS.items():
        value = getattr(h, name)
        values[key] = str(_parse_int(key, str(value))) if value is not None else None
    return values


def format_hints(hints: Hints) -> str:
    """The canonical text of ``hints`` (see the module docstring); refuses hints ``parse_hints`` would refuse."""
    _check_consistent(hints)
    values = _canonical_values(hints)
    return PREFIX + ";".join(f"{key}={values[key]}" for key in KEYS if values[key] is not None)


def _checked_deadline(deadline: float) -> float:
    if not (0 <= deadline <= 253402300799):  # 9999-12-31T23:59:59
        raise ValidationError("deadline", deadline, _DEADLINE_ALLOWED, WHERE)
    return deadline


# ----------------------------------------------------------------------------------------------- admin comment


@dataclass(frozen=True)
class AdminComment:
    """An admin comment split into the user's hints and the daemon's decision (either may be empty)."""

    hints: str = ""
    decision: str = ""


REMEMBERED_COMMENT_CHARS = 4096
"""The longest comment ``split_admin_comment`` remembers: a slurmplan comment is a few hundred characters, and a
user's ``--comment`` (any length, any bytes) longer than this is split afresh each time, so the memo holds at most
8,192 texts of this size whatever users write."""


def split_admin_comment(text: str) -> AdminComment:
    """Split an admin comment (or a ``--comment``) into hints and decision, per the layout in the module doc.

    Remembered per text (the answer is frozen): every tick reads the comment of every job it holds, unchanged from
    tick to tick (``actions._hold``: 182,000 reads on the site history's first day, 1.3 % of its CPU)."""
    if text is not None and len(text) > REMEMBERED_COMMENT_CHARS:
        return _split_admin_comment(text)
    return _split_remembered(text)


def _split_admin_comment(text: str) -> AdminComment:
    stripped = (text or "").strip(_BLANK)
    if "||" in stripped:
        left, _, right = (part.strip(_BLANK) for part in stripped.partition("||"))
        if left and not left.startswith(PREFIX):  # someone else's text (``project=x || owner=y``): not hints
            return AdminComment(decision=right if right.startswith((PREFIX, BAD_HINTS_PREFIX)) else "")
        return AdminComment(left, right)
    if stripped.startswith(BAD_HINTS_PREFIX):
        return AdminComment(decision=stripped)
    if not stripped.startswith(PREFIX):
        return AdminComment()
    rest = stripped[len(PREFIX) :].strip(_BLANK)
    if not rest or "=" in rest:
        return AdminComment(hints=stripped)
    return AdminComment(decision=stripped)


_split_remembered = functools.lru_cache(maxsize=8192)(_split_admin_comment)


def find_hints(text: str) -> Hints | None:
    """The hints inside an admin comment or ``--comment``, or None when it holds none; raises on bad hints."""
    part = split_admin_comment(text).hints
    return parse_hints(part) if part else None


def compose_admin_comment(hints: Hints | str | None, decision: str = "") -> str:
    """Hints first (canonical), then `` || `` and the decision; either part may be absent."""
    hint_text = format_hints(hints) if isinstance(hints, Hints) else (hints or "").strip(_BLANK)
    decision = decision.strip(_BLANK)
    if not decision:
        return hint_text
    return f"{hint_text}{SEPARATOR}{decision}".strip(_BLANK)


# ---------------------------------------------------------------------------------------------------- decision

_CELL_RE = re.compile(r"([a-z0-9][a-z0-9_-]*)x(\d+)")
_DECISION_ALLOWED = "slurmplan: <type>x<gpus> dpN tpN ppN mbN gaN [vN] [gc] [zN] [off]"
_PLAN_TOKEN_RE = re.compile(r"^(?P<key>dp|tp|pp|mb|ga|v|z)(?P<num>\d+)$")
_PLAN_TOKEN_FIELDS = {
    "dp": "dp",
    "tp": "tp",
    "pp": "pp",
    "mb": "micro_batch",
    "ga": "grad_accum",
    "v": "virtual_stages",
    "z": "zero_stage",
}
_PLAN_TOKENS_ALLOWED = "one of dpN tpN ppN mbN gaN vN zN gc off"


def parse_plan_short(text: str) -> Plan:
    """Inverse of :meth:`Plan.short`: ``"dp2 tp4 pp1 mb2 ga8 v2 gc z1 off"`` -> Plan.

    Fields not named keep their defaults; a repeated key must repeat the same value.
    """
    fields: dict[str, object] = {}
    for token in text.split():
        if token == "gc":
            fields["checkpointing"] = True
            continue
        if token == "off":
            fields["offload"] = True
            continue
        match = _PLAN_TOKEN_RE.match(token)
        if not match:
            raise ValidationError("plan token", token, _PLAN_TOKENS_ALLOWED, "plan text")
        field_name, value = _PLAN_TOKEN_FIELDS[match["key"]], int(match["num"])
        if fields.get(field_name, value) != value:
            raise ValidationError(field_name, value, f"the value given before ({fields[field_name]})", "plan text")
        fields[field_name] = value
    return Plan(**fields)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=64)
def round_stamp(index: int) -> str:
    """``since round 17``: the round that decided the configuration the job has now.

    It stays true for as long as the job keeps that configuration, so a running job whose lease is renewed is
    not re-annotated every round (the old ``round 17 | lease until 12:06`` changed every round and cost every
    running job one ``scontrol update`` per round); it is rewritten only when the configuration changes."""
    return f"since round {index}"


def format_decision(cell: Cell, plan: Plan, *extra: str) -> str:
    """``slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | since round 17`` (extra parts after ``|``)."""
    head = f"{PREFIX} {cell.gpu_type}x{cell.gpus} {plan.short()}"
    return " | ".join([head, *extra])


def decision_text(cell: Cell, plan: Plan | None, round_index: int) -> str:
    """The decision the daemon writes for a round (no plan: pure data parallel over the Cell's GPUs)."""
    return format_decision(cell, plan or Plan(dp=cell.gpus), round_stamp(round_index))


@functools.lru_cache(maxsize=1 << 16)
def same_configuration(admin_comment: str, cell: Cell, plan: Plan | None) -> bool:
    """Whether the decision in ``admin_comment`` already names this Cell and plan (whatever round decided it):
    then the comment is left as it is, and no ``scontrol update`` is spent on it.

    Memoised: it is asked for every running job every tick with the same few strings (a pure function).
    """
    head = decision_of(admin_comment).split("|")[0].strip()
    return bool(head) and head == format_decision(cell, plan or Plan(dp=cell.gpus))


def with_decision(existing: str, decision: str) -> str:
    """``existing`` admin comment with its decision part replaced by ``decision``.

    What comes before the decision is kept as it is: the user's hints, or any text an admin put there that is
    not slurmplan's (a comment without the ``slurmplan:`` prefix is never dropped).
    """
    stripped = (existing or "").strip()
    if "||" in stripped:
        keep = stripped.partition("||")[0].strip()
    elif stripped.startswith((PREFIX, BAD_HINTS_PREFIX)):
        keep = split_admin_comment(stripped).hints
    else:
        keep = stripped
    return f"{keep}{SEPARATOR}{decision}" if keep else decision


def bad_hints_decision(error: str) -> str:
    """``slurmplan! bad hints: <error>``: what a job whose hints were refused shows in its admin comment."""
    return f"{BAD_HINTS_PREFIX} {error}"


USER_HOLD_MARK = "slurmplan! held by its user"
"""The decision job_submit.lua writes for a managed job its user submitted held (``sbatch -H``): that hold is the
user's, and the daemon must not lift it (Slurm shows both that hold and slurmplan's own as ``JobHeldUser``)."""


def foreign_hold(held: bool, state_reason: str, admin_comment: str, restart_count: int = 0) -> str | None:
    """Who else holds a held job: ``"admin"``, ``"user"``, or None when the hold is slurmplan's own (or none).

    slurmplan holds with ``scontrol uhold``/``requeuehold`` and job_submit.lua with priority 0, all of which Slurm
    shows as ``JobHeldUser``; only an administrator's ``scontrol hold`` shows ``JobHeldAdmin``, so that one is
    never slurmplan's. A user's hold is told apart by the admin comment, which users cannot write: the user held it
    at submission (:data:`USER_HOLD_MARK`), or it is held although the daemon's decision there says it should run
    (the daemon writes ``held (...)`` with its own holds). A job that requeue-held itself (``restart_count`` > 0:
    the launcher does so on the daemon's checkpoint signal, before the daemon writes ``held``) counts as the
    daemon's: a user who holds a job that was requeued before is not told apart, the one case left. Neither the
    daemon nor the watchdog ever lifts a foreign hold.
    """
    if not held:
        return None
    if state_reason == "JobHeldAdmin":
        return "admin"
    decision = decision_of(admin_comment)
    if decision.startswith(USER_HOLD_MARK):
        return "user"
    running = decision.startswith(PREFIX) and not decision[len(PREFIX) :].strip().startswith("held")
    if running and restart_count == 0:
        return "user"  # decided to run (released by the daemon), held since, never requeued: by its user
    return None


def decision_of(admin_comment: str) -> str:
    """The decision part of an admin comment ('' when it holds none)."""
    return split_admin_comment(admin_comment).decision


def parse_decision(text: str) -> tuple[Cell, Plan] | None:
    """The Cell and Plan in a decision (or a whole admin comment); None when it holds no decision.

    The launcher uses this when the SPANK plugin is not installed; the plugin's C parser reads the same tokens.
    """
    decision = split_admin_comment(text).decision
    if not decision.startswith(PREFIX):
        return None
    tokens = decision[len(PREFIX) :].split("|")[0].split()
    if not tokens or tokens[0] == "held":  # "slurmplan: held (preempted) | ...": no configuration to run in
        return None
    if not (cell_match := _CELL_RE.fullmatch(tokens[0])):
        raise ValidationError("decision", decision, _DECISION_ALLOWED)
    try:
        plan = parse_plan_short(" ".join(tokens[1:]))
    except ValidationError as exc:
        if exc.field != "plan token":
            raise
        raise ValidationError("decision", exc.value, _PLAN_TOKENS_ALLOWED, "decision") from None
    return Cell(cell_match.group(1), int(cell_match.group(2)), plan.pp), plan


# ------------------------------------------------------------------------------------------ plan environment

PLAN_INT_VARS: Mapping[str, str] = {
    "SLURMPLAN_DP": "dp",
    "SLURMPLAN_TP": "tp",
    "SLURMPLAN_PP": "pp",
    "SLURMPLAN_MICRO_BATCH": "micro_batch",
    "SLURMPLAN_GRAD_ACCUM": "grad_accum",
    "SLURMPLAN_ZERO_STAGE": "zero_stage",
    "SLURMPLAN_VIRTUAL_STAGES": "virtual_stages",
}
PLAN_BOOL_VARS: Mapping[str, str] = {"SLURMPLAN_CHECKPOINTING": "checkpointing", "SLURMPLAN_OFFLOAD": "offload"}
PLAN_VARS: tuple[str, ...] = (
    "SLURMPLAN_DP",
    "SLURMPLAN_TP",
    "SLURMPLAN_PP",
    "SLURMPLAN_MICRO_BATCH",
    "SLURMPLAN_GRAD_ACCUM",
    "SLURMPLAN_CHECKPOINTING",
    "SLURMPLAN_ZERO_STAGE",
    "SLURMPLAN_OFFLOAD",
    "SLURMPLAN_VIRTUAL_STAGES",
    "SLURMPLAN_GPU_TYPE",
    "SLURMPLAN_GPUS",
)
"""Every variable of the plan environment, in the order it is printed (the SPANK plugin exports exactly these)."""
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n", ""}


def plan_environment(cell: Cell, plan: Plan) -> dict[str, str]:
    """The ``SLURMPLAN_*`` variables a job's tasks see (the SPANK plugin exports the same names and values)."""
    env = {name: str(getattr(plan, field)) for name, field in PLAN_INT_VARS.items()}
    env.update({name: "1" if getattr(plan, field) else "0" for name, field in PLAN_BOOL_VARS.items()})
    env.update({"SLURMPLAN_GPU_TYPE": cell.gpu_type, "SLURMPLAN_GPUS": str(cell.gpus)})
    return {name: env[name] for name in PLAN_VARS}


def _env_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValidationError(name, text, "one of 1/0, true/false, yes/no, on/off", "environment")


def _env_int(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValidationError(name, text, "an integer", "environment") from None


def plan_from_environment(env: Mapping[str, str]) -> tuple[Plan, str | None, int | None] | None:
    """(plan, GPU type, GPU count) from the plan variables, or None when none is set; unset ones keep defaults.

    Inverse of :func:`plan_environment`; the boolean variables also take true/false, yes/no, on/off.
    """
    if not any(name in env for name in PLAN_VARS):
        return None
    fields: dict[str, object] = {}
    for name, field_name in PLAN_INT_VARS.items():
        if name in env:
            fields[field_name] = _env_int(name, env[name])
    for name, field_name in PLAN_BOOL_VARS.items():
        if name in env:
            fields[field_name] = _env_bool(name, env[name])
    gpu_type = env.get("SLURMPLAN_GPU_TYPE") or None
    gpus = _env_int("SLURMPLAN_GPUS", env["SLURMPLAN_GPUS"]) if env.get("SLURMPLAN_GPUS") else None
    plan = Plan(**fields)  # type: ignore[arg-type]
    return plan, (gpu_type.lower() if gpu_type else None), gpus
