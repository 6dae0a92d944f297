"""Command line: ``python -m sim <command> ...``.

Each command lives in its own module under :mod:`sim.cli` with a
``register(subparsers)`` function that adds its parser and sets ``handler``.
Bad input (:class:`~sim.errors.InputError`) prints one clear message on stderr
and exits with status 2; argparse's own usage errors exit 2 as well.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sim.errors import InputError

COMMANDS = ("run", "sweep", "cost", "compare", "capacity", "traces", "replay", "live")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command registered."""
    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description="Simulate LLM agent harnesses: outcomes, cost and capacity.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"sim.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status (0 ok, 1 regression found, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
