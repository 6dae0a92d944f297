"""Command line: ``python -m sim <command> ...`` (or ``sim <command> ...``
once installed).

Each command lives in its own module under :mod:`sim.cli` with a
``register(subparsers)`` function that adds its parser and sets ``handler``.

Exit status of every command: 0 done (for ``compare``: no regression), 1 a
regression, 2 bad input (one ``error: ...`` message on stderr naming the file
and field, never a traceback; argparse's usage errors too), 3 inconclusive
(``compare`` without the tasks to decide); ``run`` and ``sweep`` stopped early
keep their finished chunks for ``--resume``: 75 a lost worker, 130 Ctrl-C.
No command gives help and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from sim.cli.common import SweepStopped
from sim.errors import InputError

COMMANDS = ("run", "sweep", "cost", "compare", "capacity", "traces", "replay", "live",
            "calibrate", "tune")

EXIT_STATUS = ("Exit status: 0 done (compare: no regression), 1 a regression, 2 bad input, "
               "3 inconclusive (compare: not enough tasks to decide either way), 75 a lost "
               "worker and 130 Ctrl-C (run, sweep: --resume continues). Results "
               "folders hold results.parquet, summary.json, report.md and report.html (a "
               "self-contained page with the figures); see README.md.")


def program_name(argv0: str | None = None) -> str:
    """``sim`` when run as the installed script, ``python -m sim`` otherwise."""
    name = os.path.basename(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else ""))
    return "sim" if name == "sim" else "python -m sim"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every command registered."""
    from sim.output.provenance import sim_version

    parser = argparse.ArgumentParser(
        prog=prog or program_name(),
        description="Simulate LLM agent harnesses: outcomes, cost and capacity.",
        epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {sim_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"sim.cli.{name}").register(sub)
    for command in sub.choices.values():
        command.epilog = command.epilog or EXIT_STATUS
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version (0) and usage errors (2)
        return int(done.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SweepStopped as stopped:
        print(f"stopped: {stopped}", file=sys.stderr)
        return stopped.status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
