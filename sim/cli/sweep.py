"""``python -m sim sweep SCENARIO``: every cell of the scenario's grid."""

from __future__ import annotations

import argparse

from sim.cli.common import add_simulation_command, load, simulate_and_report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` command."""
    parser = add_simulation_command(
        subparsers, "sweep", help="run every cell of a scenario's sweep grid",
        description="Run every cell of the scenario's sweep grid (a scenario without a "
                    "sweep is one cell) and write results.parquet, summary.json, report.md "
                    "and report.html (figures embedded) to --out.")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, simulate every cell, report."""
    return simulate_and_report(args, load(args), "sweep")
