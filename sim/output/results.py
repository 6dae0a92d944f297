"""Results of a sweep on disk: Parquet rows, summary.json and a Markdown report.

DESIGN.md "Results": one row per task (:class:`~sim.task_record.TaskRecord`) in
``results.parquet``; one summary per cell in ``summary.json``; a readable
``report.md``. Every file is written atomically (a temporary file in the same
directory, flushed, fsynced, then renamed over the target), so a reader never
sees half a file and a failure never clobbers the previous one. The same
records give the same bytes: Parquet without the pandas index or metadata and
with fixed compression; JSON with sorted keys and ``repr`` floats.

Percentiles follow :mod:`sim.analysis.stats` (an observed value at rank floor(q*n)).
Units: tokens are counts, cost is USD, times are seconds, shares are in [0, 1].
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.analysis import stats
from sim.output.stream import fsync_dir
from sim.task_record import FALSE_SUCCESS, RECORD_FIELDS, TaskRecord

PARQUET_NAME = "results.parquet"
SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.md"
TIMESERIES_NAME = "timeseries.parquet"
DEFAULT_TITLE = "Simulation results"
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
FILE_MODE = 0o644

_DTYPES = {"int": "int64", "float": "float64", "bool": "bool", "str": "string"}
_ARROW = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(),
          "string": pa.string(), "str": pa.string(), "object": pa.string(),
          "Int64": pa.int64(), "Float64": pa.float64(), "boolean": pa.bool_()}
_MEANS = ("retries", "nudges", "verifier_rejections", "compactions")
_OUTCOME_WIDTH = 26


def record_dtypes() -> dict[str, str]:
    """``{field: pandas dtype}`` for every field of :class:`TaskRecord`, in
    ``RECORD_FIELDS`` order (int64, float64, bool or string)."""
    hints = typing.get_type_hints(TaskRecord)
    out = {}
    for name in RECORD_FIELDS:
        hint = getattr(hints[name], "__name__", str(hints[name]))
        if hint not in _DTYPES:
            raise TypeError(f"TaskRecord.{name}: no column dtype for type {hints[name]!r}")
        out[name] = _DTYPES[hint]
    return out


def records_frame(records: list[TaskRecord]) -> pd.DataFrame:
    """One row per record, columns in ``RECORD_FIELDS`` order with explicit
    dtypes (:func:`record_dtypes`), a default RangeIndex, rows in given order."""
    return pd.DataFrame({
        name: pd.Series([getattr(r, name) for r in records], dtype=dtype)
        for name, dtype in record_dtypes().items()
    })


def table_frame(table: pa.Table) -> pd.DataFrame:
    """The rows of a records table (:data:`sim.output.table.RECORD_SCHEMA`) as
    :func:`records_frame` gives them for the same records: the same columns,
    dtypes and RangeIndex."""
    return table.to_pandas().astype(record_dtypes())


# ---------------------------------------------------------------- summaries

def _prompt_tokens(frame: pd.DataFrame) -> np.ndarray:
    """Per-task prompt tokens: input + cache read + cache write."""
    return (frame["input_tokens"] + frame["cache_read_tokens"]
            + frame["cache_write_tokens"]).to_numpy(dtype=np.int64)


def _cache_hit_share(frame: pd.DataFrame) -> float:
    """Cache-read tokens over all prompt tokens of the cell (0.0 when none)."""
    prompt = int(_prompt_tokens(frame).sum())
    return int(frame["cache_read_tokens"].sum()) / prompt if prompt else 0.0


def _plain(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as plain JSON values (tuples as lists, numpy scalars as
    numbers), so the summary in memory equals the one read back from disk."""
    return json.loads(json_bytes(dict(params)))


