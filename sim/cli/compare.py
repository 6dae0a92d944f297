"""``python -m sim compare BASE CANDIDATE``: did a harness change move outcomes
or cost? Exit status (CI-ready): 0 no regression (every check shown within
its limit), 1 a regression, 2 bad input, 3 inconclusive (too few tasks to tell;
the message says how many would decide it).

Each side is a scenario file (simulated here, both on the same task streams
unless their seeds differ) or a results folder of ``sweep``/``run``. The
statistics and the verdict are described in :mod:`sim.analysis.compare`; the report
folder (``report.md``, ``report.html``, ``comparison.json``, ``figures/``) in
:mod:`sim.output.html`. Example, seed 001's "Try it" 2 (stop on the first
detection instead of nudging)::

    python -m sim compare scenarios/bounded.yaml scenarios/bounded_stop_first.yaml

``--junit FILE`` writes one JUnit test case per check and ``--summary-md
FILE`` a Markdown summary for a CI step summary (:mod:`sim.output.ci`).
"""

from __future__ import annotations

import argparse

from sim.cli.common import (
    add_format_option,
    add_plugin_option,
    bounded_int,
    check_counts,
    finite_float,
    folder_path,
    print_json,
)

_DESCRIPTION = (
    "Compare a candidate harness setting with a base, cell by cell: outcome shares with "
    "intervals and tests (paired when both sides ran the same task streams), steps, tokens "
    "and cost with bootstrap intervals, and a verdict. 'No regression' needs evidence: every "
    "check's 95% interval inside its limit. Exit status: 0 no regression, 1 a regression, "
    "2 bad input, 3 inconclusive (the verdict says how many tasks would decide it). Writes "
    "report.md, report.html (figures embedded), comparison.json and figures/ to --out.")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` command."""
    from sim.scenario.limits import MAX_RESAMPLES

    parser = subparsers.add_parser(
        "compare", help="compare two harness settings; exit 0 no regression, 1 regression, "
                        "3 inconclusive",
        description=_DESCRIPTION)
    parser.add_argument("base", help="base: scenario YAML file or results folder")
    parser.add_argument("candidate", help="candidate: scenario YAML file or results folder")
    parser.add_argument("--tasks", type=int, help="tasks per cell for scenario sides "
                                                  "(default: the scenario's, or a results "
                                                  "folder's when comparing with one)")
    parser.add_argument("--seed", type=int, help="root seed of both scenario sides "
                                                 "(default: each scenario's)")
    parser.add_argument("--out", type=folder_path,
                        help="report folder (default: reports/compare_<base>_vs_"
                                      "<candidate>); checked before anything runs, written "
                                      "whole, never holding another comparison unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace a report folder that holds another comparison")
    parser.add_argument("--junit", metavar="FILE", type=folder_path,
                        help="write JUnit XML: one test case per check (a failure for a "
                             "regression, skipped when inconclusive)")
    parser.add_argument("--summary-md", metavar="FILE", type=folder_path,
                        help="append a Markdown summary, verdict first, to FILE (as CI step "
                             "summaries are written: $GITHUB_STEP_SUMMARY)")
    add_format_option(parser, "stdout: tables (default) or the comparison as JSON")
    parser.add_argument("--workers", type=int, help="processes (default: all cores); "
                                                    "results are identical for any number")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a field of both scenario sides "
                                                   "(repeatable)")
    parser.add_argument("--base-set", action="append", default=[], metavar="PATH=VALUE",
                        help="override a field of the base only (repeatable)")
    parser.add_argument("--candidate-set", action="append", default=[], metavar="PATH=VALUE",
                        help="override a field of the candidate only, e.g. seed=8 or "
                             "harness.detector.nudges=0 (repeatable)")
    add_plugin_option(parser)
    parser.add_argument("--save-results", action="store_true",
                        help="also write each scenario side's results folder (results.parquet, "
                             "summary.json, report.md) to OUT/base and OUT/candidate, to "
                             "compare against later")
    limits = parser.add_argument_group("verdict")
    limits.add_argument("--max-share-drop", type=finite_float(low=0.0, high=100.0, unit=" pp"),
                        default=1.0, metavar="PP",
                        help="largest allowed fall of the succeeded share, or rise of a "
                             "failure outcome's share, in percentage points (default 1)")
    limits.add_argument("--max-cost-rise", type=finite_float(low=0.0, high=1e6, unit="%"),
                        default=5.0, metavar="PCT",
                        help="largest allowed rise of mean or p95 cost, in percent "
                             "(default 5)")
    limits.add_argument("--alpha", type=finite_float(low=0.0, high=0.5, low_open=True),
                        default=0.05,
                        help="family-wise significance level of the checks (default 0.05)")
    limits.add_argument("--resamples", type=bounded_int(100, MAX_RESAMPLES), default=2000,
                        help=f"bootstrap resamples, 100 to {MAX_RESAMPLES:,} (default 2000)")
    limits.add_argument("--pairing", choices=("auto", "paired", "unpaired"), default="auto",
                        help="pair tasks by index: auto (when both sides ran the same task "
                             "streams), paired or unpaired")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check the inputs, plan, compare and write the report folder (and the CI
    files: :func:`sim.api.comparing.write_comparison_folder`), print; return
    0, 1 or 3 (see the module docstring)."""
    from sim.scenario.limits import check_workers  # a flag's bounds: parsing

    check_workers(args.workers)
    check_counts(args)
    from sim.api.comparing import compared_text, plan_comparison, write_comparison_folder

    plan = plan_comparison(
        args.base, args.candidate, tasks=args.tasks, seed=args.seed,
        overrides=args.overrides, base_overrides=args.base_set,
        candidate_overrides=args.candidate_set, pairing=args.pairing,
        max_share_drop_pp=args.max_share_drop, max_cost_rise_pct=args.max_cost_rise,
        alpha=args.alpha, resamples=args.resamples, allow_plugins=args.allow_plugins)
    compared = write_comparison_folder(plan, args.out, force=args.force, junit=args.junit,
                                       summary_md=args.summary_md,
                                       save_results=args.save_results, workers=args.workers,
                                       progress=not args.quiet)
    if args.format == "json":
        print_json(compared.as_dict())
    else:
        print(compared_text(compared))
    return compared.result.exit_status
