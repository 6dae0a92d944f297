"""The summary of a trace folder: the figures calibration starts from.

:func:`summarize` reads a trace folder (checked, :func:`~sim.traces.model.read_traces`,
a call's ``purpose`` too, as replay and tune check it) and returns plain numbers (JSON-ready):

- ``runs``, ``calls`` and runs by source;
- ``steps``: model calls per run, ``p50``/``p95``/``max``/``mean``;
- ``prompt_fit``: each run's least-squares line through its calls' prompt
  tokens, ``prompt(n) = P + h*n`` with ``n`` the 0-based call index (the closed
  form of :mod:`sim.cost`); the median ``P`` (tokens), ``h`` (tokens per call)
  and ``R^2`` over the runs with at least :data:`MIN_FIT_CALLS` calls whose
  prompt is not constant (``R^2`` is undefined for a constant prompt);
- ``output_per_call``: ``output_tokens`` per call, ``p50``/``p95``;
- ``cache``: shares of all prompt tokens read from and written to the cache;
- ``exit``: the share of each exit label (``"(none)"`` when the source has none);
- ``resolved``: the share resolved among the runs whose outcome is known;
- ``cost``: for each run model, the recorded cost against the genai-prices
  catalogue price of the same usage (each call priced at its model's catalogue
  prices, tiered by its prompt, at the prices of the run's start: a
  time-of-day price is the one of that hour; today's for runs without a
  start), over the runs that record a cost and whose
  calls' models are all in the catalogue; models not found are listed;
- ``price``: the runs' one price (:mod:`sim.cost.recorded`, the price every
  command gives a run): ``usd`` (total over the runs with a price), ``by_basis``
  (runs and USD per basis: recorded, fitted, catalogue, scenario, unpriced),
  ``models`` (the basis, and the scale of fitted prices, of each model's
  untrusted calls) and ``runs`` (``{run_id: [usd, basis]}``, USD None when
  unpriced), at the catalogue's prices of the newest run's start day (a
  time-of-day price weighted by the hours it holds; today without one)
  unless a price source is given (:func:`one_price`);
- ``warnings``: a line per source whose input, cache, output tokens or cost
  are estimated or unknown for more than 1% of its calls (printed first), and
  ``provenance``: per source, per figure, calls by how it was obtained;
- ``calls_with_unknown_usage``: calls whose token counts are unknown (null);
  they are left out of ``prompt_fit`` and ``cache`` (a call whose prompt
  parts are not all known), ``output_per_call`` (unknown output) and the cost
  comparison (their runs, ``runs_with_unknown_usage``);
- ``flags``: what looks wrong in the data itself, each with the calls and runs
  concerned and how to fix it (:func:`flags`);
- ``skipped``: the import's skipped files and runs by reason, and
  ``repaired``: the impossible values it repaired or set to null, by dotted
  field and reason (runs kept), both from ``import.json`` when the folder has
  one (an ``import.json`` written before repairs were counted has none).

Percentiles and medians follow :mod:`sim.analysis.stats` (an observed value at
rank ``floor(q*n)``; the median of an even-sized sample is the upper one).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from sim.analysis import stats
from sim.bad_input import InputError
from sim.cost.prices import prices_day
from sim.cost.recorded import Listed, basis_line, call_cost, catalogue, run_prices
from sim.harness.messages import Usage
from sim.harness.prices import Prices
from sim.traces.model import (
    PROVENANCE_FIELDS,
    REPORT_FILE,
    TOKEN_COLUMNS,
    UNDETERMINED,
    approx_tokens,
    read_traces,
)
from sim.traces.provenance import warnings
from sim.traces.usage import PROMPT_COLUMNS
from sim.traces.where import parse_where, run_mask, where_text

MIN_FIT_CALLS = 3
NO_EXIT = "(none)"


def summarize(directory: str | Path, listed: Listed | None = None,
              scenario: Prices | None = None,
              where: str | Sequence[str] | None = None) -> dict[str, Any]:
    """The summary of the trace folder ``directory`` (see the module);
    ``listed`` and ``scenario`` are the price source of ``price``
    (:func:`one_price`); ``where``: ``--where`` conditions
    (:mod:`sim.traces.where`), the summary then of the runs they select
    (``where``: the conditions, ``runs_in_folder``: all the runs), no run
    selected an InputError."""
    folder = Path(directory)
    runs, calls = read_traces(folder, purposes=True)  # replay's, tune's check
    if runs.empty:
        raise InputError("the trace folder holds no runs", source=str(folder))
    conditions = parse_where(where)
    in_folder = len(runs)
    if conditions:
        keep = run_mask(runs, conditions, source=str(folder))
        if not keep.any():
            raise InputError(f"no run matches {where_text(conditions)} (of {in_folder:,} "
                             "runs)", source=str(folder))
        runs = runs[keep].reset_index(drop=True)
        calls = calls[calls["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    calls = calls.sort_values(["run_id", "call"], kind="stable")
    counts = provenance_counts(runs, calls)
    prompted = calls[calls[list(PROMPT_COLUMNS)].notna().all(axis=1)]  # known prompts
    prompt = _prompt(prompted)
    total_prompt = int(prompt.sum())
    output = calls["output_tokens"].dropna()
    out: dict[str, Any] = {
        "runs": len(runs), "calls": len(calls),
        "runs_by_source": {str(k): int(v) for k, v in
                           sorted(runs["source"].value_counts().items())},
        "warnings": warnings(counts),
        "steps": stats.describe(runs["steps"].to_numpy(dtype=np.int64)),
        "prompt_fit": prompt_fit(prompted["run_id"].to_numpy(dtype=object),
                                 prompted["call"].to_numpy(dtype=np.int64), prompt),
        "output_per_call": _percentiles(output.to_numpy(dtype=np.int64)),
        "cache": {
            "prompt_tokens": total_prompt,
            "read_share": _share(int(prompted["cache_read_tokens"].sum()), total_prompt),
            "write_share": _share(int(prompted["cache_write_tokens"].sum()), total_prompt),
        },
        "exit": stats.outcome_shares(runs["exit"].fillna(NO_EXIT).astype(str).tolist()),
        "resolved": _resolved(runs),
        "cost": cost_comparison(runs, calls),
        "price": one_price(runs, calls, listed, scenario),
        "provenance": counts,
        "calls_with_unknown_usage": int(calls[list(TOKEN_COLUMNS)].isna().any(axis=1).sum()),
    }
    report = _report(folder)
    skipped = _skipped(folder, report)
    if skipped is not None:
        out["skipped"], repaired = skipped
        if repaired is not None:
            out["repaired"] = repaired
    out["flags"] = flags(runs, calls, _conventions(folder, report))
    if conditions:
        out["where"] = [c.text for c in conditions]
        out["runs_in_folder"] = in_folder
    return out


OUTPUT_SHARE = 0.25
"""A call's output count is flagged as implausibly small when it is below
this share of the tokens its recorded text and tool-call arguments need
(:func:`~sim.traces.model.approx_tokens` of each)."""


def provenance_counts(runs: Any, calls: Any) -> dict[str, dict[str, dict[str, int]]]:
    """``{source: {field: {provenance: calls}}}`` of the folder's calls (only
    the provenances found)."""
    import pandas as pd

    if calls.empty:
        return {}
    source = calls["run_id"].map(dict(zip(runs["run_id"], runs["source"], strict=True)))
    table = pd.DataFrame.from_records(calls["provenance"].tolist(), index=calls.index,
                                      columns=list(PROVENANCE_FIELDS))
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, part in table.groupby(source.astype(str).to_numpy(), sort=True):
        out[str(name)] = {field: {str(k): int(v) for k, v in
                                  sorted(part[field].value_counts().items())}
                          for field in PROVENANCE_FIELDS}
    return out


def flags(runs: Any, calls: Any, conventions: dict[str, dict[str, dict[str, int]]]
          ) -> list[dict[str, Any]]:
    """What looks wrong in the data itself, each ``{"flag", "calls", "runs",
    "what", "fix"}`` (counts of calls and runs concerned; None where the
    flag is about runs only): output counts implausibly small for the
    content (:data:`OUTPUT_SHARE`), a cost of $0 recorded with tokens used,
    a cache convention the importer could not tell from the file (its
    ``UNDETERMINED`` notes in ``conventions``), calls with unknown usage."""
    out: list[dict[str, Any]] = []

    def flag(name: str, n_calls: int | None, n_runs: int, what: str, fix: str) -> None:
        if n_calls or n_runs:
            out.append({"flag": name, "calls": n_calls, "runs": n_runs, "what": what,
                        "fix": fix})

    run_ids = calls["run_id"].to_numpy(dtype=object)
    needed = (calls["text_tokens"].fillna(0).to_numpy(dtype=np.int64)
              + np.array([sum(approx_tokens(t["arguments"]) for t in tools)
                          for tools in calls["tool_calls"]], dtype=np.int64))
    output = calls["output_tokens"]
    small = (output.notna().to_numpy() & (needed > 0)
             & (output.fillna(0).to_numpy(dtype=np.float64) < OUTPUT_SHARE * needed))
    flag("output_too_small", int(small.sum()), len(set(run_ids[small])),
         f"output tokens below {OUTPUT_SHARE:g} of what the recorded text and tool-call "
         "arguments need (approx_tokens)",
         "the source's output counts look partial (a streaming export's first chunk?): "
         "re-export with each response's final usage, or have the importer mark "
         "output_tokens estimated")
    tokens = calls[list(TOKEN_COLUMNS)].fillna(0).sum(axis=1).to_numpy(dtype=np.int64) > 0
    free_calls = (calls["cost_usd"] == 0).fillna(False).to_numpy(dtype=bool) & tokens
    run_tokens = runs[list(TOKEN_COLUMNS)].sum(axis=1).to_numpy(dtype=np.int64) > 0
    free_runs = (runs["cost_usd"] == 0).fillna(False).to_numpy(dtype=bool) & run_tokens
    flag("zero_cost", int(free_calls.sum()), int(free_runs.sum()),
         "cost recorded as $0 although tokens were used",
         "a free tier, a self-hosted model or a price the exporter lacked: compare with "
         "catalogue prices (the cost lines above; replay --prices), or re-export with "
         "the cost filled in")
    undetermined = {(source, what): n for source, by_what in conventions.items()
                    for what, by_how in by_what.items()
                    for how, n in by_how.items() if how.startswith(UNDETERMINED)}
    if undetermined:
        shown = ", ".join(f"{source} {what}" for source, what in sorted(undetermined))
        why = sorted({how[len(UNDETERMINED):].lstrip(": ") for by_what in conventions.values()
                      for by_how in by_what.values() for how in by_how
                      if how.startswith(UNDETERMINED)})
        flag("cache_convention_undetermined", None, sum(undetermined.values()),
             f"how the provider's cache split the prompt cannot be told from the file "
             f"({shown}): " + "; ".join(why[:3]) + ("; ..." if len(why) > 3 else ""),
             "re-export with each call's cache read and write counts (or its billed cost), "
             "or check in the provider's documentation whether its input count includes "
             "cached tokens; until then cache shares, prices and money budgets may be off "
             "by the cached tokens")
    unknown = calls[list(TOKEN_COLUMNS)].isna().any(axis=1).to_numpy()
    flag("unknown_usage", int(unknown.sum()), len(set(run_ids[unknown])),
         "calls whose source records no usage (their token counts are null)",
         "they are left out of per-call statistics and calibration's token fits, and "
         "replay and tune refuse their runs; re-export with usage per model call")
    return out


def _prompt(calls: Any) -> np.ndarray:
    return (calls["input_tokens"].to_numpy(dtype=np.int64)
            + calls["cache_read_tokens"].to_numpy(dtype=np.int64)
            + calls["cache_write_tokens"].to_numpy(dtype=np.int64))


def _percentiles(values: np.ndarray) -> dict[str, int | float] | None:
    if values.size == 0:
        return None
    described = stats.describe(values)
    return {"p50": described["p50"], "p95": described["p95"]}


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def prompt_fit(run_ids: np.ndarray, index: np.ndarray, prompt: np.ndarray) -> dict[str, Any]:
    """Per-run least squares of ``prompt = P + h*n`` (calls sorted by run, then
    index ``n``): ``{"runs": fitted, "P": median, "h": median, "r2": median}``
    (None for no fitted run). Runs with fewer than :data:`MIN_FIT_CALLS` calls
    or a constant prompt are not fitted."""
    if run_ids.size == 0:
        return {"runs": 0, "P": None, "h": None, "r2": None}
    starts = np.flatnonzero(np.r_[True, run_ids[1:] != run_ids[:-1]])
    sizes = np.diff(np.r_[starts, run_ids.size])
    n = index.astype(np.float64)
    y = prompt.astype(np.float64)
    sums = {name: np.add.reduceat(values, starts) for name, values in
            (("n", n), ("y", y), ("nn", n * n), ("ny", n * y), ("yy", y * y))}
    k = sizes.astype(np.float64)
    snn = sums["nn"] - sums["n"] ** 2 / k
    sny = sums["ny"] - sums["n"] * sums["y"] / k
    syy = sums["yy"] - sums["y"] ** 2 / k
    fitted = (sizes >= MIN_FIT_CALLS) & (snn > 0) & (syy > 1e-9 * np.maximum(1.0, sums["yy"]))
    if not fitted.any():
        return {"runs": 0, "P": None, "h": None, "r2": None}
    h = sny[fitted] / snn[fitted]
    p = (sums["y"][fitted] - h * sums["n"][fitted]) / k[fitted]
    r2 = np.clip(sny[fitted] ** 2 / (snn[fitted] * syy[fitted]), 0.0, 1.0)
    return {"runs": int(fitted.sum()), "P": float(stats.percentile(p, 0.5)),
            "h": float(stats.percentile(h, 0.5)), "r2": float(stats.percentile(r2, 0.5))}


def _resolved(runs: Any) -> dict[str, Any]:
    known = runs["resolved"].dropna()
    return {"known": len(known), "share": float(known.mean()) if len(known) else None}


def cost_comparison(runs: Any, calls: Any) -> dict[str, Any]:
    """Recorded cost against catalogue prices, by run model (see the module)."""

    ids = runs["run_id"].tolist()
    run_model = dict(zip(ids, _values(runs["model"]), strict=True))
    started = dict(zip(ids, _values(runs["started_at"]), strict=True))
    recorded = {r: c for r, c in zip(ids, _values(runs["cost_usd"]), strict=True)
                if c is not None}
    priced: dict[str, float] = {}
    unpriced: set[str] = set()
    unknown: set[str] = set()
    missing: set[str] = set()
    listed: dict[tuple[str, str], Any] = {}  # (model, run): its catalogue prices at the run's start
    columns = ("run_id", "model", "input_tokens", "output_tokens", "cache_read_tokens",
               "cache_write_tokens", "reasoning_tokens")
    for run, model, inp, out, read, write, think in zip(
            *(_values(calls[c]) for c in columns), strict=True):
        if run not in recorded or run in unpriced or run in unknown:
            continue
        if None in (inp, out, read, write, think):  # usage not recorded: cannot be priced
            unknown.add(run)
            continue
        name = model if isinstance(model, str) else run_model[run]
        if isinstance(name, str) and (name, run) not in listed:
            listed[name, run] = _tiers(name, _moment(started[run]))
        tiers = listed[name, run] if isinstance(name, str) else None
        if tiers is None:
            unpriced.add(run)
            missing.add(name if isinstance(name, str) else "(unknown model)")
            continue
        priced[run] = priced.get(run, 0.0) + call_cost(tiers, Usage(inp, out, read, write,
                                                                       think))
    by_model: dict[str, dict[str, Any]] = {}
    for run, usd in priced.items():
        if run in unpriced or run in unknown:
            continue
        model = run_model[run] if isinstance(run_model[run], str) else "(unknown model)"
        entry = by_model.setdefault(model, {"runs": 0, "recorded_usd": 0.0,
                                            "catalogue_usd": 0.0})
        entry["runs"] += 1
        entry["recorded_usd"] += recorded[run]
        entry["catalogue_usd"] += usd
    for entry in by_model.values():
        entry["ratio"] = (entry["recorded_usd"] / entry["catalogue_usd"]
                          if entry["catalogue_usd"] else None)
    return {"by_model": dict(sorted(by_model.items())),
            "not_in_catalogue": sorted(missing),
            "runs_without_cost": len(runs) - len(recorded),
            "runs_with_unknown_usage": len(unknown)}


def one_price(runs: Any, calls: Any, listed: Listed | None = None,
              scenario: Prices | None = None) -> dict[str, Any]:
    """The ``price`` block (see the module) of the trace tables ``runs`` and
    ``calls`` (calls in run order; an unknown token count counts 0):
    :func:`sim.cost.recorded.run_prices` with ``listed`` (default: the
    catalogue on the newest run's start day) and ``scenario``."""
    started = [v for v in _values(runs["started_at"]) if v is not None]
    source = listed or catalogue(max(_day(v) for v in started) if started else _day(None))
    tokens = [_values(calls[c]) for c in ("input_tokens", "output_tokens", "cache_read_tokens",
                                          "cache_write_tokens", "reasoning_tokens")]
    usages = (None if None in counts else Usage(*(int(v) for v in counts))
              for counts in zip(*tokens, strict=True))
    models = [m if isinstance(m, str) and m else None for m in _values(calls["model"])]
    priced = run_prices(
        list(zip(runs["run_id"].tolist(), [m if isinstance(m, str) else "" for m in
                                            _values(runs["model"])],
                 [None if v is None else float(v) for v in _values(runs["cost_usd"])],
                 strict=True)),
        zip(calls["run_id"].tolist(), models, usages,
            [None if v is None else float(v) for v in _values(calls["cost_usd"])], strict=True),
        source, scenario)
    return {"usd": math.fsum(u for u in priced.usd if math.isfinite(u)),
            "by_basis": priced.by_basis(),
            "models": {m: {"basis": p.basis, "scale": p.scale}
                       for m, p in sorted(priced.models.items())},
            "runs": {r: [u if math.isfinite(u) else None, b] for r, u, b in zip(
                runs["run_id"].tolist(), priced.usd, priced.basis, strict=True)}}


def _values(column: Any) -> list:
    """A column as a list with missing values (NA, NaN, NaT) as None."""
    import pandas as pd

    return [None if pd.isna(v) else v for v in column.tolist()]


def _day(moment: Any) -> date:
    """The day of the prices (:func:`sim.cost.prices.prices_day`) of ``moment``
    (a timestamp; None: today)."""
    return prices_day(_moment(moment))


def _moment(moment: Any) -> date:
    """A run's start ``moment`` (a timestamp) as the instant its catalogue
    prices are read at (a time-of-day price: the one its calls were billed
    at), today's prices' day when it is unknown (None)."""
    if moment is None:
        return prices_day()
    return moment.to_pydatetime() if hasattr(moment, "to_pydatetime") else moment


def _tiers(model: str, when: date) -> Any:
    """Catalogue price tiers of ``model`` at ``when`` (an instant or a day),
    or None when not found (``provider/model`` names are tried as a provider
    and a model too)."""
    return catalogue(when)(model)


def _report(folder: Path) -> dict[str, Any] | None:
    """The folder's import report as JSON (None: no report)."""
    path = folder / REPORT_FILE
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > 64 * 2**20:
            raise ValueError("too large")
        report = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise ValueError("not an object")
        return report
    except (ValueError, RecursionError, OSError):
        raise InputError("not a valid import report", source=str(path)) from None


def _conventions(folder: Path, report: dict[str, Any] | None
                 ) -> dict[str, dict[str, dict[str, int]]]:
    """``{source: {what: {how: runs}}}`` from the import report (empty: none,
    or a report written before conventions were counted)."""
    if report is None:
        return {}
    try:
        return {str(source): {str(what): {str(how): int(n) for how, n in by_how.items()}
                              for what, by_how in by_what.items()}
                for source, by_what in report.get("conventions", {}).items()}
    except (ValueError, TypeError, AttributeError):
        raise InputError("not a valid import report", source=str(folder / REPORT_FILE),
                         path="conventions") from None


def _skipped(folder: Path, report: dict[str, Any] | None
             ) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """``(skipped, repaired)`` from the folder's import report (None: no report)."""
    if report is None:
        return None
    path = folder / REPORT_FILE
    try:
        files, runs = report["skipped_files"], report["skipped_runs"]
        skipped = {"files": {"count": int(files["count"]),
                             "by_reason": _by_count(files["by_reason"])},
                   "runs": {"count": int(runs["count"]),
                            "by_reason": _by_count(runs["by_reason"])}}
        repairs = report.get("repairs")
        repaired = None if repairs is None else {
            "count": int(repairs["count"]),
            "by_field": {str(name): _by_count(by_reason) for name, by_reason in
                         sorted(repairs["by_field"].items())}}
        return skipped, repaired
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OSError):
        raise InputError("not a valid import report", source=str(path)) from None