def cell_summary(name: str, params: dict, frame: pd.DataFrame) -> dict[str, Any]:
    """The summary.json entry of one cell, from the rows of that cell.

    Keys: ``name``, ``params``, ``tasks``; ``outcomes`` ({outcome: share},
    largest first) and ``outcome_counts`` ({outcome: tasks}); ``steps``,
    ``input_tokens`` (prompt tokens: input + cache read + cache write),
    ``output_tokens``, ``thinking_tokens`` and ``wall_s`` (seconds), each
    :func:`sim.analysis.stats.describe` (p50, p95, max, mean); ``cost``
    (:func:`sim.analysis.stats.cost_summary`, USD); ``cache_hit_share`` (cache-read
    over prompt tokens); and ``retries_mean``, ``nudges_mean``,
    ``verifier_rejections_mean``, ``compactions_mean`` (per task). ``params``
    is converted to plain JSON values.
    """
    if len(frame) == 0:
        raise ValueError(f"cell {name!r} has no tasks to summarise")
    outcomes = frame["outcome"].tolist()
    summary: dict[str, Any] = {
        "name": name,
        "params": _plain(params),
        "tasks": len(frame),
        "outcomes": stats.outcome_shares(outcomes),
        "outcome_counts": stats.outcome_counts(outcomes),
        "steps": stats.describe(frame["steps"].to_numpy()),
        "input_tokens": stats.describe(_prompt_tokens(frame)),
        "output_tokens": stats.describe(frame["output_tokens"].to_numpy()),
        "thinking_tokens": stats.describe(frame["thinking_tokens"].to_numpy()),
        "cost": stats.cost_summary(frame["cost_usd"].to_numpy()),
        "wall_s": stats.describe(frame["wall_s"].to_numpy(dtype=np.float64)),
        "cache_hit_share": _cache_hit_share(frame),
    }
    for column in _MEANS:
        summary[f"{column}_mean"] = stats.describe(frame[column].to_numpy())["mean"]
    return summary


# ----------------------------------------------------------- atomic writers

def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same
    directory, flushed and fsynced, then ``os.replace``-d over ``path`` (mode
    0644). On any failure the temporary file is removed and ``path`` keeps its
    previous content; a full or read-only disk is an InputError saying so
    (:func:`sim.output.folder.disk_errors`)."""
    from sim.output.folder import disk_errors

    target = Path(path)
    with disk_errors(target, f"{target.name} is as it was"):
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, FILE_MODE)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(target.parent)


PROVENANCE_KEY = b"sim.provenance"
"""Parquet schema metadata key holding the provenance (JSON, :mod:`sim.output.provenance`)."""


def _arrow_table(frame: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> pa.Table:
    """``frame`` as an Arrow table with a fixed schema and no metadata but
    ``metadata`` (JSON under :data:`PROVENANCE_KEY`): no pandas index, no
    pandas or library versions."""
    fields = []
    for name, dtype in frame.dtypes.items():
        key = str(dtype)
        if key not in _ARROW:
            raise TypeError(f"column {name!r}: no Parquet type for dtype {key}")
        fields.append(pa.field(str(name), _ARROW[key]))
    schema = pa.schema(fields)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = None if metadata is None else {PROVENANCE_KEY: json_bytes(dict(metadata))}
    return table.cast(schema).replace_schema_metadata(extra)


def parquet_bytes(frame: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> bytes:
    """The Parquet file of ``frame`` (with ``metadata`` as its provenance):
    identical bytes for identical input."""
    buffer = io.BytesIO()
    pq.write_table(_arrow_table(frame, metadata), buffer, compression=PARQUET_COMPRESSION,
                   compression_level=PARQUET_COMPRESSION_LEVEL, version="2.6")
    return buffer.getvalue()


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame,
                  metadata: Mapping[str, Any] | None = None) -> None:
    """Write ``frame`` to ``path`` as Parquet, atomically, deterministic bytes."""
    write_atomic(path, parquet_bytes(frame, metadata))


def read_provenance(path: str | os.PathLike) -> dict[str, Any] | None:
    """The provenance in a Parquet file's metadata (None when it has none)."""
    metadata = pq.read_schema(path).metadata or {}
    raw = metadata.get(PROVENANCE_KEY)
    return None if raw is None else json.loads(raw)


def _json_default(value: Any) -> Any:
    """JSON for numpy scalars and arrays and paths; anything else is an error."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_bytes(obj: Any) -> bytes:
    """UTF-8 JSON: sorted keys, indent 2, trailing newline, ``repr`` floats
    (shortest round-trip, stable); NaN and infinities are refused."""
    text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False,
                      default=_json_default)
    return (text + "\n").encode("utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` to ``path`` as JSON (:func:`json_bytes`), atomically."""
    write_atomic(path, json_bytes(obj))


