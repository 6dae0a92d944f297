"""Options and output shared by the commands: the simulating commands' (run, sweep,
capacity), the flags several commands take alike (--format, --scheduler, --where),
and the argument types that hold numbers and paths to their bounds.

Each argument type is an ``argparse`` ``type=``: a value out of bounds is argparse's
usage error (``error: argument --resamples: ...``, exit status 2) before anything
runs. NaN and infinities are never numbers a flag takes.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.bad_input import InputError
from sim.output.safe_text import printable

if TYPE_CHECKING:  # heavy modules are imported when a command runs, not when it registers
    from sim.scenario.model import Scenario

log = logging.getLogger(__name__)

OUT_HELP = ("results folder (default: reports/<scenario name>[-<command>][-<overrides>]: "
            "bounded for 'sweep bounded', bounded-run for 'run bounded', "
            "bounded-run-tasks=100 with --tasks 100; under $SIM_OUT or "
            "[tool.sim] out in pyproject.toml if set); checked before anything runs, "
            "written whole (a temporary folder swapped in), and never holding another run's "
            "results unless --force")


# ------------------------------------------------------------ argument types

def finite_float(*, low: float | None = None, high: float | None = None,
                 low_open: bool = False, unit: str = "") -> Callable[[str], float]:
    """A type parsing a finite float in ``[low, high]`` (``(low, high]`` when
    ``low_open``); ``unit`` is named in the message."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {_range(low, high, low_open)}"
                                             f"{unit}, got {text}")
        return value
    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A type parsing an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, "
                                             f"got {text}")
        return value
    return parse


def folder_path(text: str) -> str:
    """A type for an output path: not empty (an empty ``--out`` would silently
    fall back to the default folder), no NUL character, no name or path too
    long for the file system (:func:`sim.user_paths.path_problem`)."""
    from sim.user_paths import path_problem

    if not text.strip():
        raise argparse.ArgumentTypeError("must name a path, got an empty one")
    problem = path_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _range(low: float | None, high: float | None, low_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}]"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    return f"<= {high:g}"


# ------------------------------------------------------------------ options

def add_simulation_options(parser: argparse.ArgumentParser) -> None:
    """SCENARIO, --tasks, --seed, --out, --force, --format, --workers, --set,
    --allow-plugins, --quiet, --traces, --cost-ceiling."""
    from sim.scenario.limits import MAX_TASKS, MAX_WORKERS

    parser.add_argument("scenario", help="scenario YAML file, or a scenario's name "
                                         "('sim scenarios' lists them)")
    parser.add_argument("--tasks", type=int, help=f"tasks per cell, 1 to {MAX_TASKS:,} "
                                                  "(default: the scenario's)")
    parser.add_argument("--seed", type=int, help="root seed (default: the scenario's)")
    parser.add_argument("--out", type=folder_path, help=OUT_HELP)
    parser.add_argument("--force", action="store_true",
                        help="replace a results folder that holds another run's results")
    add_format_option(parser, "stdout: tables (default) or the summary as JSON")
    parser.add_argument("--workers", type=int,
                        help=f"processes, 1 to {MAX_WORKERS} (default: all cores); results "
                             "are identical for any number")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a field, e.g. "
                                                   "harness.budgets.steps=30 (repeatable)")
    add_plugin_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--traces", action="store_true",
                        help="also write runs.parquet and calls.parquet: every simulated run "
                             "and model call in the trace model (see 'traces summary')")
    parser.add_argument("--cost-ceiling", type=finite_float(low=0.0, low_open=True, unit=" USD"),
                        metavar="USD",
                        help="report.html: ring the most successful cell whose mean (and "
                             "the one whose p95) cost per task is under USD")


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """--resume and --scheduler (the commands that run a sweep in chunks)."""
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run of the same command (Ctrl-C, a kill, "
                             "a lost worker): only the chunks it did not finish run, and the "
                             "results are the bytes of an uninterrupted run")
    add_scheduler_option(parser, "chunks run", " (see README)")


def add_format_option(parser: argparse.ArgumentParser, help: str) -> None:
    """--format: ``table`` (the default) or ``json`` on stdout, as ``help`` says."""
    parser.add_argument("--format", choices=("table", "json"), default="table", help=help)


def add_scheduler_option(parser: argparse.ArgumentParser, runs: str, tail: str = "") -> None:
    """--scheduler: where the command's work ``runs`` (``"chunks run"``), ``tail``
    ending the help."""
    parser.add_argument("--scheduler", metavar="WHERE",
                        help=f"where {runs}: local (default: --workers processes here), "
                             "dask (a Dask LocalCluster of --workers processes) or the address "
                             f"of a running Dask scheduler, tcp://HOST:PORT{tail}")


