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
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sim.bad_input import InputError
from sim.cli.common import add_plugin_option, default_out, print_json, secondary_output
from sim.cli.flags import bounded_int, finite_float, folder_path
from sim.output.safe_text import printable

if TYPE_CHECKING:
    from sim.analysis.compare import Comparison, Side

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
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: tables (default) or the comparison as JSON")
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
    """Check the inputs and --out, compare, write the report folder (and the
    CI files), print; return 0, 1 or 3 (see the module docstring)."""
    from sim.scenario.limits import check_workers

    check_workers(args.workers)
    if args.tasks is not None and args.tasks < 1:
        raise InputError(f"--tasks must be >= 1, got {args.tasks}")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    from sim import api
    from sim.output import folder
    from sim.output.html import comparison_dict, write_comparison
    from sim.output.results import write_atomic

    plan = api.plan_comparison(
        args.base, args.candidate, tasks=args.tasks, seed=args.seed,
        overrides=args.overrides, base_overrides=args.base_set,
        candidate_overrides=args.candidate_set, pairing=args.pairing,
        max_share_drop_pp=args.max_share_drop, max_cost_rise_pct=args.max_cost_rise,
        alpha=args.alpha, resamples=args.resamples, allow_plugins=args.allow_plugins)
    provenance = plan.provenance()
    labels = [s.name if s is not None else spec.label
              for spec, s in zip(plan.specs, plan.scenarios, strict=True)]
    out = default_out(args, _default_name(*labels))
    folder.prepare(out, provenance, force=args.force)
    junit = None if args.junit is None else folder.check_file_target(
        args.junit, "--junit", results=(out,))
    summary_md = None if args.summary_md is None else folder.check_file_target(
        args.summary_md, "--summary-md", replaced=False, results=(out,))
    result = api.run_comparison(plan, workers=args.workers, progress=not args.quiet)
    saved = []
    with folder.replace(out) as staging:
        write_comparison(staging, result, provenance=provenance)
        if args.save_results:
            for role, side, scenario in zip(("base", "candidate"),
                                            (result.base, result.candidate), plan.scenarios,
                                            strict=True):
                if scenario is not None:  # a simulated scenario side
                    save_side(staging / role, side, scenario)
                    saved.append(role)
    from sim.output.ci import append_summary, junit_xml, summary_markdown

    kept = f"the comparison's results are in {printable(out)}/ as written"
    if junit is not None:
        with secondary_output(junit, "--junit", kept):
            write_atomic(junit, junit_xml(result))
    if summary_md is not None:
        with secondary_output(summary_md, "--summary-md", kept):
            append_summary(summary_md, summary_markdown(result))
    if args.format == "json":
        print_json(comparison_dict(result, provenance))
    else:
        print(format_comparison(result))
        folders = "".join(f", {role}/" for role in saved)
        print(f"\nreport in {printable(out)}/ (report.md, report.html, comparison.json, "
              f"figures/{folders})")
    return result.exit_status


def save_side(folder: Path, side: Side, scenario=None) -> None:
    """Write a side's rows as a results folder (the files ``sweep`` writes),
    with the provenance of its resolved ``scenario``."""
    from sim.output.provenance import run_provenance
    from sim.output.results import (
        PARQUET_NAME,
        REPORT_NAME,
        SUMMARY_NAME,
        cell_summary,
        write_json,
        write_parquet,
        write_report,
    )

    folder.mkdir(parents=True, exist_ok=True)
    rows = side.rows
    summary: dict = {"cells": [cell_summary(name, dict(side.params.get(name, {})),
                                            rows[rows["cell"] == name].reset_index(drop=True))
                               for name in side.cells]}
    provenance = None
    if scenario is not None:
        provenance = run_provenance(scenario, command="sweep")
        summary["provenance"] = provenance
        for cell in summary["cells"]:
            cell["seed"] = scenario.seed
    write_parquet(folder / PARQUET_NAME, rows, provenance)
    write_json(folder / SUMMARY_NAME, summary)
    write_report(folder / REPORT_NAME, summary, title=f"Results: {side.label}")


def _default_name(base: str, candidate: str) -> str:
    name = f"compare_{base}_vs_{candidate}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def format_comparison(result: Comparison) -> str:
    """The terminal table: per cell, outcome shares side by side with changes,
    intervals and p-values, then steps, tokens and cost; then the verdict."""
    from sim.analysis import frames
    from sim.analysis.compare import METRICS, check_sentence, format_p

    level = round(100 * (1 - result.thresholds.alpha))
    headline = {"regression": "REGRESSION", "no regression": "no regression",
                "inconclusive": "INCONCLUSIVE"}[result.outcome]
    lines = [f"{headline} (exit status {result.exit_status}): {result.title}"]
    lines += [f"changed:   {path}: {old} -> {new}" for path, old, new in result.changes]
    lines += [f"base:      {result.base.source}", f"candidate: {result.candidate.source}",
              f"pairing:   {result.pairing_note}"]
    labels = dict(METRICS)
    for b, c in result.cell_pairs:
        outcomes = result.outcomes[result.outcomes["cell"] == b]
        n1, n2 = outcomes["base_tasks"].iloc[0], outcomes["candidate_tasks"].iloc[0]
        lines += ["", f"== {b}" + (f" vs {c}" if c != b else "") + f" ({n1:,} vs {n2:,} tasks)"]
        width = max(26, *(len(o) + 2 for o in outcomes["outcome"]))
        lines.append(f"  {'outcome':<{width}}{'base':>7}{'cand.':>8}{'change':>10}"
                     f"   {level}% interval (pp)    p")
        for r in frames.rows(outcomes):
            lines.append(f"  {r.outcome:<{width}}{100 * r.base_share:6.1f}%"
                         f"{100 * r.candidate_share:7.1f}%{r.change_pp:+8.2f} pp"
                         f"   {r.ci_low_pp:+6.2f} to {r.ci_high_pp:+6.2f}"
                         f"    {format_p(r.p_value)}  {r.test}")
        test = result.tests[result.tests["cell"] == b].iloc[0]
        lines.append(f"  whole distribution: {test['test']}, statistic {test['statistic']:.2f}, "
                     f"df {test['df']}, p {format_p(test['p_value'])}")
        metrics = result.metrics[result.metrics["cell"] == b].set_index(["metric", "stat"])
        for metric, label in labels.items():
            money = metric == "cost_usd"

            def show(value: float, money: bool = money) -> str:
                if money:
                    return f"${value:,.2f}"
                return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"

            parts = []
            for stat in ("mean", "p50", "p95", "max"):
                m = frames.row(metrics, (metric, stat))
                part = f"{stat} {show(m['base'])} -> {show(m['candidate'])}"
                if stat != "max":
                    part += f" ({m['change_pct']:+.1f}%)"
                parts.append(part)
            lines.append(f"  {label:<14} " + "  ".join(parts))
        cost = frames.row(metrics, ("cost_usd", "mean"))
        lines.append(f"  mean cost change {cost['change']:+,.4f} USD, {level}% interval "
                     f"{cost['ci_low']:+,.4f} to {cost['ci_high']:+,.4f}")
    lines += ["", f"verdict: {headline} (exit status {result.exit_status})"]
    if not result.regression:  # a regression's verdict is the list of failing checks below
        lines.append(f"  {result.verdict}")
    flagged = frames.records(result.checks[result.checks["status"] != "within"])
    lines += [f"  - {check_sentence(r)}" for r in flagged]
    return printable("\n".join(lines))  # names from the scenarios, shown as text
