"""What ``tune`` writes: the recommended harness block, the frontier table and the report.

- :func:`recommendation_yaml`: a scenario file whose ``harness`` section is
  the harness in force with the recommended limits (written with the YAML
  library; a comment header says where each number came from), so
  ``python -m sim replay TRACES recommended.yaml`` checks it;
- :func:`frontier_table`: the frontier as text, each row labelled
  ``replayed`` or ``forecast``, every number with its 95% interval;
- :func:`report_markdown` / :func:`report_html`: the recommendation first,
  why the next-cheaper setting was refused, the frontier figure and table;
- :func:`write_outputs`: all of them into a folder, each file written
  atomically (a temporary file, then a rename).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sim.output.figures import new_figure, png_bytes
from sim.output.html import markdown_to_html
from sim.output.results import json_bytes, write_atomic
from sim.output.safe_text import md_code, md_text, printable
from sim.scenario.diff import Change, setting_changes
from sim.tuning.evidence import pct_interval
from sim.tuning.models import slug
from sim.tuning.replayed import STOPPED_COLUMNS, apply
from sim.tuning.search import OBJECTIVES, TuneResult

FILES = ("recommended.yaml", "frontier.csv", "stopped_runs.csv", "tune.json", "report.md",
         "report.html")
DRILL_ROWS = 10
"""Stopped runs listed in the report (all are in ``stopped_runs.csv``)."""
_UNITS = {"cost": "USD per run (mean)", "p95-cost": "USD per run (p95)",
          "time": "active seconds per run (mean)"}


def _usd(x: float) -> str:
    return f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"


def _value(objective: str, x: float) -> str:
    return f"{x:,.1f} s" if objective == "time" else _usd(x)


def recommendation_yaml(result: TuneResult) -> str:
    """The recommended setting as a scenario file (see the module docstring)."""
    rec = result.recommendation
    harness = rec.harness.model_dump(mode="json", exclude_defaults=True)
    doc = {"name": "tuned", "description": f"Limits recommended by sim tune from "
           f"{_runs(result)} of {result.traces}: {rec.label}.", "harness": harness}
    row = rec.row
    header = [
        f"Recommended by: python -m sim tune {result.traces} --keep-successes "
        f"{result.keep_successes:g} --objective {result.objective} --knobs "
        f"{','.join(result.knobs)}" + "".join(f" --where '{w}'" for w in result.where),
        f"Setting: {rec.label} ({row['method']}: {row['fidelity']})",
        changes_line(result),
        f"Successes lost: {row['lost']} of {row['base_successes']} "
        f"({pct_interval(row['lost_share'], row['lost_low'], row['lost_high'])}; allowed "
        f"{100 * (1 - result.keep_successes):g}%)",
        f"Mean cost per run: {_usd(row['cost_mean'])} [{_usd(row['cost_mean_low'])}, "
        f"{_usd(row['cost_mean_high'])}]; saved per run {_usd(row['saved_mean'])} "
        f"[{_usd(row['saved_low'])}, {_usd(row['saved_high'])}]{_tokens(row)}",
    ]
    header.append(headline(result))
    text = "".join(f"# {line}\n" for line in header)
    return text + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _tokens(row: Mapping[Any, Any]) -> str:
    """`` and 12,345 tokens`` saved per run (replayed rows; nothing for forecast ones)."""
    saved = row.get("saved_tokens_mean")
    if saved is None or saved != saved:  # absent, or NaN
        return ""
    return f" and {saved:,.0f} tokens"


def _stopped(row: Mapping[Any, Any]) -> str:
    parts = [f"{o} {e['runs']} ({pct_interval(e['share'], e['low'], e['high'])})"
             for o, e in row["stopped"].items()]
    return "; ".join(parts) or "none"


def table_rows(result: TuneResult) -> list[dict[str, str]]:
    """The frontier as printable strings, one dict per candidate: those that
    keep successes cheapest first (the recommendation leads), then the refused
    ones from the least cheap (the nearest refusals) down."""
    frame = result.frontier
    kept = frame[frame["keeps_successes"]].sort_values(
        ["objective_ratio", "recommended"], ascending=[True, False], kind="stable")
    refused = frame[~frame["keeps_successes"]].sort_values("objective_ratio", ascending=False,
                                                         kind="stable")
    out = []
    for row in [*kept.to_dict("records"), *refused.to_dict("records")]:
        mark = "*" if row["recommended"] else ("ok" if row["keeps_successes"] else "")
        out.append({
            "": mark, "setting": row["setting"] + (" (in force)" if row["phase"].startswith(
                "in force") else ""), "by": row["method"],
            "successes kept": f"{row['base_successes'] - row['lost']}/{row['base_successes']}",
            "lost": pct_interval(row["lost_share"], row["lost_low"], row["lost_high"])
            if row["base_successes"] else "n/a",
            "mean cost": f"{_usd(row['cost_mean'])} [{_usd(row['cost_mean_low'])}, "
                         f"{_usd(row['cost_mean_high'])}]",
            "p95 cost": f"{_usd(row['cost_p95'])} [{_usd(row['cost_p95_low'])}, "
                        f"{_usd(row['cost_p95_high'])}]",
            "vs in force": f"{100 * (row['objective_ratio'] - 1):+.1f}%"
            if math.isfinite(row["objective_ratio"]) else "n/a",
            "stopped": _stopped(row)})
    return out


def frontier_table(result: TuneResult, limit: int | None = None) -> str:
    """The frontier as an aligned text table (``limit``: first rows only)."""
    rows = table_rows(result)[:limit]
    if not rows:
        return ""
    columns = [c for c in rows[0] if c != "stopped"]
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(width[c]) for c in columns)]
    lines += ["  ".join(r[c].ljust(width[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def changes(result: TuneResult) -> list[Change]:
    """The settings the recommended harness block changes from the harness
    in force (dotted paths, both values: :mod:`sim.scenario.diff`)."""
    rec = result.recommendation
    in_force = apply(rec.harness, result.in_force)
    return list(setting_changes({"harness": in_force.model_dump(mode="json")},
                                {"harness": rec.harness.model_dump(mode="json")}))


def changes_line(result: TuneResult) -> str:
    """``Changes from the harness in force: harness.budgets.tokens: null -> 359,000; ...``
    (``none`` when the recommendation keeps it)."""
    found = changes(result)
    return ("Changes from the harness in force: "
            + ("; ".join(str(c) for c in found) if found else "none"))


def _keeps_in_force(result: TuneResult) -> bool:
    return bool(result.recommendation.row["phase"] == "in force")


def headline(result: TuneResult) -> str:
    """The answer in one statement: what is safe to set now, what might save
    more and how many runs would decide it (``INCONCLUSIVE (exit 3)`` first
    when the evidence is thin)."""
    rec = result.recommendation
    row = rec.row
    allowed = f"{100 * (1 - result.keep_successes):g}%"
    if _keeps_in_force(result):
        now = f"keep the harness in force ({rec.label})"
        if row["base_successes"]:
            now += (f": no other setting was shown to lower {_UNITS[result.objective]} while "
                    f"keeping {100 * result.keep_successes:g}% of recorded successes")
    else:
        now = (f"set {rec.label}: {_UNITS[result.objective]} "
               f"{_value(result.objective, row[OBJECTIVES[result.objective]])} "
               f"({_change(row['objective_ratio'])} against the harness in force), losing "
               f"{row['lost']} of {row['base_successes']} recorded successes (upper 95% bound "
               f"{100 * row['lost_high']:.2f}%, allowed {allowed})")
    text = ("INCONCLUSIVE (exit 3): " + now) if result.status else now[0].upper() + now[1:]
    maybe = result.might_save
    if maybe is not None:
        decide = (f"about {result.runs_to_decide:,} "
                  f"{'simulated runs' if maybe['method'] == 'forecast' else 'runs like these'}"
                  f" would decide (against {maybe['runs']:,} now)"
                  if result.runs_to_decide is not None else "more runs cannot decide it")
        text += (f". Might save more: {maybe['setting']} ({maybe['method']}, "
                 f"{_change(maybe['objective_ratio'])} against the harness in force) loses "
                 f"{pct_interval(maybe['lost_share'], maybe['lost_low'], maybe['lost_high'])}"
                 f" of successes, within the {allowed} allowed on these runs but not surely; "
                 f"{decide}")
    elif result.status and not row["base_successes"]:
        text += (": no recorded run says whether it succeeded, so no limit can be judged"
                 if result.judged_runs == 0 else
                 ": no recorded run succeeded, so no limit can be judged")
    return text + "."


def _models_lead(result: TuneResult) -> list[str]:
    """What the top says of a folder of several models: per model when
    their runs differ (each model's headline, ``models/<model>.yaml``)."""
    if not result.per_model:
        return [f"Models: {result.models_note}."] if result.models_note else []
    lines = [f"Per model: {result.models_note} (models/<model>.yaml):"]
    lines += [f"  {model}: {headline(r)}" for model, r in result.per_model.items()]
    return [*lines, "All models pooled:"]


def _change(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f}%" if math.isfinite(ratio) else "n/a"


def lead(result: TuneResult) -> list[str]:
    """The answer (:func:`headline`), then its evidence in lines (what the
    terminal and the report say first)."""
    rec = result.recommendation
    row = rec.row
    lines = [*_models_lead(result), headline(result), changes_line(result),
             f"  {'kept' if _keeps_in_force(result) else 'recommended'}: {rec.label}, "
             f"evaluated by {row['method']} ({row['fidelity']})"]
    if result.where:
        lines.insert(len(lines) - 1, f"  tuned on {_runs(result)}")
    if row["base_successes"] and not _keeps_in_force(result):
        lines.append(f"  successes lost: {row['lost']} of {row['base_successes']} recorded, "
                     f"{pct_interval(row['lost_share'], row['lost_low'], row['lost_high'])} "
                     f"(upper 95% bound {100 * row['lost_high']:.2f}%, allowed "
                     f"{100 * (1 - result.keep_successes):g}%)")
    if not _keeps_in_force(result):
        lines += [f"  {_UNITS[result.objective]}: "
                  f"{_value(result.objective, row[OBJECTIVES[result.objective]])} "
                  f"({_change(row['objective_ratio'])} against the harness in force)",
                  f"  saved per run: {_usd(row['saved_mean'])} [{_usd(row['saved_low'])}, "
                  f"{_usd(row['saved_high'])}]{_tokens(row)}; runs stopped: {_stopped(row)}"]
    stopped = result.stopped_runs
    if not _keeps_in_force(result) and stopped is not None and not stopped.empty:
        first = stopped.iloc[0]
        lines.append(f"  runs it stops: {len(stopped):,}, listed in stopped_runs.csv (first: "
                     f"{first['run_id']}, {first['outcome_in_force']} in force, stopped at "
                     f"call {first['stopped_at_call']} of {first['calls_recorded']} with "
                     f"{first['prompt_tokens_at_stop']:,} prompt tokens)")
    if result.refusal:
        lines.append(f"  next-cheaper setting refused: {result.refusal}")
    lines += [f"  boundary: {b.sentence()}" for b in result.boundaries
              if b.keeps is not None and b.refused is not None]
    lines += [f"note: {n}" for n in result.notes]
    if result.overshoot:
        lines.append("configured vs actual: sim's harness never passes these budgets; a harness "
                     "that checks spend so far before each call could pass them by:")
        lines += [f"  {line}" for line in result.overshoot]
    return lines


def frontier_figure(result: TuneResult) -> Any:
    """Successes lost (share, 95% interval) against the objective relative to
    the harness in force; replayed and forecast candidates marked apart, the
    allowed loss as a line, the recommendation ringed."""
    fig, (ax,) = new_figure(4.2)
    frame = result.frontier
    limit = 100 * (1 - result.keep_successes)
    for method, marker, color in (("replayed", "o", "#1f5f99"), ("forecast", "s", "#d4622a")):
        part = frame[frame["method"] == method]
        if part.empty:
            continue
        x = 100 * (part["objective_ratio"].to_numpy(float) - 1)
        y = 100 * part["lost_share"].to_numpy(float)
        err = np.vstack([y - 100 * part["lost_low"].to_numpy(float),
                         100 * part["lost_high"].to_numpy(float) - y])
        ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt=marker, color=color, ms=4,
                    alpha=0.8, capsize=2, lw=0.8, label=method)
    rec = result.recommendation.row
    ax.plot([100 * (rec["objective_ratio"] - 1)], [100 * rec["lost_share"]], "o", ms=14,
            mfc="none", mec="#3a8a3a", mew=2, label="recommended")
    ax.axhline(limit, color="#b22222", ls="--", lw=1, label=f"allowed loss {limit:g}%")
    ax.set_xlabel(f"{_UNITS[result.objective]}, % change against the harness in force")
    ax.set_ylabel("recorded successes lost (%), 95% interval")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _stopped_frame(result: TuneResult) -> pd.DataFrame:
    if result.stopped_runs is None:
        return pd.DataFrame(columns=list(STOPPED_COLUMNS))
    return result.stopped_runs