# ------------------------------------------------------------------ tables

def _counts(cell: Mapping[str, Any]) -> dict[str, int]:
    """Exact outcome counts of a cell, largest first then by name (from
    ``outcome_counts``, else rounded from shares)."""
    counts = cell.get("outcome_counts")
    if counts is None:
        counts = {k: round(v * cell["tasks"]) for k, v in cell["outcomes"].items()}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def format_table(cell: Mapping[str, Any]) -> str:
    """The terminal table of one cell, shaped like seed 001's output (no
    trailing newline): outcomes with counts and percent shares, steps and
    prompt tokens (p50, p95, max), cost per task (mean, p95, max) and total
    spend in USD."""
    n = cell["tasks"]
    counts = _counts(cell)
    width = max([_OUTCOME_WIDTH, *(len(k) + 2 for k in counts)])
    steps, tokens, cost = cell["steps"], cell["input_tokens"], cell["cost"]
    lines = [f"== {cell['name']}, {n} tasks"]
    lines += [f"  {k:<{width}}{c:>6}  {100 * c / n:5.1f}%" for k, c in counts.items()]
    lines += [
        f"  steps          p50 {steps['p50']:>4}  p95 {steps['p95']:>4}  max {steps['max']:>4}",
        f"  input tokens   p50 {tokens['p50']:>9,}  p95 {tokens['p95']:>9,}"
        f"  max {tokens['max']:>10,}",
        f"  cost per task  mean ${cost['mean']:.2f}  p95 ${cost['p95']:.2f}"
        f"  max ${cost['max']:.2f}",
        f"  total spend    ${cost['total']:,.0f}",
    ]
    if cell.get("cache_hit_share"):
        lines.append(f"  cache hits     {100 * cell['cache_hit_share']:.1f}% of prompt tokens")
    if "capacity" in cell:
        lines.append(f"  capacity       {littles_law_text(cell['capacity'].get('littles_law'))}")
    return "\n".join(lines)


def littles_law_text(law: Mapping[str, Any] | None) -> str:
    """Little's law over the steady window in one line (see
    :func:`sim.analysis.capacity.littles_law`)."""
    if not law:
        return "Little's law: no steady-state window (every task arrives at once)"
    verdict = {True: "holds", False: "FAILS", None: "not checked (no steady state)"}[
        law["holds"]]
    return (f"Little's law {verdict}: L {law['L']:.3f} vs lambda W {law['lambda_W']:.3f} "
            f"({law['rate_source']} rate {law['arrival_rate_per_s']:.4g}/s x W "
            f"{law['W_s']:,.1f} s), error {100 * law['error']:+.2f}% (tolerance "
            f"{100 * law['tolerance']:.2f}%) over {law['tasks']:,} arrivals")


def _holds(value: bool | None) -> str:
    return {True: "holds", False: "**fails**",
            None: "not checked: no steady state, the queue grows through the window, so "
                  "L and lambda W need not agree"}[value]


