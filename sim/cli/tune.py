"""``python -m sim tune TRACES``: which limits to set, chosen from recorded runs.

Each knob alone, then jointly around the best; candidates that only tighten
the harness in force are replayed on the recorded runs (exact), others are
forecast by the world calibrated to the same traces (see
:mod:`sim.tuning`). Writes ``recommended.yaml`` (the harness block),
``frontier.csv``, ``tune.json``, ``report.md`` and ``report.html`` to
``--out``; exit 3 when the traces are too few to tell. Example::

    python -m sim tune traces/tau2 --keep-successes 0.99 --out reports/tune_tau2
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sim.cli.common import folder_path

_DESCRIPTION = (
    "Recommend limits (token, money and step budgets, the no-progress detector) from recorded "
    "runs: the cheapest setting whose 95% upper bound of recorded successes lost stays within "
    "1 - --keep-successes. Tightening settings are replayed exactly on the runs; looser ones and "
    "detector changes are forecast by the world calibrated to the same traces. Exit 3 when the "
    "traces are too few to tell (the runs that would decide are printed).")


_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("traces", {"help": "trace folder (runs.parquet and calls.parquet)"}),
    ("--scenario", {"help": "scenario YAML: its harness is the one in force (default: the "
                            "limits the traces state)"}),
    ("--keep-successes", {"type": float, "default": 0.99, "metavar": "SHARE",
                          "help": "share of recorded successes a setting must keep, judged by "
                                  "the upper end of the 95%% interval of the share lost "
                                  "(default 0.99)"}),
    ("--objective", {"choices": ("cost", "p95-cost", "time"), "default": "cost",
                     "help": "what to minimise per run: mean cost (default), p95 cost, or "
                             "mean active time"}),
    ("--knobs", {"default": "budgets", "help": "comma-separated among tokens, money, steps, "
                                               "detector (default budgets: tokens,money,steps)"}),
    ("--candidates", {"action": "append", "metavar": "KNOB=V,V",
                      "help": "values of your own added to a knob's grid, e.g. --candidates "
                              "tokens=1.2M,1.5M --candidates steps=30,40 (k and M suffixes; "
                              "money in USD)"}),
    ("--where", {"action": "append", "metavar": "COLUMN=VALUE",
                 "help": "tune only the runs where a runs.parquet column (or a tag: "
                         "tags=X, metadata.key=X) has a value (=, !=, >=, <=, >, <; repeat: "
                         "all hold), e.g. --where model=gpt-4o --where "
                         "'started>=2025-01-01'"}),
    ("--pooled", {"action": "store_true",
                  "help": "one answer for all models, even when their runs differ (default: "
                          "each such model is also tuned alone)"}),
    ("--forecast-runs", {"type": int, "default": 2000, "metavar": "N",
                         "help": "simulated tasks per forecast candidate (default 2000)"}),
    ("--seed", {"type": int, "default": 0, "help": "seed of calibration and forecasts"}),
    ("--out", {"type": folder_path,
               "help": "output folder (default reports/tune_<traces name>, or under $SIM_OUT)"}),
    ("--force", {"action": "store_true",
                 "help": "replace an --out holding another tune's outputs"}),
    ("--format", {"choices": ("table", "json"), "default": "table",
                  "help": "stdout: the recommendation and frontier (default) or tune.json"}),
    ("--quiet", {"action": "store_true", "help": "no progress on stderr"}),
)
"""The command's arguments, in the order ``--help`` lists them."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tune`` command."""
    parser = subparsers.add_parser("tune", help="recommend limits from recorded runs",
                                   description=_DESCRIPTION)
    for name, options in _OPTIONS:
        parser.add_argument(name, **options)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Tune and write the outputs (:func:`sim.api.tune`), print; 0, or 3 for thin evidence."""
    from sim.api.tuning import tune, tuned_summary, tuned_text

    tuned = tune(args.traces, out=args.out, scenario=args.scenario,
                 keep_successes=args.keep_successes, objective=args.objective, knobs=args.knobs,
                 forecast_runs=args.forecast_runs, seed=args.seed, progress=not args.quiet,
                 force=args.force, where=args.where, candidates=args.candidates,
                 by_model=not args.pooled)
    if args.format == "json":
        json.dump(tuned_summary(tuned), sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        print(tuned_text(tuned))
    return tuned.status
