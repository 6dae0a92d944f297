"""``sim scenarios``: the scenarios a name finds, one line each (names,
header lines and paths with their control characters shown as escapes:
:func:`~sim.output.safe_text.printable`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``scenarios`` command."""
    parser = subparsers.add_parser(
        "scenarios", help="list the scenarios that commands find by name",
        description="List the scenarios a command finds by name ('sim run bounded'): the "
                    "built-in ones and yours (./scenarios/, the folders of $SIM_SCENARIOS "
                    "and of [tool.sim] scenarios in pyproject.toml), one line each: the name, "
                    "where it is and its first header line. A path that exists always wins "
                    "over a name.")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: one line per scenario (default) or JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the scenarios."""
    from sim.cli.common import print_json
    from sim.output.safe_text import printable
    from sim.scenario.catalog import entries

    found = entries()
    if args.format == "json":
        print_json([{"name": e.name, "path": str(e.path), "origin": e.origin,
                     "summary": e.summary} for e in found])
        return 0
    names = [printable(e.name, newlines=False) for e in found]
    width = max(map(len, names), default=0)
    for e, name in zip(found, names, strict=True):
        where = "" if e.origin == "built-in" else f"  ({_short(e.path)})"
        print(printable(f"{name:<{width}}  {e.summary}{where}", newlines=False))
    return 0


def _short(path: Path) -> str:
    """``path`` relative to the current folder when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