def comparison_rows(cells: list[Mapping[str, Any]]) -> list[str]:
    """Markdown table comparing cells: succeeded share, mean and p95 cost, and
    their change against the first cell."""
    base = cells[0]
    rows = ["| cell | succeeded | mean cost | vs first | p95 cost | vs first | cache hits |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        mean, p95 = cell["cost"]["mean"], cell["cost"]["p95"]
        rows.append(
            f"| {cell['name']} | {100 * cell['outcomes'].get('succeeded', 0.0):.1f}% "
            f"| ${mean:,.2f} | {_change(mean, base['cost']['mean'])} "
            f"| ${p95:,.2f} | {_change(p95, base['cost']['p95'])} "
            f"| {100 * cell.get('cache_hit_share', 0.0):.1f}% |")
    return rows


def format_comparison(cells: list[Mapping[str, Any]]) -> str:
    """The terminal table comparing a sweep's cells (no trailing newline):
    succeeded share, mean and p95 cost per task (USD) and their change
    against the first cell."""
    width = max(len("cell"), *(len(str(c["name"])) for c in cells))
    base = cells[0]["cost"]
    lines = [f"== {len(cells)} cells compared (changes against the first)",
             f"  {'cell':<{width}}  succeeded  mean cost   change   p95 cost   change"]
    for cell in cells:
        mean, p95 = cell["cost"]["mean"], cell["cost"]["p95"]
        succeeded = 100 * cell["outcomes"].get("succeeded", 0.0)
        lines.append(f"  {cell['name']:<{width}}  {succeeded:8.1f}%"
                     f"  {'$' + format(mean, ',.2f'):>9}  {_change(mean, base['mean']):>7}"
                     f"  {'$' + format(p95, ',.2f'):>9}  {_change(p95, base['p95']):>7}")
    return "\n".join(lines)


def _change(value: float, base: float) -> str:
    return "n/a" if base == 0 else f"{100 * (value - base) / base:+.1f}%"


def capacity_rows(capacity: Mapping[str, Any]) -> list[str]:
    """Markdown table of a DES cell's capacity measurements (see sim.analysis.capacity)."""
    util = capacity["utilisation"]
    busy = capacity["mean_busy"]
    queue, model = capacity["queue_wait_s"], capacity["model_wait_s"]
    rows = ["| measure | value |", "|---|---:|",
            f"| horizon (s): first arrival to the last task's end | "
            f"{capacity['horizon_s']:,.1f} |",
            f"| tasks / horizon (tasks/s): below the arrival rate, since the horizon "
            f"includes the drain after the last arrival | {capacity['arrival_rate_per_s']:.5f} |",
            f"| L, time-average tasks in system over the horizon (drain included) | "
            f"{capacity['L']:.3f} |",
            f"| W, mean time in system (s) | {capacity['W_s']:,.1f} |"]
    law = capacity.get("littles_law")
    if law:
        low, high = law["window_quantiles"]
        rows += [f"| steady window (s): arrivals {100 * low:g}th to {100 * high:g}th "
                 f"percentile | {law['window_s'][0]:,.0f} to "
                 f"{law['window_s'][1]:,.0f} ({law['tasks']:,} arrivals) |",
                 f"| Little's law: L vs lambda W ({law['rate_source']} rate) | "
                 f"{law['L']:.3f} vs {law['lambda_W']:.3f}: error {100 * law['error']:+.2f}% "
                 f"(tolerance {100 * law['tolerance']:.2f}%, {_holds(law['holds'])}) |",
                 f"| sandbox queue: L_q vs lambda W_q (W_q {law['W_q_s']:,.1f} s) | "
                 f"{law['L_q']:.3f} vs {law['lambda_W_q']:.3f}: error "
                 f"{100 * law['queue_error']:+.2f}% (tolerance "
                 f"{100 * law['queue_tolerance']:.2f}%, {_holds(law['queue_holds'])}) |"]
    else:
        rows.append("| Little's law | no steady-state window (every task arrives at once) |")
    for pool in ("model_slots", "sandboxes"):
        label = pool.replace("_", " ")
        value = f"{100 * util[pool]:.1f}%" if util[pool] is not None else "unlimited"
        rows.append(f"| {label}: utilisation / mean busy | {value} / {busy[pool]:.2f} |")
    if queue:
        rows.append(f"| sandbox queueing p50 / p95 / max (s) | {queue['p50']:,.1f} / "
                    f"{queue['p95']:,.1f} / {queue['max']:,.1f} |")
        rows.append(f"| model-slot waiting per task p50 / p95 / max (s) | {model['p50']:,.1f} "
                    f"/ {model['p95']:,.1f} / {model['max']:,.1f} |")
    rows.append(f"| calls answered 429 by the rate limits | {capacity['rate_limited_calls']} |")
    rows.append(f"| longest 5% of tasks: share of sandbox time | "
                f"{100 * capacity['tail_share_5pct']:.1f}% |")
    return rows


# ------------------------------------------------------------------ report

_REPORT_NOTES = f"""\
Percentiles are observed values: p_q is the value at 0-based rank floor(q*n) (clamped to n-1)
of the sorted sample of n tasks, so p50 of an even-sized sample is the upper median and max is
p100. "input tokens" are prompt tokens (input + cache read + cache write). Costs are in USD and
times in seconds. Share intervals are 95% Wilson score intervals.

Outcome labels are `state:reason` (for example `needs_human:no_progress`,
`budget_exhausted:tokens`, `failed:context_overflow`), except `succeeded` (verified, or claimed
and truly done) and `{FALSE_SUCCESS}` (claimed, accepted and not truly done, which only a
simulation can see).
"""


def _outcome_rows(cell: Mapping[str, Any]) -> list[str]:
    """Markdown table of outcomes: tasks, share and its 95% Wilson interval."""
    n = cell["tasks"]
    rows = ["| outcome | tasks | share | 95% interval |", "|---|---:|---:|---:|"]
    for outcome, count in _counts(cell).items():
        low, high = stats.share_ci(count, n)
        rows.append(f"| `{outcome}` | {count} | {100 * count / n:.1f}% "
                    f"| {100 * low:.1f}% to {100 * high:.1f}% |")
    return rows


def _metric_rows(cell: Mapping[str, Any]) -> list[str]:
    """Markdown table of distributions: p50, p95, max and mean."""
    rows = ["| per task | p50 | p95 | max | mean |", "|---|---:|---:|---:|---:|"]
    for key, label, fmt in (("steps", "steps", ","), ("input_tokens", "input tokens", ","),
                            ("output_tokens", "output tokens", ","),
                            ("wall_s", "wall time (s)", ",.1f"), ("cost", "cost (USD)", ",.2f")):
        if key not in cell:
            continue
        d = cell[key]
        values = [format(d[k], fmt) for k in ("p50", "p95", "max")]
        rows.append(f"| {label} | {' | '.join(values)} | {d['mean']:,.2f} |")
    return rows


def _cell_section(cell: Mapping[str, Any]) -> str:
    """The report section of one cell: terminal table, params, tables, means."""
    params = json.dumps(cell.get("params", {}), sort_keys=True, default=_json_default)
    means = ", ".join(f"{k.removesuffix('_mean').replace('_', ' ')} {cell[k]:.2f}"
                      for k in (f"{m}_mean" for m in _MEANS) if k in cell)
    parts = [
        f"## {cell['name']}",
        f"Parameters: `{params}`",
        f"```text\n{format_table(cell)}\n```",
        "\n".join(_outcome_rows(cell)),
        "\n".join(_metric_rows(cell)),
        f"Total spend ${cell['cost']['total']:,.2f}; cache hit share "
        f"{100 * cell.get('cache_hit_share', 0.0):.1f}%; means per task: {means}.",
    ]
    if "capacity" in cell:
        parts += ["### Capacity", "\n".join(capacity_rows(cell["capacity"]))]
    return "\n\n".join(parts)


def report_markdown(summary: Mapping[str, Any], title: str, lead: str = "") -> str:
    """The Markdown report of every cell in ``summary`` (the summary.json
    dict), the answer first: ``lead`` (Markdown: a verdict or headline), the
    sizing answer of a sized cell, the table comparing the cells (more than
    one), then one section per cell; after them the settings (the
    description, and the resolved settings and overrides from the provenance,
    so they follow ``--set``, with a single cell's own parameters applied:
    the capacity it really ran with) and the definitions."""
    from sim.output.describe import provenance_lines

    cells = summary["cells"]
    parts = [f"# {title}"]
    if lead.strip():
        parts.append(lead.strip())
    parts += [sizing_markdown(c["sizing"], c["name"] if len(cells) > 1 else "")
              for c in cells if c.get("sizing")]
    if len(cells) > 1:
        parts += ["## Cells compared", "\n".join(comparison_rows(cells))]
    parts += [_cell_section(c) for c in cells]
    about = [summary["description"].strip()] if summary.get("description") else []
    params = cells[0].get("params") if len(cells) == 1 else None
    settings = "\n".join(provenance_lines(summary.get("provenance"), params))
    parts += ["## Settings", *about, *([settings] if settings else []),
              f"{len(cells)} cell(s).", "## Definitions", _REPORT_NOTES.strip()]
    return "\n\n".join(parts) + "\n"


def sizing_markdown(sizing: Mapping[str, Any], cell: str = "") -> str:
    """The capacity sizing answer (``capacity --target-p95-wait``) as a
    report section: the sized pools first, then the probes that found them
    (worst tenant's p95 waits, seconds)."""
    name = f" ({cell})" if cell else ""
    target = sizing["target_p95_wait_s"]
    lines = [f"## Sizing{name}",
             f"**{sizing['sandboxes']} sandboxes and {sizing['model_slots']} model slots** "
             f"are the fewest that keep the p95 wait at or under {target:g} s, over all tasks "
             f"and for every tenant ({sizing['runs']} simulations). The cell below ran with "
             "them.", "",
             "| sandboxes | model slots | p95 sandbox wait (s) | p95 model wait (s) |",
             "|---:|---:|---:|---:|"]
    for probe in sizing.get("probes", []):
        worst = {key: max([probe[key], *(t[key] for t in probe.get("tenants", {}).values())])
                 for key in ("sandbox_wait_p95_s", "model_wait_p95_s")}
        lines.append(f"| {_pool(probe['sandboxes'])} | {_pool(probe['model_slots'])} "
                     f"| {worst['sandbox_wait_p95_s']:,.1f} | {worst['model_wait_p95_s']:,.1f} |")
    return "\n".join(lines)


def _pool(value: Any) -> str:
    return "unlimited" if value is None else f"{value:,}"


def write_report(path: str | os.PathLike, summary: Mapping[str, Any], title: str,
                 lead: str = "") -> None:
    """Write the Markdown report of ``summary`` to ``path``, atomically."""
    write_atomic(path, report_markdown(summary, title, lead).encode("utf-8"))


# ----------------------------------------------------------------- results

def timeseries_frame(series_by_cell: Mapping[str, Mapping[str, tuple[Any, Any]]]
                     ) -> pd.DataFrame:
    """Long table of DES time series: cell, series, bin start (seconds) and
    the time-average value over the bin."""
    parts = []
    for cell, series in series_by_cell.items():
        for name, (times, values) in series.items():
            parts.append(pd.DataFrame({"cell": cell, "series": name,
                                       "time_s": np.asarray(times, dtype="float64"),
                                       "value": np.asarray(values, dtype="float64")}))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        {"cell": [], "series": [], "time_s": [], "value": []})
    return frame.astype({"cell": "string", "series": "string", "time_s": "float64",
                         "value": "float64"})


