"""The ``slurmplan`` command. Each room contributes its subcommands through a ``register(subparsers)``
function in its own ``commands`` module, so this file only lists them."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from slurmplan.domain import SlurmplanError

# One line per room that has commands. Each module defines ``register(subparsers) -> None`` and sets
# ``func`` (taking the parsed args, returning an exit code) on every parser it adds.
COMMAND_MODULES: tuple[str, ...] = (
    # "slurmplan.<room>.commands",
    "slurmplan.perf.commands",
    "slurmplan.slurm.commands",
    "slurmplan.sim.commands",
    "slurmplan.control.commands",
    "slurmplan.control.site_commands",
    "slurmplan.control.ops_commands",
    "slurmplan.policy.commands",
    "slurmplan.launch.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slurmplan",
        description="Heterogeneity- and plan-aware scheduling of deep-learning training on Slurm.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SlurmplanError as exc:
        print(f"slurmplan: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