def _cell(value: Any, width: int = 60) -> str:
    """A table cell: at most ``width`` characters of ``value``, escaped
    (:func:`~sim.output.safe_text.md_text`: a ``|`` cannot split the row)."""
    text = "" if value is None or value is pd.NA else str(value)
    return md_text(text if len(text) <= width else text[:width - 1] + "…")


def drill_down(result: TuneResult, limit: int = DRILL_ROWS) -> list[str]:
    """The runs the recommendation stops, as report lines: how many, of
    which recorded outcome, and the first ``limit`` (successes lost first,
    then the largest saving) with where each is stopped."""
    frame = result.stopped_runs
    if frame is None:
        return ["The recommendation is a forecast: no recorded run is stopped by name."]
    if frame.empty:
        return ["The recommendation stops no recorded run."]
    lost = int(frame["lost_success"].sum())
    lines = [f"The recommendation stops {len(frame):,} recorded runs ({lost:,} of them "
             f"successes in force); all are in `stopped_runs.csv`"
             + (f", the first {limit} here:" if len(frame) > limit else ":"), "",
             "| run | task | model | recorded exit | outcome in force -> now | stopped at call "
             "| prompt tokens then | cost in force -> now |", "|---|---|---|---|---|---|---|---|"]
    for r in frame.head(limit).to_dict("records"):
        lines.append(f"| {_cell(r['run_id'])} | {_cell(r['task_id'])} | {_cell(r['model'])} | "
                     f"{_cell(r['exit'])} | {r['outcome_in_force']} -> {r['outcome']} | "
                     f"{r['stopped_at_call']} of {r['calls_recorded']} | "
                     f"{r['prompt_tokens_at_stop']:,} | {_usd(r['cost_in_force_usd'])} -> "
                     f"{_usd(r['cost_usd'])} |")
    return lines