def _cell_records(name: str, records: list[TaskRecord]) -> list[TaskRecord]:
    """A cell's records sorted by task index; every record must belong to the
    cell and each task index must appear once."""
    wrong = sorted({r.cell for r in records if r.cell != name})
    if wrong:
        raise ValueError(f"cell {name!r} holds records of other cells: {wrong}")
    ordered = sorted(records, key=lambda r: r.task)
    tasks = [r.task for r in ordered]
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"cell {name!r} has duplicate task indices")
    return ordered


def write_results(out_dir: str | os.PathLike, records_by_cell: dict[str, list[TaskRecord]],
                  params_by_cell: dict[str, dict], *, title: str = DEFAULT_TITLE,
                  extras_by_cell: Mapping[str, Mapping[str, Any]] | None = None,
                  timeseries: pd.DataFrame | None = None, seed: int | None = None,
                  description: str = "", provenance: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """Write ``results.parquet`` (every task of every cell: cells in given
    order, tasks by index), ``summary.json`` (``{"cells": [...]}`` of
    :func:`cell_summary`) and ``report.md`` (headed ``title``) into
    ``out_dir`` (created if needed), each atomically; return the summary dict
    (equal to what summary.json holds; outcomes ordered largest first). No
    file depends on ``out_dir``'s name, so runs can be compared byte for byte.
    ``extras_by_cell`` adds sections to cells' summaries (a DES cell's
    ``capacity``); ``timeseries`` is written as ``timeseries.parquet``;
    ``seed``, the root seed of the task streams, is recorded in every cell so a
    later comparison knows whether two folders ran the same tasks;
    ``description`` (what the scenario models and shows) heads the report and
    is kept in the summary; ``provenance`` (:mod:`sim.output.provenance`: the
    resolved scenario, overrides, seed, version, prices date) goes into the
    summary, the Parquet files' metadata and the report."""
    if set(records_by_cell) != set(params_by_cell):
        raise ValueError("records_by_cell and params_by_cell name different cells: "
                         f"{sorted(set(records_by_cell) ^ set(params_by_cell))}")
    frames, cells = [], []
    for name, records in records_by_cell.items():
        frame = records_frame(_cell_records(name, records))
        summary_of_cell = cell_summary(name, params_by_cell[name], frame)
        if seed is not None:
            summary_of_cell["seed"] = seed
        summary_of_cell.update((extras_by_cell or {}).get(name, {}))
        cells.append(summary_of_cell)
        frames.append(frame)
    everything = pd.concat(frames, ignore_index=True) if frames else records_frame([])
    summary: dict[str, Any] = {"cells": cells}
    if description:
        summary["description"] = description
    if provenance is not None:
        summary["provenance"] = json.loads(json_bytes(dict(provenance)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / PARQUET_NAME, everything, provenance)
    if timeseries is not None:
        write_atomic(out / TIMESERIES_NAME, parquet_bytes(timeseries, provenance))
    write_json(out / SUMMARY_NAME, summary)
    write_report(out / REPORT_NAME, summary, title=title)
    return summary


SUMMARY_COLUMNS = ("cell", "outcome", "steps", "input_tokens", "cache_read_tokens",
                   "cache_write_tokens", "output_tokens", "thinking_tokens", "cost_usd", "wall_s",
                   *_MEANS)
"""The columns :func:`cell_summary` and the HTML report's figures read."""


def parquet_metadata(provenance: Mapping[str, Any] | None) -> dict[bytes, bytes] | None:
    """The schema metadata results.parquet carries (the provenance as JSON)."""
    return None if provenance is None else {PROVENANCE_KEY: json_bytes(dict(provenance))}


def summary_rows(path: str | os.PathLike) -> pd.DataFrame:
    """The :data:`SUMMARY_COLUMNS` of a results.parquet, rows in file order
    (what summaries and figures need, without the rest of every record)."""
    table = pq.read_table(path, columns=list(SUMMARY_COLUMNS))
    # the Arrow columns are freed as they convert; strings as categories (a few codes)
    return table.to_pandas(strings_to_categorical=True, split_blocks=True, self_destruct=True)


def write_streamed_results(out_dir: str | os.PathLike, streamed: str | os.PathLike,
                           cells: list[tuple[str, int]], params_by_cell: dict[str, dict], *,
                           title: str = DEFAULT_TITLE,
                           extras_by_cell: Mapping[str, Mapping[str, Any]] | None = None,
                           timeseries: pd.DataFrame | None = None, seed: int | None = None,
                           description: str = "", provenance: Mapping[str, Any] | None = None
                           ) -> tuple[dict[str, Any], pd.DataFrame]:
    """:func:`write_results` for records already streamed to a Parquet file
    (:mod:`sim.output.stream`; cells in order of ``cells``, ``[(name,
    tasks)]``, tasks by index): the file is moved into ``out_dir`` as
    results.parquet, and the summary is computed from its
    :data:`SUMMARY_COLUMNS` read back, so no record object is ever built.
    Returns the summary and those rows (for the HTML report)."""
    if [name for name, _ in cells] != list(params_by_cell):
        raise ValueError("cells and params_by_cell name different cells")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / PARQUET_NAME
    os.replace(streamed, target)
    rows = summary_rows(target)
    if len(rows) != sum(n for _, n in cells):
        raise ValueError(f"{target} holds {len(rows)} rows, not the "
                         f"{sum(n for _, n in cells)} tasks of the sweep")
    summaries, start = [], 0
    for name, tasks in cells:
        frame = rows.iloc[start:start + tasks]
        start += tasks
        if (frame["cell"] != name).any():
            raise ValueError(f"{target}: the rows of cell {name!r} are not where expected")
        summary_of_cell = cell_summary(name, params_by_cell[name], frame)
        if seed is not None:
            summary_of_cell["seed"] = seed
        summary_of_cell.update((extras_by_cell or {}).get(name, {}))
        summaries.append(summary_of_cell)
    summary: dict[str, Any] = {"cells": summaries}
    if description:
        summary["description"] = description
    if provenance is not None:
        summary["provenance"] = json.loads(json_bytes(dict(provenance)))
    if timeseries is not None:
        write_atomic(out / TIMESERIES_NAME, parquet_bytes(timeseries, provenance))
    write_json(out / SUMMARY_NAME, summary)
    write_report(out / REPORT_NAME, summary, title=title)
    return summary, rows
