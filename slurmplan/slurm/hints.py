"""Plan hints and the admin comment layout, as the Slurm backend uses them.

The grammar and every text format slurmplan writes into Slurm live in :mod:`slurmplan.formats` (one module
that slurm/, mechanism/, launch/ and sim/ all import). This module keeps the names other code imported from
here; new code imports ``slurmplan.formats``.
"""

from __future__ import annotations

from slurmplan.formats import (
    INT_MAX_DIGITS,
    KEYS,
    PREFIX,
    SEPARATOR,
    WHERE,
    AdminComment,
    compose_admin_comment,
    find_hints,
    format_decision,
    format_hints,
    parse_decision,
    parse_hints,
    plan_environment,
    split_admin_comment,
)

__all__ = [
    "INT_MAX_DIGITS",
    "KEYS",
    "PREFIX",
    "SEPARATOR",
    "WHERE",
    "AdminComment",
    "compose_admin_comment",
    "find_hints",
    "format_decision",
    "format_hints",
    "parse_decision",
    "parse_hints",
    "plan_environment",
    "split_admin_comment",
]
