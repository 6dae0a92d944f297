"""Options and output shared by the simulating commands (run, sweep, capacity)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.bad_input import InputError
from sim.cli.flags import finite_float, folder_path
from sim.output.safe_text import printable

if TYPE_CHECKING:  # heavy modules are imported when a command runs, not when it registers
    from sim.scenario.model import Scenario
    from sim.sweeps.cells import CellRun

log = logging.getLogger(__name__)

OUT_HELP = ("results folder (default: reports/<scenario name>[-<command>][-<overrides>]: "
            "bounded for 'sweep bounded', bounded-run for 'run bounded', "
            "bounded-run-tasks=100 with --tasks 100; under $SIM_OUT or "
            "[tool.sim] out in pyproject.toml if set); checked before anything runs, "
            "written whole (a temporary folder swapped in), and never holding another run's "
            "results unless --force")


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
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: tables (default) or the summary as JSON")
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
    parser.add_argument("--scheduler", metavar="WHERE",
                        help="where chunks run: local (default: --workers processes here), "
                             "dask (a Dask LocalCluster of --workers processes) or the address "
                             "of a running Dask scheduler, tcp://HOST:PORT (see README)")


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


def load(args: argparse.Namespace) -> Scenario:
    """The scenario with --set, --tasks and --seed applied, validated."""
    from sim.scenario.limits import check_workers

    for flag, value in (("tasks", args.tasks), ("seed", args.seed)):
        if value is not None and value < (1 if flag == "tasks" else 0):
            raise InputError(f"--{flag} must be {'>= 1' if flag == 'tasks' else '>= 0'}, "
                             f"got {value}")
    check_workers(args.workers)
    from sim.scenario.model import load_scenario

    scenario = load_scenario(args.scenario, overrides_of(args),
                             allow_plugins=args.allow_plugins, labels=override_labels(args))
    log.info("scenario %s: %s tasks per cell, seed %s, engine %s, %s sweep axes",
             scenario.name, f"{scenario.tasks:,}", scenario.seed, scenario.engine,
             len(scenario.sweep))
    return scenario


def default_out(args: argparse.Namespace, name: str, command: str | None = None) -> Path:
    """--out, or <root>/<folder> where the root is $SIM_OUT, else ``out`` of
    ``[tool.sim]`` in the nearest pyproject.toml, else ``reports``. The
    folder is ``name``; with ``command``, the run's own folder
    (:func:`sim.output.folder.run_folder_name` of ``name``, ``command`` and
    the overrides: ``bounded`` for a plain sweep, ``bounded-run``,
    ``bounded-harness.budgets.steps=30``...)."""
    from sim.scenario.project import out_root

    if args.out:
        return Path(args.out)
    if command is None:
        return out_root() / name
    from sim.output.folder import run_folder_name

    return out_root() / run_folder_name(name, command, overrides_of(args))


@contextlib.contextmanager
def secondary_output(target: str | os.PathLike, flag: str, kept: str) -> Iterator[None]:
    """Writing a secondary output (``--otel``, ``--junit``, ``--summary-md``)
    after the main results are written: any OSError inside (a full or
    read-only disk, a folder made at the target meanwhile) becomes an
    InputError (exit status 2) naming ``flag`` and its target, what went
    wrong and ``kept`` (where the main results are), never a traceback."""
    from sim.output.folder import WriteFailed, describe_write_error

    try:
        yield
    except WriteFailed as failed:
        raise InputError(f"{flag} {target}: cannot write it ({failed.reason}); {kept}"
                         ) from None
    except OSError as error:
        raise InputError(f"{flag} {target}: cannot write it ({describe_write_error(error)}); "
                         f"{kept}") from None


def print_json(data: Any) -> None:
    """``data`` as the only thing on stdout (sorted keys, no NaN)."""
    json.dump(data, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
    sys.stdout.write("\n")


def _cell_changes(scenario: Scenario, runs: list[CellRun]) -> dict[str, list[dict[str, str]]]:
    """Each cell of a sweep (more than one cell): the settings it changes from
    the scenario's own (:func:`sim.scenario.diff.setting_changes`), each
    ``{"path", "base", "value"}`` (values as a user reads them); empty for
    one cell. Written into each cell of summary.json (``changes``), its
    report section and its terminal table."""
    from sim.scenario.diff import setting_changes

    if len(runs) < 2:
        return {}
    base = scenario.model_copy(update={"sweep": {}}).model_dump(mode="json")
    return {run.name: [{"path": c.path, "base": c.base, "value": c.candidate}
                       for c in setting_changes(base, run.scenario.model_dump(mode="json"))]
            for run in runs}


def changes_line(changes: list[dict[str, str]]) -> str:
    """``changed from the base: PATH: base -> value; ...`` (``nothing``)."""
    return "changed from the base: " + ("; ".join(
        f"{c['path']}: {c['base']} -> {c['value']}" for c in changes) if changes else "nothing")


def simulate_and_report(args: argparse.Namespace, scenario: Scenario, runs: list[CellRun],
                        command: str) -> int:
    """Check --out, run the cells, write the results folder whole, print
    tables or JSON. The sweep runs in chunks (see :mod:`sim.sweeps.chunks`): records
    (and with --traces every run's calls) stream to Parquet as chunks finish,
    finished chunks are kept for --resume, and --scheduler picks where they run."""
    from sim.output import folder
    from sim.output.provenance import run_provenance

    out = default_out(args, scenario.name, command)
    provenance = run_provenance(scenario, command=command, overrides=overrides_of(args))
    folder.prepare(out, provenance, force=args.force)
    log.info("%d cell(s) into %s", len(runs), out)
    changed = _cell_changes(scenario, runs)
    summary, series = _simulate_in_chunks(args, scenario, runs, out, provenance, changed)
    if args.format == "json":
        print_json(summary)
        if not args.quiet:  # stdout is the JSON alone
            print(f"results in {printable(out)}/", file=sys.stderr)
    else:
        from sim.output.results import format_comparison, format_table

        for cell in summary["cells"]:
            print(format_table(cell))
            if cell["name"] in changed:
                print(f"  {printable(changes_line(changed[cell['name']]), newlines=False)}")
            print()
        if len(summary["cells"]) > 1:  # the answer of a sweep: its cells side by side
            print(format_comparison(summary["cells"]))
            print()
        files = "results.parquet, summary.json, report.md, report.html" + (
            ", timeseries.parquet" if series else "") + (
            ", runs.parquet, calls.parquet" if args.traces else "")
        print(f"results in {printable(out)}/ ({files})")
    return 0


EXIT_INTERRUPTED = 130
"""Exit status of a sweep stopped by Ctrl-C (128 + SIGINT, as shells report it)."""
EXIT_LOST_WORKER = 75
"""Exit status of a sweep stopped by a lost worker (EX_TEMPFAIL: run it again with --resume)."""


class SweepStopped(Exception):
    """The sweep stopped early; ``status`` is the exit status to return."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _extras(capacity: dict[str, Any], changed: dict[str, list[dict[str, str]]]
            ) -> dict[str, dict[str, Any]]:
    """What each cell's summary adds: its ``capacity`` (DES cells) and the
    settings it ``changes`` from the base (a sweep of several cells)."""
    out: dict[str, dict[str, Any]] = {}
    for name, c in capacity.items():
        out.setdefault(name, {})["capacity"] = c
    for name, changes in changed.items():
        out.setdefault(name, {})["changes"] = changes
    return out


