"""``python -m sim replay TRACES_DIR SCENARIO``: what the scenario's harness
would have done to recorded runs.

The scenario's ``harness`` section is the candidate (a ``sweep`` over harness
settings gives one cell per setting); its ``world`` is not used. Every run of
the trace folder is replayed through the real harness loop by
:mod:`sim.drivers.replay`, and the results folder (``results.parquet``,
``summary.json``, ``report.md``, ``report.html``; see :mod:`sim.output.replay`)
has a sweep's contract, so ``python -m sim compare`` takes two replays, or a
replay and a simulation. Example, a 100,000 prompt-token budget on tau2::

    python -m sim replay traces/tau2 scenarios/replay.yaml \\
        --set harness.budgets.tokens=100000 --out reports/replay_tokens
"""

from __future__ import annotations

import argparse
import sys

from sim.cli.common import (
    add_format_option,
    add_plugin_option,
    add_scheduler_option,
    bounded_int,
    folder_path,
    print_json,
    where_flag,
)
from sim.drivers.replay import AFTER_INTERVENTION, TOOL_ERROR_KINDS
from sim.scenario.limits import MAX_WORKERS

_DESCRIPTION = (
    "Replay recorded runs (a trace folder) through the scenario's harness: which runs it would "
    "have stopped and why, how many of them had succeeded, the tokens and dollars it would have "
    "saved, and what its detector fires on. Writes results.parquet, summary.json, report.md "
    "and report.html to --out, comparable with 'compare'.")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``replay`` command."""
    parser = subparsers.add_parser(
        "replay", help="what a harness setting would have done to recorded runs",
        description=_DESCRIPTION)
    parser.add_argument("traces", help="trace folder (runs.parquet and calls.parquet)")
    parser.add_argument("scenario", help="scenario YAML: its harness section is the candidate")
    parser.add_argument("--out", type=folder_path,
                        help="results folder (default: reports/replay_<scenario>); "
                             "checked before anything runs, written whole, never "
                             "holding another run's results unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace a results folder that holds another run's results")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a field, e.g. "
                                                   "harness.budgets.tokens=100000 (repeatable)")
    parser.add_argument("--after-intervention", choices=AFTER_INTERVENTION, default="continue",
                        help="when the candidate nudges, retries a tool error the old harness "
                             "passed on, or rejects a claim: continue as recorded (default; an "
                             "upper bound on cost) or stop the run there (a lower bound)")
    parser.add_argument("--tool-error-kind", choices=TOOL_ERROR_KINDS, default="validation",
                        help="the kind the candidate's error classifier sees for a recorded "
                             "tool error (traces do not record it; default validation: the "
                             "model sees it, as it did when recorded)")
    parser.add_argument("--polling", action="append", default=[], metavar="TOOL",
                        help="a recorded tool the detector treats as polling (repeatable)")
    add_format_option(parser, "stdout: tables (default) or the summary as JSON")
    add_plugin_option(parser)
    parser.add_argument("--workers", type=bounded_int(1, MAX_WORKERS), default=1,
                        help=f"processes, 1 to {MAX_WORKERS} (default 1): runs are replayed in "
                             "chunks and put back in order; results are identical for any "
                             "number")
    add_scheduler_option(parser, "chunks run", " (see README)")
    parser.add_argument("--quiet", action="store_true", help="no progress or notes on stderr")
    where_flag(parser, "replay")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Replay through :func:`sim.api.replaying.replay` (notes on stderr as
    they arise, unless --quiet; warnings, such as a model priced without the
    catalogue, always) and print the summary: JSON, or each cell's table and
    replay figures."""
    from sim.api.replaying import replay, replayed_text, written_summary

    replayed = replay(
        args.traces, args.scenario, args.overrides, out=args.out, force=args.force,
        after_intervention=args.after_intervention, tool_error_kind=args.tool_error_kind,
        polling=args.polling,
        allow_plugins=args.allow_plugins, progress=not args.quiet, workers=args.workers,
        scheduler=args.scheduler, notify=_warning if args.quiet else _note, where=args.where)
    if args.format == "json":
        print_json(written_summary(replayed))
    else:
        print(replayed_text(replayed))
    return 0


def _note(note: str) -> None:
    print(note, file=sys.stderr)


def _warning(note: str) -> None:
    if note.startswith("warning:"):
        print(note, file=sys.stderr)