def _by_count(by_reason: dict[str, int]) -> dict[str, int]:
    counted = {str(k): int(v) for k, v in by_reason.items()}
    return dict(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as text for the terminal."""
    def num(value: Any, digits: int = 0) -> str:
        if value is None:
            return "-"
        return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"

    s, fit, cache = summary["steps"], summary["prompt_fit"], summary["cache"]
    out = summary["output_per_call"] or {"p50": None, "p95": None}
    resolved = summary["resolved"]
    sources = ", ".join(f"{n} {k}" for k, n in summary["runs_by_source"].items())
    lines = [f"warning: {line}" for line in summary.get("warnings", [])]
    if summary.get("where"):
        lines.append(f"slice: {' '.join('--where ' + w for w in summary['where'])} "
                     f"({num(summary['runs'])} of {num(summary['runs_in_folder'])} runs)")
    lines += [
        f"runs {num(summary['runs'])} ({sources}), calls {num(summary['calls'])}",
        f"steps per run        p50 {num(s['p50'])}  p95 {num(s['p95'])}  max {num(s['max'])}",
        f"prompt(n) = P + h*n  P {num(fit['P'])}  h {num(fit['h'])}  "
        f"R^2 {num(fit['r2'], 3)} (medians over {fit['runs']} runs)",
        f"output per call      p50 {num(out['p50'])}  p95 {num(out['p95'])}",
        f"cache share          read {_pct(cache['read_share'])}  "
        f"write {_pct(cache['write_share'])} of {num(cache['prompt_tokens'])} prompt tokens",
        f"resolved             {_pct(resolved['share'])} of {resolved['known']} runs "
        "with a known outcome",
        "exit                 " + ", ".join(f"{k} {_pct(v)}" for k, v in
                                            summary["exit"].items()),
    ]
    price = summary.get("price")
    if price:
        counts = {b: int(e["runs"]) for b, e in price["by_basis"].items()}
        lines.append(f"price                ${price['usd']:,.2f} over the runs with a price; "
                     + basis_line(counts))
    cost = summary["cost"]
    for model, entry in cost["by_model"].items():
        lines.append(f"cost {model}: recorded ${entry['recorded_usd']:,.2f}, catalogue "
                     f"${entry['catalogue_usd']:,.2f} ({entry['runs']} runs, ratio "
                     f"{num(entry['ratio'], 2)})")
    if cost.get("runs_with_unknown_usage"):
        lines.append(f"cost: {cost['runs_with_unknown_usage']:,} runs with calls of unknown "
                     "usage not priced")
    if cost["not_in_catalogue"]:
        lines.append("not in the price catalogue: " + ", ".join(cost["not_in_catalogue"]))
    skipped = summary.get("skipped")
    if skipped:
        for noun in ("files", "runs"):
            part = skipped[noun]
            if part["count"]:
                reasons = ", ".join(f"{n} {r}" for r, n in part["by_reason"].items())
                lines.append(f"skipped {part['count']} {noun}: {reasons}")
    repaired = summary.get("repaired")
    if repaired and repaired["count"]:
        lines.append(f"repaired {repaired['count']:,} impossible values (runs kept):")
        for name, by_reason in repaired["by_field"].items():
            reasons = ", ".join(f"{n:,} {r}" for r, n in by_reason.items())
            lines.append(f"  {name}: {reasons}")
    for found in summary.get("flags", []):
        counted = ", ".join(part for part in (
            None if found["calls"] is None else f"{found['calls']:,} calls",
            f"{found['runs']:,} runs") if part)
        lines.append(f"check: {found['what']} ({counted})")
        lines.append(f"  fix: {found['fix']}")
    return "\n".join(lines)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"