def _simulate_in_chunks(args: argparse.Namespace, scenario: Scenario, runs: list[CellRun],
                        out: Path, provenance: dict[str, Any],
                        changed: dict[str, list[dict[str, str]]] | None = None
                        ) -> tuple[dict[str, Any], bool]:
    from sim.output import folder
    from sim.output.results import parquet_metadata, timeseries_frame, write_streamed_results
    from sim.sweeps.cells import default_workers
    from sim.sweeps.chunks import Interrupted, run_to_file
    from sim.sweeps.schedulers import make_scheduler

    workers = args.workers or default_workers()
    try:
        with make_scheduler(args.scheduler, workers) as scheduler:
            streamed = run_to_file(runs, scenario.tasks, out, scheduler, resume=args.resume,
                                   progress=not args.quiet,
                                   metadata=parquet_metadata(provenance),
                                   traces=str(args.scenario) if args.traces else None)
    except Interrupted as stopped:
        status = EXIT_INTERRUPTED if stopped.why == "interrupted" else EXIT_LOST_WORKER
        raise SweepStopped(f"{stopped}; no results were written to {out}", status) from None
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    try:
        with folder.replace(out) as staging:
            summary, rows = write_streamed_results(
                staging, streamed.path, streamed.cells, {r.name: r.params() for r in runs},
                title=f"Results: {scenario.name}",
                extras_by_cell=_extras(streamed.capacity, changed or {}),
                timeseries=timeseries_frame(streamed.series) if streamed.series else None,
                seed=scenario.seed, description=scenario.description, provenance=provenance)
            write_sweep_html(staging, summary, rows, title=f"Results: {scenario.name}",
                             ceiling=args.cost_ceiling)
            for name, path in streamed.traces.items():  # runs.parquet, calls.parquet
                os.replace(path, staging / name)
    except KeyboardInterrupt:  # every chunk is kept: --resume only writes the folder
        raise SweepStopped(f"interrupted while writing {out}; the previous results are "
                           f"intact and the finished chunks kept in {streamed.store.folder}: "
                           f"run the same command with --resume", EXIT_INTERRUPTED) from None
    except BaseException:  # the folder is as it was; nothing is left beside it
        streamed.store.remove()
        raise
    streamed.store.remove()
    return summary, bool(streamed.series)
