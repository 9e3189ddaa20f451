"""Parsers for the compact strings Slurm prints: hostlists, GRES and TRES.

They are small pure functions, kept apart from the backend so they can be property-tested on their own
(``expand_hostlist(compress_hostlist(names))`` gives the names back) and so that no Slurm string travels past
``slurm/``: the backend turns these strings into plain numbers and tuples before building domain values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
