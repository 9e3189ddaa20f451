"""Parsers for the compact strings Slurm prints: hostlists, GRES and TRES.

They are small pure functions, kept apart from the backend so they can be property-tested on their own
(``expand_hostlist(compress_hostlist(names))`` gives the names back) and so that no Slurm string travels past
``slurm/``: the backend turns these strings into plain numbers and tuples before building domain values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from slurmplan.domain import ValidationError

# ------------------------------------------------------------------------------------------------ hostlists

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_SUFFIX_RE = re.compile(r"^(.*?)(\d+)$")
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_MAX_HOSTS = 1_000_000


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside of brackets and parentheses (``a[1,2],b`` -> ``a[1,2]``, ``b``)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise ValidationError("list", text, f"balanced brackets (unexpected {ch!r} at {i})")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValidationError("list", text, "balanced brackets")
    parts.append(text[start:])
    return parts


def _expand_ranges(body: str, expr: str) -> list[str]:
    """``1-3,07`` -> ``['1', '2', '3', '07']``; a range keeps the zero padding of its lower end."""
    out: list[str] = []
    for piece in body.split(","):
        m = _RANGE_RE.match(piece)
        if not m:
            raise ValidationError("hostlist", expr, "ranges like 'n[1-3,5]' or 'n[01-10]'")
        lo_s, hi_s = m.group(1), m.group(2)
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo or hi - lo > _MAX_HOSTS:
            raise ValidationError("hostlist", expr, "ranges with low <= high (and fewer than a million hosts)")
        width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_one(expr: str, whole: str) -> list[str]:
    """Expand one hostlist item, which may hold several bracket groups (``r[1-2]n[1-3]``)."""
    open_at = expr.find("[")
    if open_at < 0:
        if not _NAME_RE.match(expr):
            raise ValidationError("hostlist", whole, "host names of letters, digits, '-', '_' and '.'")
        return [expr]
    close_at = expr.find("]", open_at)
    if close_at < 0:
        raise ValidationError("hostlist", whole, "balanced brackets")
    prefix, body, rest = expr[:open_at], expr[open_at + 1 : close_at], expr[close_at + 1 :]
    if prefix and not _NAME_RE.match(prefix):
        raise ValidationError("hostlist", whole, "host names of letters, digits, '-', '_' and '.'")
    tails = _expand_one(rest, whole) if rest else [""]
    return [prefix + num + tail for num in _expand_ranges(body, whole) for tail in tails]


def expand_hostlist(expr: str) -> tuple[str, ...]:
    """All host names of a Slurm hostlist expression, in order: ``a100n[1-2,5],t4n3`` -> 4 names.

    An empty string (or Slurm's ``(null)``) is the empty list.
    """
    expr = expr.strip()
    if not expr or expr == "(null)":
        return ()
    names: list[str] = []
    for item in split_top_level(expr):
        if not item:
            raise ValidationError("hostlist", expr, "no empty items between commas")
        names.extend(_expand_one(item, expr))
    return tuple(names)


def _split_name(name: str) -> tuple[str, int | None, int]:
    """``n007`` -> (``n``, 7, 3); ``n7`` -> (``n``, 7, 0); ``login`` -> (``login``, None, 0)."""
    m = _SUFFIX_RE.match(name)
    if not m:
        return name, None, 0
    digits = m.group(2)
    width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
    return m.group(1), int(digits), width


def hostlist_sort_key(name: str) -> tuple[str, int, int, str]:
    """Order hosts as Slurm does: by prefix, then numerically (``n2`` before ``n10``)."""
    prefix, num, width = _split_name(name)
    return (prefix, width, -1 if num is None else num, name)


def compress_hostlist(names: Iterable[str]) -> str:
    """The shortest usual hostlist for ``names`` (sorted, duplicates dropped): ``a100n[1-2,5],t4n3``."""
    unique = sorted(set(names), key=hostlist_sort_key)
    for name in unique:
        if not _NAME_RE.match(name):
            raise ValidationError("host name", name, "letters, digits, '-', '_' and '.'")
    groups: dict[tuple[str, int], list[int]] = {}
    singles: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in unique:
        prefix, num, width = _split_name(name)
        if num is None:
            singles.append(name)
            order.append(name)
            continue
        key = (prefix, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(num)
    out: list[str] = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width = key
        nums = groups[key]
        if len(nums) == 1:
            out.append(f"{prefix}{str(nums[0]).zfill(width)}")
            continue
        out.append(f"{prefix}[{_compress_numbers(nums, width)}]")
    return ",".join(out)


def _compress_numbers(nums: list[int], width: int) -> str:
    """Sorted unique numbers -> ``1-3,5`` with each number zero-padded to ``width``."""
    spans: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        lo, hi = str(start).zfill(width), str(prev).zfill(width)
        spans.append(lo if start == prev else f"{lo}-{hi}")
        if n is not None:
            start = prev = n
    return ",".join(spans)


# ----------------------------------------------------------------------------------------------- GRES / TRES

_GRES_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_\-]*)(?::(?P<type>[A-Za-z0-9_.\-]+?))??(?::(?P<count>\d+))?$")
_SUFFIXES = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_NULLS = ("", "(null)", "N/A", "none", "None")


@dataclass(frozen=True)
class Gres:
    """One generic resource: ``gpu:a100:4`` -> name ``gpu``, type ``a100``, count 4.

    ``indices`` are the device indices from ``(IDX:0-1,3)`` when Slurm printed them (``gres_used``);
    ``sockets`` the socket affinity from ``(S:0-1)`` (``gres`` of a node).
    """

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] | None = None
    sockets: tuple[int, ...] | None = None

    def format(self) -> str:
        """Back to Slurm's form, without the parenthesised detail: ``gpu:a100:4``."""
        parts = [self.name, *([self.type] if self.type else []), str(self.count)]
        return ":".join(parts)


def _int_list(text: str, field: str) -> tuple[int, ...] | None:
    """``0-1,3`` -> (0, 1, 3); ``N/A`` -> None."""
    if text in _NULLS:
        return None
    out: list[int] = []
    for piece in text.split(","):
        m = _RANGE_RE.match(piece)
        if not m:
            raise ValidationError(field, text, "index ranges like '0-1,3' or N/A")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ValidationError(field, text, "ranges with low <= high")
        out.extend(range(lo, hi + 1))
    return tuple(out)


def parse_gres_item(text: str) -> Gres:
    """One item such as ``gpu:a100:4(S:0-1)``, ``gpu:a100:2(IDX:0-1)``, ``gres:gpu:a100:2`` or ``gres/gpu:a100=2``.

    A missing count means 1 (``gres:gpu`` asks for one GPU), as Slurm reads it.
    """
    item = text.strip()
    detail = ""
    if item.endswith(")") and "(" in item:
        item, _, detail = item.partition("(")
        detail = detail[:-1]
    if item.startswith(("gres:", "gres/")):
        item = item[5:]
    if "=" in item:  # TRES form: gpu:a100=2
        item, _, count_s = item.partition("=")
        if not count_s.isdigit():
            raise ValidationError("gres", text, "a count after '=' such as 'gres/gpu:a100=2'")
        item = f"{item}:{count_s}"
    m = _GRES_RE.match(item)
    if not m:
        raise ValidationError("gres", text, "name[:type][:count] such as 'gpu:a100:4' or 'gres:gpu:a100:2'")
    name, gtype, count = m.group("name"), m.group("type"), m.group("count")
    details = _gres_details(detail, text) if detail else {}
    indices = _int_list(details["IDX"], "gres index") if "IDX" in details else None
    sockets = _int_list(details["S"], "gres socket") if "S" in details else None
    return Gres(name, gtype, int(count) if count is not None else 1, indices, sockets)


def _gres_details(detail: str, text: str) -> dict[str, str]:
    """``IDX:0-1,3`` -> {"IDX": "0-1,3"}; a comma piece without a key continues the previous key's value."""
    out: dict[str, str] = {}
    key = None
    for piece in detail.split(","):
        k, sep, value = piece.partition(":")
        if sep and not k[:1].isdigit():
            key = k
            out[key] = value
        elif key is not None:
            out[key] += "," + piece
        else:
            raise ValidationError("gres", text, "details like '(IDX:0-1)' or '(S:0-1)'")
    return out


def parse_gres(text: str | None) -> tuple[Gres, ...]:
    """A comma-separated GRES list (a node's ``gres``/``gres_used``, a job's ``tres_per_node``)."""
    if text is None or text.strip() in _NULLS:
        return ()
    return tuple(parse_gres_item(part) for part in split_top_level(text.strip()) if part.strip())


def format_gres(items: Iterable[Gres]) -> str:
    return ",".join(g.format() for g in items)


def gpu_request(text: str | None) -> tuple[str | None, int]:
    """(GPU type, count) of the ``gpu`` entries of a GRES string; (None, 0) when there are none.

    When several typed entries are present (``gpu:a100:2,gpu:t4:1``) the type with the largest count wins,
    since the domain describes a node or a request by one GPU type; counts are summed.
    """
    gpus = [g for g in parse_gres(text) if g.name == "gpu"]
    if not gpus:
        return None, 0
    total = sum(g.count for g in gpus)
    typed = sorted((g for g in gpus if g.type), key=lambda g: -g.count)
    return (typed[0].type if typed else None), total


def format_tres_per_node(gpu_type: str | None, gpus: int) -> str:
    """The value ``scontrol update TresPerNode=`` takes: ``gres:gpu:a100:2``."""
    if gpus < 0:
        raise ValidationError("gpus", gpus, "a count >= 0")
    return f"gres:gpu:{gpu_type}:{gpus}" if gpu_type else f"gres:gpu:{gpus}"


def parse_size_mb(text: str) -> int:
    """``1G`` -> 1024, ``500M`` -> 500, ``2048`` -> 2048 (Slurm's default unit for memory is MB)."""
    m = re.match(r"^(\d+(?:\.\d+)?)([KMGTkmgt]?)$", text.strip())
    if not m:
        raise ValidationError("memory", text, "a number with an optional K/M/G/T suffix")
    value, unit = float(m.group(1)), m.group(2).lower()
    return int(round(value * _SUFFIXES[unit or "m"] / _SUFFIXES["m"]))


def parse_tres(text: str | None) -> dict[str, int]:
    """A TRES string such as ``cpu=2,mem=2G,node=1,billing=2,gres/gpu:a100=2`` -> ``{"cpu": 2, "mem": 2048,
    "node": 1, "billing": 2, "gres/gpu:a100": 2}`` (memory in MB)."""
    if text is None or text.strip() in _NULLS:
        return {}
    out: dict[str, int] = {}
    for part in text.strip().split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValidationError("tres", text, "key=value pairs such as 'cpu=2,mem=2G,gres/gpu:a100=2'")
        out[key] = parse_size_mb(value) if key == "mem" else _tres_count(value, text)
    return out


def _tres_count(value: str, text: str) -> int:
    m = re.match(r"^(\d+)([KMGTkmgt]?)$", value)
    if not m:
        raise ValidationError("tres", text, "integer counts (optionally with K/M/G/T)")
    return int(m.group(1)) * _SUFFIXES[m.group(2).lower()]


def format_tres(tres: dict[str, int]) -> str:
    """Inverse of :func:`parse_tres` (memory written in MB with an ``M`` suffix)."""
    return ",".join(f"{k}={v}M" if k == "mem" else f"{k}={v}" for k, v in tres.items())


_FEATURE_TERM = re.compile(r"[a-z0-9_.-]+")


def gpu_type_term(features: str, gpu_types: frozenset[str]) -> str | None:
    """The GPU type in a constraint of ``&``-joined features (``a100``, ``ib&a100``, as job_submit.lua writes
    them), when exactly one term names a type and every term is a plain feature; else None."""
    terms = features.split("&")
    if not all(_FEATURE_TERM.fullmatch(t) for t in terms):
        return None
    typed = [t for t in terms if t in gpu_types]
    return typed[0] if len(typed) == 1 else None
