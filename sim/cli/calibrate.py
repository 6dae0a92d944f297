"""``python -m sim calibrate TRACES_DIR --out scenario.yaml``: fit a world to a
folder of traces and say how well it fits, measured on held-out runs.

Writes the scenario (commented: what was fitted from what) to ``--out`` and
``calibration.json``, ``calibration.md`` and ``calibration.html`` to
``--report`` (default: a folder ``<scenario name>_calibration`` beside the
scenario). Exit status 0 when every KS distance is under its 5% critical value,
1 when some fit is rejected (the report says which and why), 2 on bad input.
The method is described in :mod:`sim.calibrate`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sim.errors import InputError

_DESCRIPTION = (
    "Fit a scenario to a trace folder (runs.parquet + calls.parquet, see 'traces import'): "
    "direct estimates per task class, a simulate-and-compare search, then a fresh simulation "
    "measured against held-out runs (KS distances with 5% critical values, medians and p95s, "
    "exit-mix distance, bootstrap intervals). Exit status: 0 every KS under its critical "
    "value, 1 some fit rejected, 2 bad input.")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` command."""
    parser = subparsers.add_parser("calibrate", help="fit a scenario to recorded runs",
                                   description=_DESCRIPTION)
    parser.add_argument("traces", help="trace folder (runs.parquet and calls.parquet)")
    parser.add_argument("--out", required=True, help="the scenario YAML to write")
    parser.add_argument("--report", help="report folder (default: <out stem>_calibration "
                                         "beside --out)")
    parser.add_argument("--holdout-fraction", type=float, default=0.3, metavar="F",
                        help="share of runs held out to measure the fit (default 0.3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, the search "
                                                           "and the simulations (default 0)")
    parser.add_argument("--classes", default="auto", metavar="K|auto",
                        help="task classes: K clusters of run features, or auto (by BIC; "
                             "the default)")
    parser.add_argument("--by", choices=("model",),
                        help="one task class per model instead of clusters")
    parser.add_argument("--name", help="scenario name (default: the --out file's stem)")
    parser.add_argument("--evaluations", type=int, default=45, metavar="N",
                        help="simulations the search may make (default 45; 0: direct "
                             "estimates only)")
    parser.add_argument("--search-runs", type=int, metavar="N",
                        help="simulated runs per search simulation (default: 4 x the fitted "
                             "runs, at least 1,000)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: a table (default) or calibration.json")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.set_defaults(handler=run)


def _classes(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        k = int(text)
    except ValueError:
        raise InputError(f"--classes must be a positive integer or auto, got {text!r}") from None
    if k < 1:
        raise InputError(f"--classes must be a positive integer or auto, got {k}")
    return k


def run(args: argparse.Namespace) -> int:
    """Calibrate, write the scenario and the report, print the verdict."""
    from sim.calibrate.pipeline import calibrate
    from sim.calibrate.report import write_report, write_scenario

    classes = _classes(args.classes)
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    if args.evaluations < 0:
        raise InputError(f"--evaluations must be >= 0, got {args.evaluations}")
    if args.search_runs is not None and args.search_runs < 10:
        raise InputError(f"--search-runs must be >= 10, got {args.search_runs}")
    out = Path(args.out)
    if out.suffix not in (".yaml", ".yml"):
        raise InputError("--out must name a .yaml file", source=str(out))
    report = Path(args.report) if args.report else out.with_name(f"{out.stem}_calibration")
    result = calibrate(args.traces, holdout=args.holdout_fraction, seed=args.seed,
                       classes=classes, by=args.by, name=args.name or out.stem,
                       evaluations=args.evaluations, search_runs=args.search_runs,
                       progress=not args.quiet)
    write_scenario(out, result.yaml_text())
    write_report(report, result)
    if args.format == "json":
        json.dump(result.summary(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return result.status
    print(f"{'metric (held out vs simulated)':<32} {'KS':>6} {'critical':>9}")
    for m in result.metrics:
        print(f"{m.label:<32} {m.ks:>6.3f} {m.critical:>9.3f}"
              + ("  rejected" if m.rejected else ""))
    print(f"{'exit mix (total variation)':<32} {result.exits.tv:>6.3f} "
          f"{result.exits.critical:>9.3f}" + ("  rejected" if result.exits.rejected else ""))
    rejected = [m.label for m in result.rejected] + (
        ["exit mix"] if result.exits.rejected else [])
    verdict = "rejected: " + "; ".join(rejected) if rejected else "accepted"
    print(f"fit {verdict}")
    print(f"scenario {out}; report in {report}/ (calibration.json, calibration.md, "
          f"calibration.html)")
    return result.status
