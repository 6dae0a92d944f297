"""``python -m sim traces import|summary``: real agent runs in, their figures out."""

from __future__ import annotations

import argparse
import json
import sys

from sim.cli.common import (
    add_format_option,
    add_scheduler_option,
    bounded_int,
    folder_path,
    where_flag,
)
from sim.scenario.limits import MAX_WORKERS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``traces`` command and its ``import`` and ``summary`` subcommands."""
    parser = subparsers.add_parser(
        "traces", help="import agent runs (tau2, mini-swe-agent, OpenTelemetry, Inspect, "
                       "sim) into one trace folder; summarise one",
        description="Trace folders hold runs.parquet (one row per run) and calls.parquet "
                    "(one row per model call); see the README's Traces section.")
    sub = parser.add_subparsers(dest="traces_command", required=True, metavar="SUBCOMMAND")

    imp = sub.add_parser(
        "import", help="import files and folders of any mix of formats into a trace folder",
        description="Import SOURCE files and folders (formats told apart by content) into "
                    "the trace folder --out, written atomically. What cannot be used is "
                    "skipped and counted by reason on stderr and in import.json.")
    imp.add_argument("sources", nargs="+", metavar="SOURCE", help="a file or folder")
    imp.add_argument("--out", required=True, metavar="DIR", type=folder_path,
                     help="the trace folder to write")
    imp.add_argument("--strict", action="store_true",
                     help="any skipped file or run is an error (exit 2, nothing written)")
    imp.add_argument("--force", action="store_true",
                     help="replace DIR if it exists and is not empty")
    add_format_option(imp, "stdout: a line per figure (default) or the import report as JSON")
    imp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    imp.add_argument("--workers", type=bounded_int(1, MAX_WORKERS), default=1, metavar="N",
                     help="processes reading files (default 1); the folder written is the "
                          "same for any number")
    add_scheduler_option(imp, "files are read")
    where_flag(imp, "import")
    imp.set_defaults(handler=run_import)

    summary = sub.add_parser(
        "summary", help="the figures of a trace folder",
        description="Runs and calls, steps p50/p95/max, the per-run fit of prompt(n) = "
                    "P + h*n, output tokens per call, cache shares, the exit mix, the "
                    "resolved share and recorded cost against catalogue prices (calls of "
                    "unknown usage left out); first, a warning per source whose figures "
                    "are estimated or unknown for over 1% of its calls; last, what looks "
                    "wrong in the data, with the calls concerned and how to fix it.")
    summary.add_argument("folder", metavar="DIR", type=folder_path, help="a trace folder")
    add_format_option(summary, "stdout: text (default) or JSON")
    where_flag(summary, "summarise")
    summary.set_defaults(handler=run_summary)


def run_import(args: argparse.Namespace) -> int:
    """Import the sources (:func:`sim.api.importing.write_trace_folder`); the
    report goes to stderr (and stdout with --format json)."""
    from sim.api.importing import write_trace_folder

    written = write_trace_folder(args.sources, args.out, strict=args.strict, force=args.force,
                                 progress=not args.quiet, where=args.where,
                                 workers=args.workers, scheduler=args.scheduler)
    for line in written.notes():
        print(line, file=sys.stderr)
    if args.format == "json":
        json.dump(written.report.to_dict(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(written.text())
    return 0


def run_summary(args: argparse.Namespace) -> int:
    """Print the summary of a trace folder."""
    from sim.api.importing import summary_text, trace_summary

    summary = trace_summary(args.folder, where=args.where)
    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(summary_text(summary))
    return 0
