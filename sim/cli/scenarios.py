"""``sim scenarios``: the scenarios a name finds, one line each (names,
header lines and paths with their control characters shown as escapes:
:func:`sim.api.scenarios.catalog_text`)."""

from __future__ import annotations

import argparse

from sim.cli.common import add_format_option


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``scenarios`` command."""
    parser = subparsers.add_parser(
        "scenarios", help="list the scenarios that commands find by name",
        description="List the scenarios a command finds by name ('sim run bounded'): the "
                    "built-in ones and yours (./scenarios/, the folders of $SIM_SCENARIOS "
                    "and of [tool.sim] scenarios in pyproject.toml), one line each: the name, "
                    "where it is and its first header line. A path that exists always wins "
                    "over a name.")
    add_format_option(parser, "stdout: one line per scenario (default) or JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the scenarios (:func:`sim.api.scenarios.catalog`)."""
    from sim.api.scenarios import catalog, catalog_text
    from sim.cli.common import print_json

    found = catalog()
    if args.format == "json":
        print_json(found)
    elif found:
        print(catalog_text(found))
    return 0
