"""``python -m sim capacity SCENARIO``: the capacity of the scenario's DES cell,
and with ``--target-p95-wait`` the fewest sandboxes and model slots that
meet a queueing target (:mod:`sim.sweeps.sizing`); the work is
:func:`sim.api.capacity.write_capacity`, this module parses and prints.

The scenario runs in the DES engine whatever its ``engine`` says; a sweep
section is ignored (the base cell runs). The capacity table gives L, the
arrival rate and W with Little's-law error, utilisation and peaks per
resource, queueing p50/p95, rate-limit load and the tail's share of sandbox
time; the results folder is the usual one (results.parquet, summary.json with
a ``capacity`` section and, when sizing, a ``sizing`` section, report.md,
report.html, timeseries.parquet). With sizing, the run reported is the one at the sized
capacity; sizing meets the target over all tasks and for every tenant. The
DES run shows its progress (tasks ended) on stderr.
"""

from __future__ import annotations

import argparse
import sys

from sim.cli.common import add_simulation_options, load, overrides_of, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``capacity`` command."""
    parser = subparsers.add_parser(
        "capacity", help="capacity of the scenario in the DES engine; size it for a target",
        description="Run the scenario's base cell in the discrete-event engine and print "
                    "its capacity table (Little's law, utilisation, queueing, tail share). "
                    "With --target-p95-wait, find the fewest sandboxes and model slots "
                    "whose p95 queueing waits meet the target.")
    add_simulation_options(parser)
    parser.add_argument("--target-p95-wait", type=float, metavar="SECONDS",
                        help="size sandboxes and model slots so that the p95 wait for a "
                             "sandbox and the p95 total wait for model slots per task are at "
                             "most SECONDS")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, (size,) simulate with progress, write the results, print."""
    from sim.api.capacity import capacity_text, check_target, write_capacity

    check_target(args.target_p95_wait)
    scenario = load(args)
    if scenario.sweep and not args.quiet:
        print(f"note: ignoring the sweep of {scenario.name} (capacity runs the base cell)",
              file=sys.stderr)
    run = write_capacity(scenario, args.out, target_p95_wait_s=args.target_p95_wait,
                         overrides=overrides_of(args), force=args.force, workers=args.workers,
                         progress=not args.quiet, cost_ceiling=args.cost_ceiling)
    if run.problems:  # pragma: no cover - an engine bug, reported rather than hidden
        print("warning: the run breaks engine invariants:\n  " + "\n  ".join(run.problems),
              file=sys.stderr)
    if args.format == "json":
        print_json(run.summary)
        return 0
    print(capacity_text(run))
    return 0
