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

import json
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.analysis import stats
from sim.analysis.fanout import rows_summary
from sim.output.files import (
    PROVENANCE_KEY,
    json_bytes,
    parquet_bytes,
    read_provenance,
    write_atomic,
    write_json,
    write_parquet,
)
from sim.output.markdown import SUMMARY_MEANS as _MEANS
from sim.output.markdown import report_markdown, write_report
from sim.output.terminal import format_comparison, format_table
from sim.task_record import CHILDREN_FIELDS, TaskRecord, record_fields

__all__ = [
    "DEFAULT_TITLE", "PARQUET_NAME", "PROVENANCE_KEY", "REPORT_NAME", "SUMMARY_COLUMNS",
    "SUMMARY_NAME", "TIMESERIES_NAME", "cell_summary", "folder_summary", "format_comparison",
    "format_table", "json_bytes", "parquet_bytes", "parquet_metadata", "read_provenance",
    "record_dtypes", "records_frame", "report_markdown", "summary_rows", "table_frame",
    "timeseries_frame", "write_atomic", "write_json", "write_parquet", "write_report",
    "write_results", "write_streamed_results"]

PARQUET_NAME = "results.parquet"
SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.md"
TIMESERIES_NAME = "timeseries.parquet"
DEFAULT_TITLE = "Simulation results"

_DTYPES = {"int": "int64", "float": "float64", "bool": "bool", "str": "string"}


def record_dtypes(children: bool = False) -> dict[str, str]:
    """``{field: pandas dtype}`` for every column of a results table
    (:func:`sim.task_record.record_fields`: with ``children``, the subagent
    columns too), in order (int64, float64, bool or string)."""
    hints = typing.get_type_hints(TaskRecord)
    out = {}
    for name in record_fields(children):
        hint = getattr(hints[name], "__name__", str(hints[name]))
        if hint not in _DTYPES:
            raise TypeError(f"TaskRecord.{name}: no column dtype for type {hints[name]!r}")
        out[name] = _DTYPES[hint]
    return out


def records_frame(records: list[TaskRecord], children: bool = False) -> pd.DataFrame:
    """One row per record, columns in ``RECORD_FIELDS`` order (with
    ``children``, then the subagent columns) with explicit dtypes
    (:func:`record_dtypes`), a default RangeIndex, rows in given order."""
    return pd.DataFrame({
        name: pd.Series([getattr(r, name) for r in records], dtype=dtype)
        for name, dtype in record_dtypes(children).items()
    })


def table_frame(table: pa.Table) -> pd.DataFrame:
    """The rows of a records table (:func:`sim.output.table.record_schema`) as
    :func:`records_frame` gives them for the same records: the same columns,
    dtypes and RangeIndex."""
    children = all(c in table.schema.names for c in CHILDREN_FIELDS)
    return table.to_pandas().astype(record_dtypes(children))


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
    ``verifier_rejections_mean``, ``compactions_mean`` (per task); and
    ``finalized_share``, the share of tasks ended as ``succeeded:finalized``,
    only when there are any. ``params`` is converted to plain JSON values.
    When ``frame`` has every subagent column (a harness with subagents),
    ``children``: :func:`sim.analysis.fanout.rows_summary` (parents' and
    children's endings, children's totals, session tokens and cost).
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
    finalized = int((frame["reason"] == "finalized").sum()) if "reason" in frame else 0
    if finalized:  # runs ended by the answer of a finalize call (harness.visibility)
        summary["finalized_share"] = finalized / len(frame)
    if all(c in frame.columns for c in CHILDREN_FIELDS):  # (a replay's rows have only some)
        summary["children"] = rows_summary(
            [str(o) for o in outcomes],
            {c: frame[c].tolist() for c in CHILDREN_FIELDS})
    return summary


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
                  description: str = "", provenance: Mapping[str, Any] | None = None,
                  children: bool = False) -> dict[str, Any]:
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
    summary, the Parquet files' metadata and the report. With ``children``
    (a harness with subagents) the rows carry the subagent columns and each
    cell's summary its ``children`` section."""
    if set(records_by_cell) != set(params_by_cell):
        raise ValueError("records_by_cell and params_by_cell name different cells: "
                         f"{sorted(set(records_by_cell) ^ set(params_by_cell))}")
    frames, cells = [], []
    children = bool(children)
    for name, records in records_by_cell.items():
        frame = records_frame(_cell_records(name, records), children)
        cells.append(_cell(name, params_by_cell[name], frame, seed, extras_by_cell))
        frames.append(frame)
    everything = (pd.concat(frames, ignore_index=True) if frames
                  else records_frame([], children))
    summary = folder_summary(cells, description, provenance)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / PARQUET_NAME, everything, provenance)
    _write_summary(out, summary, title, timeseries, provenance)
    return summary


def _cell(name: str, params: dict, frame: pd.DataFrame, seed: int | None,
          extras_by_cell: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """:func:`cell_summary` of one cell, with the sweep's ``seed`` (when
    given) and the cell's extra sections (``extras_by_cell``)."""
    summary = cell_summary(name, params, frame)
    if seed is not None:
        summary["seed"] = seed
    summary.update((extras_by_cell or {}).get(name, {}))
    return summary


def folder_summary(cells: list[dict[str, Any]], description: str = "",
                   provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """summary.json's document: ``{"cells": cells}``, with ``description``
    when there is one and ``provenance`` (:mod:`sim.output.provenance`) as
    the plain JSON values it reads back as."""
    summary: dict[str, Any] = {"cells": cells}
    if description:
        summary["description"] = description
    if provenance is not None:
        summary["provenance"] = _plain(provenance)
    return summary


def _write_summary(out: Path, summary: Mapping[str, Any], title: str,
                   timeseries: pd.DataFrame | None, provenance: Mapping[str, Any] | None
                   ) -> None:
    """Write ``timeseries.parquet`` (when given), ``summary.json`` and
    ``report.md`` (headed ``title``) of a results folder ``out``."""
    if timeseries is not None:
        write_atomic(out / TIMESERIES_NAME, parquet_bytes(timeseries, provenance))
    write_json(out / SUMMARY_NAME, summary)
    write_report(out / REPORT_NAME, summary, title=title)


SUMMARY_COLUMNS = ("cell", "outcome", "reason", "steps", "input_tokens", "cache_read_tokens",
                   "cache_write_tokens", "output_tokens", "thinking_tokens", "cost_usd", "wall_s",
                   *_MEANS)
"""The columns :func:`cell_summary` and the HTML report's figures read."""


def parquet_metadata(provenance: Mapping[str, Any] | None) -> dict[bytes, bytes] | None:
    """The schema metadata results.parquet carries (the provenance as JSON)."""
    return None if provenance is None else {PROVENANCE_KEY: json_bytes(dict(provenance))}


def summary_rows(path: str | os.PathLike) -> pd.DataFrame:
    """The :data:`SUMMARY_COLUMNS` of a results.parquet, and its subagent
    columns when it has them, rows in file order (what summaries and figures
    need, without the rest of every record)."""
    with pq.ParquetFile(os.fspath(path)) as parquet:  # by path: Arrow opens it itself
        names = parquet.schema_arrow.names
    table = pq.read_table(path, columns=list(SUMMARY_COLUMNS) + [
        c for c in CHILDREN_FIELDS if c in names])
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
        summaries.append(_cell(name, params_by_cell[name], frame, seed, extras_by_cell))
    summary = folder_summary(summaries, description, provenance)
    _write_summary(out, summary, title, timeseries, provenance)
    return summary, rows
