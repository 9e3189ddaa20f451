"""The plan-hint grammar: one text form for what a user tells slurmplan about a job.

Hints travel through Slurm as text. The SPANK plugin's sbatch options (``--plan-gpus=2:8``), or a
``--comment "slurmplan:..."``, reach ``site/job_submit.lua``, which writes them into the job's admin comment in
the canonical form below; the daemon reads that admin comment back from ``squeue --json`` and parses it here.
``site/job_submit.lua`` implements the SAME grammar (same keys, limits and error texts) so that a hint refused at
submit time is exactly a hint the daemon could not parse; ``tests/integration/test_hint_parity.py`` fuzzes both.

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
    steps     integer 1..999999999                    steps
    deadline  YYYY-MM-DDTHH:MM[:SS][Z], UTC            deadline (Unix time)
    managed   yes | no                                managed
    asked     TYPE:N (TYPE lower-cased, 1-32 of [A-Za-z0-9_-]; N 1..999999999)   asked
              the typed --gres request job_submit.lua made movable (gpu:a100:4 -> gpu:4 + constraint a100)

Integers are plain decimal digits (at most 9). Cross-field rules: ``min <= max``; ``gpus`` lies within
``[min, max]`` where those are given; ``workers`` is at least ``gpus`` and ``max`` (a job cannot use more GPUs
than it has logical workers). A key may appear once.

The canonical form lists the keys in the table's order, omits defaults (``class=best-effort``,
``managed=yes``) and unset fields, writes integers without leading zeros and the deadline as
``YYYY-MM-DDTHH:MM`` (``:SS`` only when the seconds are not zero). ``parse_hints(format_hints(h)) == h`` for
every ``Hints`` whose deadline is a whole second.

Admin comment layout (the daemon owns the part after the separator)::

    <hints> || <decision>
    slurmplan:model=llama2-7b;gpus=8 || slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | round 17 | lease until 12:06

The hints come first and are never rewritten by the daemon; the decision follows `` || ``. A comment without
the separator is all hints when it starts with ``slurmplan:`` and has a ``=`` or nothing after the prefix, and
all decision when it starts with ``slurmplan:`` otherwise.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from slurmplan.domain import Cell, Hints, JobClass, Plan, ValidationError

PREFIX = "slurmplan:"
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
    "steps",
    "deadline",
    "managed",
    "asked",
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


def split_admin_comment(text: str) -> AdminComment:
    """Split an admin comment (or a ``--comment``) into hints and decision, per the layout in the module doc."""
    stripped = (text or "").strip(_BLANK)
    if "||" in stripped:
        left, _, right = stripped.partition("||")
        return AdminComment(left.strip(_BLANK), right.strip(_BLANK))
    if not stripped.startswith(PREFIX):
        return AdminComment()
    rest = stripped[len(PREFIX) :].strip(_BLANK)
    if not rest or "=" in rest:
        return AdminComment(hints=stripped)
    return AdminComment(decision=stripped)


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
_PLAN_TOKENS = {"dp": "dp", "tp": "tp", "pp": "pp", "mb": "micro_batch", "ga": "grad_accum", "v": "virtual_stages"}


def format_decision(cell: Cell, plan: Plan, *extra: str) -> str:
    """``slurmplan: a100x8 dp2 tp4 pp1 mb2 ga8 | round 17 | lease until 12:06`` (extra parts after ``|``)."""
    head = f"{PREFIX} {cell.gpu_type}x{cell.gpus} {plan.short()}"
    return " | ".join([head, *extra])


def parse_decision(text: str) -> tuple[Cell, Plan] | None:
    """The Cell and Plan in a decision (or a whole admin comment); None when it holds no decision.

    The launcher uses this when the SPANK plugin is not installed; the plugin's C parser reads the same tokens.
    """
    decision = split_admin_comment(text).decision
    if not decision.startswith(PREFIX):
        return None
    tokens = decision[len(PREFIX) :].split("|")[0].split()
    if not tokens:
        return None
    if not (cell_match := _CELL_RE.fullmatch(tokens[0])):
        raise ValidationError("decision", decision, "slurmplan: <type>x<gpus> dpN tpN ppN mbN gaN [vN] [gc] [zN] [off]")
    values: dict[str, object] = {}
    for token in tokens[1:]:
        if token == "gc":
            values["checkpointing"] = True
        elif token == "off":
            values["offload"] = True
        elif (m := re.fullmatch(r"(dp|tp|pp|mb|ga|v|z)(\d+)", token)) is not None:
            key, number = m.groups()
            values["zero_stage" if key == "z" else _PLAN_TOKENS[key]] = int(number)
        else:
            raise ValidationError("decision", token, "one of dpN tpN ppN mbN gaN vN zN gc off", "decision")
    plan = Plan(**values)  # type: ignore[arg-type]
    return Cell(cell_match.group(1), int(cell_match.group(2)), plan.pp), plan


def plan_environment(cell: Cell, plan: Plan) -> dict[str, str]:
    """The ``SLURMPLAN_*`` variables a job's tasks see (the SPANK plugin exports the same names and values)."""
    return {
        "SLURMPLAN_DP": str(plan.dp),
        "SLURMPLAN_TP": str(plan.tp),
        "SLURMPLAN_PP": str(plan.pp),
        "SLURMPLAN_MICRO_BATCH": str(plan.micro_batch),
        "SLURMPLAN_GRAD_ACCUM": str(plan.grad_accum),
        "SLURMPLAN_CHECKPOINTING": "1" if plan.checkpointing else "0",
        "SLURMPLAN_ZERO_STAGE": str(plan.zero_stage),
        "SLURMPLAN_OFFLOAD": "1" if plan.offload else "0",
        "SLURMPLAN_VIRTUAL_STAGES": str(plan.virtual_stages),
        "SLURMPLAN_GPU_TYPE": cell.gpu_type,
        "SLURMPLAN_GPUS": str(cell.gpus),
    }
