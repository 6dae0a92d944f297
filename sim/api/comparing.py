"""Comparing from the API: a candidate harness setting against a base, each
side a scenario, a results folder or task rows (:func:`compare`; the
statistics are :mod:`sim.analysis.compare`'s). :func:`plan_comparison`
validates both sides before anything is simulated; :func:`run_comparison`
carries a plan out (``python -m sim compare`` runs the two in turn).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from sim.analysis.compare import PAIRINGS, Comparison, Side, Thresholds, compare_sides
from sim.api.scenarios import Overrides, prepare, with_overrides
from sim.api.simulating import SweepFrames, read_folder, run_cells
from sim.bad_input import InputError
from sim.output.results import SUMMARY_NAME
from sim.scenario.diff import setting_changes
from sim.scenario.model import Scenario
from sim.sweeps.cells import cells_of

__all__ = ["Compared", "Comparison", "ComparisonPlan", "compare", "compared_text",
           "comparison_text", "default_name", "plan_comparison", "run_comparison", "save_side",
           "write_comparison_folder"]


def _count(n: int) -> str:
    return f"{n:,} task{'s' if n != 1 else ''} per cell"


def _scenario_side(s: Scenario, source: str, workers: int | None, progress: bool) -> Side:
    runs = cells_of(s)
    rows, cells = run_cells(s, runs, workers, progress)
    return Side(s.name, f"scenario {source} (seed {s.seed}, {_count(s.tasks)}, "
                        f"engine {s.engine})", rows, tuple(r.name for r in runs),
                {c["name"]: c["params"] for c in cells}, s.seed)


def _rows_side(rows: pd.DataFrame, label: str, source: str,
               cells: list[dict[str, Any]] | None = None) -> Side:
    names = [c["name"] for c in cells] if cells else list(dict.fromkeys(rows["cell"]))
    params = {c["name"]: c.get("params", {}) for c in cells or []}
    counts = rows.groupby("cell", sort=False).size()
    sizes = sorted(set(counts.tolist()))
    size = _count(sizes[0]) if len(sizes) == 1 else f"{sizes[0]:,} to {sizes[-1]:,} tasks"
    seeds = {c.get("seed") for c in cells or []}
    seed = seeds.pop() if len(seeds) == 1 else None
    known = f"seed {seed}" if seed is not None else "seed not recorded"
    return Side(label, f"{source} ({size}; {known})", rows, tuple(names), params, seed)


class _Spec(NamedTuple):
    kind: str  # "scenario", "folder" or "rows"
    value: Any
    label: str


def _spec(source: Any) -> _Spec:
    if isinstance(source, Scenario):
        return _Spec("scenario", source, source.name)
    if isinstance(source, SweepFrames):
        return _Spec("rows", source.rows, "rows")
    if isinstance(source, pd.DataFrame):
        return _Spec("rows", source, "rows")
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            return _Spec("folder", path, path.name or str(path))
        if path.is_file():
            return _Spec("scenario", path, path.stem)
        from sim.scenario.catalog import resolve  # a scenario's name, or an InputError

        path = Path(resolve(path))
        return _Spec("scenario", path, path.stem)
    raise InputError(f"cannot compare a {type(source).__name__}: give a scenario file, a "
                     "results folder, a Scenario or a DataFrame of task rows")


@dataclass(frozen=True)
class ComparisonPlan:
    """Both sides of a comparison resolved and validated, nothing simulated
    yet: per side its kind (``scenario``, ``folder`` or ``rows``), label and
    source, and the resolved Scenario or the rows (and cells) read. See
    :func:`plan_comparison`; :func:`run_comparison` carries it out."""

    specs: tuple[_Spec, _Spec]
    scenarios: tuple[Scenario | None, Scenario | None]
    folders: tuple[tuple[pd.DataFrame | None, list[dict[str, Any]] | None], ...]
    thresholds: Thresholds
    pairing: str

    def provenance(self) -> dict[str, Any]:
        """What the comparison compares: per side the resolved scenario of a
        simulated side, or the folder of a results side
        (:mod:`sim.output.provenance`)."""
        from sim.output.provenance import RESULT_FILES, folder_record, sim_version

        out: dict[str, Any] = {"command": "compare", "sim_version": sim_version()}
        for role, spec, scenario in zip(("base", "candidate"), self.specs, self.scenarios,
                                        strict=True):
            if scenario is not None:
                out[role] = {"scenario": scenario.model_dump(mode="json")}
            elif spec.kind == "folder":
                out[role] = {"folder": folder_record(spec.value, RESULT_FILES)}
            else:
                out[role] = {"rows": len(spec.value)}
        return out


def plan_comparison(base: Any, candidate: Any, *, tasks: int | None = None,
                    seed: int | None = None, overrides: Overrides = None,
                    base_overrides: Overrides = None, candidate_overrides: Overrides = None,
                    pairing: str = "auto", max_share_drop_pp: float = 1.0,
                    max_cost_rise_pct: float = 5.0, alpha: float = 0.05,
                    resamples: int = 2000, allow_plugins: bool = False) -> ComparisonPlan:
    """Resolve and validate both sides of :func:`compare` (same arguments)
    without simulating: bad input fails here, before any work."""
    thresholds = Thresholds(max_share_drop_pp, max_cost_rise_pct, alpha, resamples).validate()
    specs = (_spec(base), _spec(candidate))
    folder_tasks = None
    folders = tuple(read_folder(s.value) if s.kind == "folder" else (None, None)
                    for s in specs)
    for rows, _cells in folders:
        if rows is not None and len(rows):
            folder_tasks = int(rows.groupby("cell").size().max())
    if specs[0].kind != "scenario" and specs[1].kind != "scenario" and (
            tasks is not None or seed is not None or overrides or base_overrides
            or candidate_overrides):
        raise InputError("tasks, seed and overrides apply to scenarios; neither side is one")
    scenarios: list[Scenario | None] = []
    for spec, own in zip(specs, (base_overrides, candidate_overrides), strict=True):
        if spec.kind != "scenario":
            scenarios.append(None)
            continue
        s = prepare(spec.value, overrides, tasks if tasks is not None else folder_tasks, seed,
                     allow_plugins)
        scenarios.append(with_overrides(s, own, allow_plugins=allow_plugins))
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    return ComparisonPlan(specs, (scenarios[0], scenarios[1]), folders, thresholds, pairing)


def run_comparison(plan: ComparisonPlan, *, workers: int | None = None,
                   progress: bool = False) -> Comparison:
    """Simulate the scenario sides of ``plan`` and compare (see :func:`compare`)."""
    sides = []
    for spec, scenario, (rows, cells) in zip(plan.specs, plan.scenarios, plan.folders,
                                             strict=True):
        if scenario is not None:
            source = str(spec.value) if not isinstance(spec.value, Scenario) else scenario.name
            sides.append(_scenario_side(scenario, source, workers, progress))
        elif spec.kind == "folder":
            assert rows is not None  # plan_comparison read the folder
            sides.append(_rows_side(rows, spec.label, f"results folder {spec.value}", cells))
        else:
            sides.append(_rows_side(spec.value, spec.label, "task rows"))
    if plan.specs[0].kind == "folder" and plan.specs[1].kind == "folder":
        _same_counts(sides[0], sides[1])
    b, c = _distinct_labels(*sides)
    result = compare_sides(b, c, plan.thresholds, pairing=plan.pairing)
    documents = [_settings(spec, scenario) for spec, scenario in zip(plan.specs, plan.scenarios,
                                                                     strict=True)]
    if documents[0] is None or documents[1] is None:
        return result
    changes = setting_changes(documents[0], documents[1])
    return replace(result, changes=tuple((c.path, c.base, c.candidate) for c in changes))


def _settings(spec: _Spec, scenario: Scenario | None) -> dict[str, Any] | None:
    """A side's resolved scenario document: the scenario simulated, or the one
    a results folder's ``summary.json`` records (None for task rows, or a
    folder that records none)."""
    if scenario is not None:
        return scenario.model_dump(mode="json")
    if spec.kind != "folder":
        return None
    try:
        summary = json.loads((Path(spec.value) / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    recorded = summary.get("provenance", {}).get("scenario") if isinstance(summary, dict) else None
    return recorded if isinstance(recorded, dict) else None


def compare(base: Any, candidate: Any, *, tasks: int | None = None, seed: int | None = None,
            overrides: Overrides = None, base_overrides: Overrides = None,
            candidate_overrides: Overrides = None, pairing: str = "auto",
            max_share_drop_pp: float = 1.0, max_cost_rise_pct: float = 5.0,
            alpha: float = 0.05, resamples: int = 2000, workers: int | None = None,
            progress: bool = False, allow_plugins: bool = False) -> Comparison:
    """Compare a candidate harness setting with a base: outcome shares, steps,
    tokens and cost, cell by cell, with intervals, tests and a verdict (see
    :mod:`sim.analysis.compare` for the statistics).

    Each side is a scenario file, a :class:`~sim.scenario.Scenario`, a
    results folder (``results.parquet`` + ``summary.json``) or a DataFrame of
    task rows. Scenarios are simulated here: ``tasks``, ``seed`` and
    ``overrides`` apply to both, ``base_overrides``/``candidate_overrides`` to
    one side (e.g. ``candidate_overrides={"seed": 8}`` for a second seed).
    Without ``tasks``, a scenario compared with a results folder runs as many
    tasks as the folder's cells hold. Two results folders must hold the same
    number of tasks per cell (else InputError).

    ``pairing``: ``auto`` (pair tasks by index when both sides ran the same
    task streams), ``paired`` or ``unpaired``. Thresholds: ``max_share_drop_pp``
    (percentage points), ``max_cost_rise_pct`` (percent), ``alpha``
    (family-wise level); ``resamples`` of the bootstrap. ``allow_plugins``
    lets a scenario name a detector or verifier by import path.

    The result's ``outcome`` is ``regression``, ``no regression`` (every
    check shown within its limit) or ``inconclusive`` (``tasks_to_decide``
    says how many tasks would decide it); ``exit_status`` 1, 0 or 3.

    >>> result = compare("scenarios/bounded.yaml", "scenarios/bounded.yaml",
    ...                  tasks=100, candidate_overrides={"harness.detector.nudges": 0},
    ...                  workers=1)
    >>> result.paired, result.exit_status in (0, 1, 3)
    (True, True)
    """
    plan = plan_comparison(base, candidate, tasks=tasks, seed=seed, overrides=overrides,
                           base_overrides=base_overrides,
                           candidate_overrides=candidate_overrides, pairing=pairing,
                           max_share_drop_pp=max_share_drop_pp,
                           max_cost_rise_pct=max_cost_rise_pct, alpha=alpha,
                           resamples=resamples, allow_plugins=allow_plugins)
    return run_comparison(plan, workers=workers, progress=progress)


def _same_counts(base: Side, candidate: Side) -> None:
    b = base.rows.groupby("cell").size().to_dict()
    c = candidate.rows.groupby("cell").size().to_dict()
    if len(b) == 1 and len(c) == 1:
        b, c = {"": next(iter(b.values()))}, {"": next(iter(c.values()))}
    bad = {k: (b.get(k), c.get(k)) for k in set(b) | set(c) if b.get(k) != c.get(k)}
    if bad:
        detail = ", ".join(f"{k or 'the cell'}: {x} vs {y}" for k, (x, y) in sorted(bad.items()))
        raise InputError(f"the results folders hold different numbers of tasks ({detail}); "
                         "compare folders of the same size")


def _distinct_labels(base: Side, candidate: Side) -> tuple[Side, Side]:
    """Sides whose labels differ (same-named sides get their seed or role added)."""
    if base.label != candidate.label:
        return base, candidate
    from dataclasses import replace

    if base.seed is not None and candidate.seed is not None and base.seed != candidate.seed:
        return (replace(base, label=f"{base.label} (seed {base.seed})"),
                replace(candidate, label=f"{candidate.label} (seed {candidate.seed})"))
    return (replace(base, label=f"{base.label} (base)"),
            replace(candidate, label=f"{candidate.label} (candidate)"))


@dataclass(frozen=True)
class Compared:
    """A comparison written to a report folder ``out``: the ``result``, the
    ``provenance`` recorded, and the sides saved as results folders
    (``saved``: ``base``, ``candidate``)."""

    out: Path
    result: Comparison
    provenance: dict[str, Any]
    saved: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """comparison.json's content (:func:`sim.output.comparison_report.comparison_dict`)."""
        from sim.output.comparison_report import comparison_dict

        return comparison_dict(self.result, self.provenance)