def _runs(result: TuneResult) -> str:
    """``567 recorded runs`` or ``20 recorded runs where model=gpt-4o (of 700)``."""
    if not result.where:
        return f"{result.runs:,} recorded runs"
    return (f"{result.runs:,} recorded runs where {' '.join(result.where)} "
            f"(of {result.runs_in_folder:,})")


def report_markdown(result: TuneResult) -> str:
    """The report: recommendation first, the refusal, the figure, the table."""
    rows = table_rows(result)
    lines = [f"# Tuning limits: {md_text(result.traces)}", "",
             f"{md_text(_runs(result))}; knobs {', '.join(result.knobs)}; objective "
             f"{result.objective}; keep {100 * result.keep_successes:g}% of successes, judged "
             f"by the upper end of the 95% interval of the share lost.", "",
             "## Recommendation", "", "```",
             *(printable(line, newlines=False) for line in lead(result)), "```", "",
             "The harness block is in `recommended.yaml`; replay it with "
             f"{md_code(f'python -m sim replay {result.traces} recommended.yaml')}.", "",
             "## Runs the recommendation stops", "", *drill_down(result), "",
             "## Boundaries", "",
             "Each budget bisected between the tightest grid value that keeps successes and "
             "the next tighter one, to the resolution a user sets (1 step; 3 significant "
             "figures of tokens or dollars):", "",
             *([f"- {b.sentence()}" for b in result.boundaries] or ["- none searched"]), "",
             "## Frontier", "", "![frontier](frontier.png)", "",
             "Replayed rows are exact on the recorded runs (a setting that only tightens the "
             "harness in force); forecast rows come from the world calibrated to the same "
             "traces" + (f" ({result.world_fidelity})" if result.world_fidelity else "") + ".",
             "", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r.values()) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _csv(result: TuneResult) -> bytes:
    frame = result.frontier.copy()
    frame["stopped"] = [json.dumps(s, sort_keys=True) for s in frame["stopped"]]
    return frame.to_csv(index=False).encode()


