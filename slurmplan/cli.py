"""The ``slurmplan`` command. Each room contributes its subcommands through a ``register(subparsers)``
function in its own ``commands`` module, so this file only lists them."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys

from slurmplan import __version__
from slurmplan.domain import SlurmplanError

# One line per room that has commands. Each module defines ``register(subparsers) -> None`` and sets
# ``func`` (taking the parsed args, returning an exit code) on every parser it adds.
COMMAND_MODULES: tuple[str, ...] = (
    # "slurmplan.<room>.commands",
    "slurmplan.perf.commands",
    "slurmplan.slurm.commands",
    "slurmplan.sim.commands",
    "slurmplan.history.commands",
    "slurmplan.control.commands",
    "slurmplan.control.site_commands",
    "slurmplan.control.ops_commands",
    "slurmplan.policy.commands",
    "slurmplan.launch.commands",
    "slurmplan.replay.commands",
)


_RST = ((re.compile(r":[a-z]+:`~?([^`]*)`"), r"\1"), (re.compile(r"``([^`]*)``"), r"\1"))


class Parser(argparse.ArgumentParser):
    """argparse with help text cleaned of reStructuredText markup.

    Rooms reuse their module docstrings as descriptions; ````x```` and ``:func:`x``` read as noise in a
    terminal. Subparsers are built with the parent's class, so every level gets this.
    """

    def format_help(self) -> str:
        text = super().format_help()
        for pattern, repl in _RST:
            text = pattern.sub(repl, text)
        return text


def _describe_all(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand a description: its one-line help when its room wrote none (``slurmplan site -h``
    printed only usage and options)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not sub.description and helps.get(name):
                    sub.description = helps[name][0].upper() + helps[name][1:] + "."
                _describe_all(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="slurmplan",
        description="Heterogeneity- and plan-aware scheduling of deep-learning training on Slurm.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"slurmplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _describe_all(parser)
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
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except SlurmplanError as exc:
        print(f"slurmplan: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """``slurmplan status --json | head -1``: the reader closed the pipe; stop quietly, as ``cat`` would.

    The Python documentation's recipe (signal module, "Note on SIGPIPE"): point stdout at /dev/null so the
    interpreter's final flush of what is still buffered does not raise a second BrokenPipeError at exit.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


if __name__ == "__main__":
    sys.exit(main())
