"""``python -m sim run SCENARIO``: one cell (the scenario's base values)."""

from __future__ import annotations

import argparse
import sys

from sim.cli.common import add_simulation_command, folder_path, load, simulate_and_report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` command."""
    parser = add_simulation_command(
        subparsers, "run", help="run one cell: the scenario without its sweep",
        description="Run the scenario's base cell (its sweep section, if any, is ignored) "
                    "and write results.parquet, summary.json, report.md and report.html to --out.")
    parser.add_argument("--otel", metavar="FILE", type=folder_path,
                        help="also write the simulated runs as OpenTelemetry GenAI spans "
                             "(OTLP JSON, as 'sim live --otel' does) to FILE; implies --traces")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load and simulate the base cell; with --otel, its target is checked
    before anything runs and the spans written after the results folder (a
    failure then keeps the results and exits 2 saying so)."""
    scenario = load(args)
    if scenario.sweep and not args.quiet:
        print(f"note: ignoring the sweep of {scenario.name} (use 'sweep' to run it)",
              file=sys.stderr)
    if getattr(args, "otel", None):
        args.traces = True
    return simulate_and_report(args, scenario, "run")