def where_flag(parser: argparse.ArgumentParser, verb: str) -> None:
    """Add ``--where`` (:mod:`sim.traces.where`) to ``parser``: ``verb`` only the runs..."""
    parser.add_argument(
        "--where", action="append", metavar="COLUMN=VALUE",
        help=f"{verb} only the runs where a runs.parquet column (or a tag: tags=X, "
             "metadata.key=X) has a value (=, !=, >=, <=, >, <; repeat: all hold), e.g. "
             "--where model=gpt-4o --where 'started>=2025-01-01'")


def add_simulation_command(subparsers: argparse._SubParsersAction, name: str, *, help: str,
                           description: str) -> argparse.ArgumentParser:
    """Add a command that simulates a scenario's cells in chunks (``run``,
    ``sweep``): the simulation options and the sweep options; returns its parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help,
                                                            description=description)
    add_simulation_options(parser)
    add_sweep_options(parser)
    return parser


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """--allow-plugins."""
    parser.add_argument("--allow-plugins", action="store_true",
                        help="let the scenario name a detector or verifier by import path "
                             "(package.module:Class): code that is imported and run; without "
                             "it such a name is refused (exit 2)")


def overrides_of(args: argparse.Namespace) -> list[str]:
    """The overrides as given: every --set, then --tasks and --seed."""
    overrides = list(args.overrides)
    for flag in ("tasks", "seed"):
        value = getattr(args, flag, None)
        if value is not None:
            overrides.append(f"{flag}={value}")
    return overrides


def override_labels(args: argparse.Namespace) -> list[str]:
    """How each override of :func:`overrides_of` is named in a message: the
    flag as typed (``--set path=value``, ``--tasks 5``)."""
    labels = [f"--set {item}" for item in args.overrides]
    for flag in ("tasks", "seed"):
        value = getattr(args, flag, None)
        if value is not None:
            labels.append(f"--{flag} {value}")
    return labels


def check_counts(args: argparse.Namespace) -> None:
    """--tasks at least 1 and --seed at least 0, when given."""
    for flag, value in (("tasks", args.tasks), ("seed", args.seed)):
        if value is not None and value < (1 if flag == "tasks" else 0):
            raise InputError(f"--{flag} must be {'>= 1' if flag == 'tasks' else '>= 0'}, "
                             f"got {value}")


def load(args: argparse.Namespace) -> Scenario:
    """The scenario with --set, --tasks and --seed applied, validated
    (:func:`sim.api.scenarios.load_for_command`)."""
    from sim.api.scenarios import load_for_command
    from sim.scenario.limits import check_workers  # a flag's bounds: parsing

    check_counts(args)
    check_workers(args.workers)
    scenario = load_for_command(args.scenario, overrides_of(args), override_labels(args),
                                allow_plugins=args.allow_plugins)
    log.info("scenario %s: %s tasks per cell, seed %s, engine %s, %s sweep axes",
             scenario.name, f"{scenario.tasks:,}", scenario.seed, scenario.engine,
             len(scenario.sweep))
    return scenario


def print_json(data: Any) -> None:
    """``data`` as the only thing on stdout (sorted keys, no NaN)."""
    json.dump(data, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
    sys.stdout.write("\n")


def simulate_and_report(args: argparse.Namespace, scenario: Scenario, command: str) -> int:
    """Run the cells of ``command`` (``run``: the base cell; ``sweep``: the
    grid) and write their results folder (:func:`sim.api.simulating.write_cells`),
    then print the tables or the summary as JSON."""
    from sim.api.simulating import results_tables, write_cells

    written = write_cells(scenario, command, args.out, overrides=overrides_of(args),
                          force=args.force, workers=args.workers, scheduler=args.scheduler,
                          resume=args.resume, progress=not args.quiet,
                          traces=str(args.scenario) if args.traces else None,
                          cost_ceiling=args.cost_ceiling, otel=getattr(args, "otel", None))
    if args.format == "json":
        print_json(written.summary)
        if not args.quiet:  # stdout is the JSON alone
            print(f"results in {printable(written.out)}/", file=sys.stderr)
    else:
        print(results_tables(written))
    if written.spans is not None and not args.quiet:
        print(f"spans of {written.spans} runs in {args.otel}", file=sys.stderr)
    return 0
