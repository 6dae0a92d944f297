"""Options and output shared by the simulating commands (run, sweep)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sim.errors import InputError

if TYPE_CHECKING:  # heavy modules are imported when a command runs, not when it registers
    from sim.runner import CellRun
    from sim.scenario.model import Scenario


def add_simulation_options(parser: argparse.ArgumentParser) -> None:
    """SCENARIO, --tasks, --seed, --out, --format, --workers, --set, --quiet, --traces."""
    parser.add_argument("scenario", help="scenario YAML file")
    parser.add_argument("--tasks", type=int, help="tasks per cell (default: the scenario's)")
    parser.add_argument("--seed", type=int, help="root seed (default: the scenario's)")
    parser.add_argument("--out", help="results folder (default: reports/<scenario name>)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: tables (default) or the summary as JSON")
    parser.add_argument("--workers", type=int, help="processes (default: all cores); "
                                                    "results are identical for any number")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a field, e.g. "
                                                   "harness.budgets.steps=30 (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--traces", action="store_true",
                        help="also write runs.parquet and calls.parquet: every simulated run "
                             "and model call in the trace model (see 'traces summary')")
    parser.add_argument("--cost-ceiling", type=float, metavar="USD",
                        help="report.html: ring the most successful cell whose mean (and "
                             "the one whose p95) cost per task is under USD")


def load(args: argparse.Namespace) -> Scenario:
    """The scenario with --set, --tasks and --seed applied, validated."""
    overrides = list(args.overrides)
    for flag, value in (("tasks", args.tasks), ("seed", args.seed)):
        if value is not None:
            if value < (1 if flag == "tasks" else 0):
                raise InputError(f"--{flag} must be {'>= 1' if flag == 'tasks' else '>= 0'}, "
                                 f"got {value}")
            overrides.append(f"{flag}={value}")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    from sim.scenario.model import load_scenario

    return load_scenario(args.scenario, overrides)


def simulate_and_report(args: argparse.Namespace, scenario: Scenario, runs: list[CellRun]
                        ) -> int:
    """Run the cells, write the results folder, print tables or JSON."""
    from sim.output.results import format_table, timeseries_frame, write_results
    from sim.runner import run_sweep

    out = Path(args.out) if args.out else Path("reports") / scenario.name
    traces = str(args.scenario) if args.traces else None
    result = run_sweep(runs, scenario.tasks, workers=args.workers, progress=not args.quiet,
                       traces=traces)
    summary = write_results(
        out, result.records, {r.name: r.params() for r in runs},
        title=f"Results: {scenario.name}",
        extras_by_cell={name: {"capacity": c} for name, c in result.capacity.items()},
        timeseries=timeseries_frame(result.series) if result.series else None,
        seed=scenario.seed, description=scenario.description)
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    write_sweep_html(out, summary, result.records, title=f"Results: {scenario.name}",
                     ceiling=args.cost_ceiling)
    _write_traces(out, result.traces if traces is not None else None)
    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        for cell in summary["cells"]:
            print(format_table(cell))
            print()
        files = "results.parquet, summary.json, report.md, report.html" + (
            ", timeseries.parquet" if result.series else "") + (
            ", runs.parquet, calls.parquet" if traces is not None else "")
        print(f"results in {out}/ ({files})")
    return 0


def _write_traces(out: Path, traces: dict[str, list] | None) -> None:
    """Write the runs in the trace model beside the results (cells in order,
    tasks by index); without traces, remove any left by an earlier run so the
    folder never pairs these results with another run's traces."""
    from sim.traces.model import CALLS_FILE, RUNS_FILE

    if traces is None:
        for name in (RUNS_FILE, CALLS_FILE):
            (out / name).unlink(missing_ok=True)
        return
    from sim.traces.writer import write_runs

    write_runs(out, [run for runs in traces.values() for run in runs])
