"""``python -m sim calibrate TRACES_DIR --out scenario.yaml``: fit a world to a
folder of traces and say how well it fits, measured on held-out runs.

Writes the scenario (commented: what was fitted from what) to ``--out`` and
``calibration.json``, ``calibration.md`` and ``calibration.html`` to
``--report`` (default: a folder ``<scenario name>_calibration`` beside the
scenario). The fit is judged by k-fold cross-validation (``--folds``, default
5): one verdict over the per-run metrics and the exit mix (family-wise adjusted),
a forecast-vs-replay ladder of budgets, and the task-class structure chosen by
cross-validated loss unless ``--classes`` or ``--by`` forces one. Exit status
0 when the verdict accepts the fit, 1 when it rejects it (the report says which
and why), 2 on bad input. The method is described in :mod:`sim.calibration`.
"""

from __future__ import annotations

import argparse
import json
import sys

from sim.bad_input import InputError
from sim.calibration.sample import PER_MODEL
from sim.cli.common import add_format_option, add_scheduler_option, folder_path, where_flag

_DESCRIPTION = (
    "Fit a scenario to a trace folder (runs.parquet + calls.parquet, see 'traces import'): "
    "direct estimates per task class and a simulate-and-compare search, judged by k-fold "
    "cross-validation: every run held out once against the world fitted on the other folds "
    "(KS distances and the exit mix under one family-wise verdict whose critical values "
    "come from null replicates of the fitted world and count the fit's own error; a "
    "ladder of budgets, forecast against replay). The task-class structure is chosen by "
    "cross-validated loss unless --classes or --by forces one. Exit status: 0 fit "
    "accepted, 1 fit rejected, 2 bad input.")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` command."""
    parser = subparsers.add_parser("calibrate", help="fit a scenario to recorded runs",
                                   description=_DESCRIPTION)
    parser.add_argument("traces", help="trace folder (runs.parquet and calls.parquet)")
    parser.add_argument("--out", required=True, type=folder_path,
                        help="the scenario YAML to write")
    parser.add_argument("--report", type=folder_path,
                        help="report folder (default: <out stem>_calibration beside --out)")
    parser.add_argument("--folds", type=int, default=5, metavar="K",
                        help="cross-validation folds: each run is held out once while a world "
                             "is fitted on the others (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds, the search "
                                                           "and the simulations (default 0)")
    parser.add_argument("--classes", default=None, metavar="K|auto",
                        help="force the task classes: K clusters of run features, or auto "
                             "(clusters by BIC); default: one class, one per model or "
                             "clusters, whichever has the lowest cross-validated loss")
    parser.add_argument("--by", choices=("model",),
                        help="force one task class per model")
    parser.add_argument("--name", help="scenario name (default: the --out file's stem)")
    parser.add_argument("--evaluations", type=int, default=45, metavar="N",
                        help="simulations the search may make (default 45; 0: direct "
                             "estimates only)")
    parser.add_argument("--search-runs", type=int, metavar="N",
                        help="simulated runs per search simulation (default: 4 x the fitted "
                             "runs, at least 1,000)")
    parser.add_argument("--sample", type=int, default=PER_MODEL, metavar="N",
                        help="runs per model the cross-validation (folds, their fits and "
                             "held-out comparisons), the search and the clusters use: a "
                             "stratified sample of N per model (model x exit kept); the "
                             "scenario's direct estimates still read every run (default "
                             f"{PER_MODEL:,}; 0: every run; traces with no more than N runs "
                             "per model are unaffected)")
    parser.add_argument("--workers", type=int,
                        help="processes for the folds, candidates and ladder (default: all "
                             "cores); results are identical for any number")
    add_scheduler_option(parser, "the jobs run", " (its workers must read the trace folder)")
    parser.add_argument("--no-ladder", action="store_true",
                        help="skip the forecast-vs-replay ladder of budgets")
    add_format_option(parser, "stdout: a table (default) or calibration.json")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    where_flag(parser, "calibrate on")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Calibrate (:func:`sim.api.calibrating.calibrate_checked`), write the
    scenario and the report, print the verdict."""
    from sim.api.calibrating import calibrate_checked, calibrated_text

    _check_scale(args)
    fit = calibrate_checked(args.traces, args.out, report=args.report, name=args.name,
                            folds=args.folds, seed=args.seed, classes=args.classes,
                            by=args.by, evaluations=args.evaluations,
                            search_runs=args.search_runs, ladder=not args.no_ladder,
                            progress=not args.quiet, sample=args.sample or None,
                            workers=args.workers, scheduler=args.scheduler, where=args.where)
    if args.format == "json":
        json.dump(fit.result.summary(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return fit.result.status
    print(calibrated_text(fit))
    return fit.result.status


def _check_scale(args: argparse.Namespace) -> None:
    """The options of scale (sample, workers, scheduler) checked; an
    InputError naming the first that is wrong (sim.calibrate checks the rest)."""
    from sim.scenario.limits import check_workers

    if args.sample < 0:
        raise InputError(f"--sample must be >= 0 (0: every run), got {args.sample}")
    check_workers(args.workers)
    if args.scheduler not in (None, "local", "dask") and "://" not in args.scheduler:
        raise InputError(f"unknown scheduler {args.scheduler!r}: expected 'local', 'dask' or a "
                         f"Dask scheduler address such as tcp://10.0.0.5:8786",
                         path="--scheduler")