def summary(result: TuneResult, provenance: Mapping[str, Any] | None = None
            ) -> dict[str, Any]:
    """``tune.json``: the recommendation, status and frontier rows, and the
    ``provenance`` of the folder (which traces and options: the same tune may
    rewrite it, another needs ``--force``)."""
    frame = result.frontier.replace({np.nan: None})
    head = {} if provenance is None else {"provenance": dict(provenance)}
    return {**head, "traces": result.traces, "runs": result.runs, "where": list(result.where),
            "runs_in_folder": result.runs_in_folder, "judged_runs": result.judged_runs,
            "knobs": list(result.knobs),
            "keep_successes": result.keep_successes, "objective": result.objective,
            "status": result.status, "thin": result.thin,
            "runs_to_decide": result.runs_to_decide, "headline": headline(result),
            "might_save": None if result.might_save is None else {
                k: _plain(v) for k, v in result.might_save.items()},
            "recommendation": {"setting": result.recommendation.label,
                               "values": dict(result.recommendation.setting),
                               "changes": [{"path": c.path, "in_force": c.base,
                                            "recommended": c.candidate}
                                           for c in changes(result)]},
            "refusal": result.refusal, "notes": result.notes, "models": result.models_note,
            "per_model": {model: {"headline": headline(r), "status": r.status, "runs": r.runs,
                                  "recommendation": {"setting": r.recommendation.label,
                                                     "values": dict(r.recommendation.setting)},
                                  "file": f"models/{slug(model)}.yaml"}
                          for model, r in result.per_model.items()},
            "boundaries": [{"knob": b.knob, "keeps": b.keeps, "refused": b.refused,
                            "steps": [vars(step) for step in b.steps]}
                           for b in result.boundaries],
            "worst_overshoot": result.overshoot,
            "frontier": [{k: _plain(v) for k, v in r.items()}
                         for r in frame.to_dict("records")]}


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def report_html(result: TuneResult) -> str:
    """The report as one self-contained HTML page."""
    figure = png_bytes(frontier_figure(result))
    return markdown_to_html(report_markdown(result), {"frontier.png": figure},
                            title=f"Tuning limits: {result.traces}")


def write_outputs(out: str | Path, result: TuneResult,
                  provenance: Mapping[str, Any] | None = None) -> Path:
    """Write :data:`FILES` into ``out`` (created if needed), each atomically;
    ``provenance`` goes into ``tune.json``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "recommended.yaml", recommendation_yaml(result).encode())
    write_atomic(folder / "frontier.csv", _csv(result))
    write_atomic(folder / "stopped_runs.csv", _stopped_frame(result).to_csv(index=False).encode())
    write_atomic(folder / "tune.json", json_bytes(summary(result, provenance)))
    if result.per_model:
        (folder / "models").mkdir(exist_ok=True)
        for model, r in result.per_model.items():
            write_atomic(folder / "models" / f"{slug(model)}.yaml", recommendation_yaml(r).encode())
    write_atomic(folder / "report.md", report_markdown(result).encode())
    write_atomic(folder / "report.html", report_html(result).encode())
    return folder


__all__ = ["FILES", "drill_down", "frontier_table", "headline", "lead", "recommendation_yaml",
           "report_html", "write_outputs"]