def write_comparison_folder(plan: ComparisonPlan, out: str | os.PathLike | None = None, *,
                            force: bool = False, junit: str | os.PathLike | None = None,
                            summary_md: str | os.PathLike | None = None,
                            save_results: bool = False, workers: int | None = None,
                            progress: bool = False) -> Compared:
    """Carry ``plan`` out and write its report folder whole (report.md,
    report.html, comparison.json, figures/; with ``save_results`` each scenario
    side's results folder in ``base/`` and ``candidate/``) to ``out`` (default
    ``reports/compare_<base>_vs_<candidate>`` under the results root). ``out``,
    ``junit`` (JUnit XML, one test case per check) and ``summary_md`` (a
    Markdown summary appended, as CI step summaries are) are checked before
    anything runs; a failure writing the last two keeps the report and says so."""
    from sim.api.simulating import results_folder
    from sim.output import folder
    from sim.output.ci import append_summary, junit_xml, summary_markdown
    from sim.output.comparison_report import write_comparison
    from sim.output.results import write_atomic
    from sim.output.safe_text import printable

    provenance = plan.provenance()
    labels = [s.name if s is not None else spec.label
              for spec, s in zip(plan.specs, plan.scenarios, strict=True)]
    target = results_folder(default_name(*labels), out=out)
    folder.prepare(target, provenance, force=force)
    junit_file = None if junit is None else folder.check_file_target(
        junit, "--junit", results=(target,))
    summary_file = None if summary_md is None else folder.check_file_target(
        summary_md, "--summary-md", replaced=False, results=(target,))
    result = run_comparison(plan, workers=workers, progress=progress)
    saved = []
    with folder.replace(target) as staging:
        write_comparison(staging, result, provenance=provenance)
        if save_results:
            for role, side, scenario in zip(("base", "candidate"),
                                            (result.base, result.candidate), plan.scenarios,
                                            strict=True):
                if scenario is not None:  # a simulated scenario side
                    save_side(staging / role, side, scenario)
                    saved.append(role)
    kept = f"the comparison's results are in {printable(target)}/ as written"
    if junit is not None and junit_file is not None:
        with folder.secondary_output(junit, "--junit", kept):
            write_atomic(junit_file, junit_xml(result))
    if summary_md is not None and summary_file is not None:
        with folder.secondary_output(summary_md, "--summary-md", kept):
            append_summary(summary_file, summary_markdown(result))
    return Compared(target, result, provenance, tuple(saved))


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


def default_name(base: str, candidate: str) -> str:
    """A comparison's default folder name: ``compare_<base>_vs_<candidate>``,
    characters other than letters, digits and ``._-`` as ``_``."""
    name = f"compare_{base}_vs_{candidate}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def comparison_text(result: Comparison) -> str:
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
    from sim.output.safe_text import printable

    return printable("\n".join(lines))  # names from the scenarios, shown as text


def compared_text(compared: Compared) -> str:
    """What ``compare`` prints: :func:`comparison_text`, then the line naming
    the report folder and its files."""
    from sim.output.safe_text import printable

    folders = "".join(f", {role}/" for role in compared.saved)
    return (f"{comparison_text(compared.result)}\n\nreport in {printable(compared.out)}/ "
            f"(report.md, report.html, comparison.json, figures/{folders})")
