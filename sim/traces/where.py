"""Slices of a trace folder: ``--where COLUMN OP VALUE`` on ``runs.parquet``.

A **condition** is ``column=value``, ``column!=value``, ``column>=value``,
``column<=value``, ``column>value`` or ``column<value`` on any column of
``runs.parquet`` (``model``, ``task_id``, ``exit``, ``resolved``,
``started_at``, ``steps``, ``cost_usd``, ``source``, ``file``, ...), and on
the tags a source carries where a folder has them (sim's own writer adds no
tag column; another tool's may): ``tags=nightly`` selects the runs whose list
column ``tags`` holds ``nightly`` (``!=``: does not hold it), and
``metadata.team=search`` the runs whose struct or map column ``metadata`` has
``team`` equal to ``search``. The value
is read as the column's type: a timestamp (``started>=2025-01-01``; a date or
an ISO time, UTC unless it says otherwise; ``started`` is short for
``started_at``), a number, a boolean (``true``/``false``, ``1``/``0``,
``yes``/``no``) or text (compared exactly; ``<``/``>`` in text order). A run
whose value is missing matches no condition but ``!=``. Several conditions
all hold (AND).

:func:`parse_where` reads the texts (bad input is an
:class:`~sim.bad_input.InputError` naming ``--where``), :func:`run_mask`
selects runs of a table, and :func:`slice_folder` writes the selected runs
and their calls to a trace folder (the same files, filtered rows; the folder
itself for ``traces import --where``), so every reader (summary, replay,
calibration, tune) sees the slice and nothing else.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.atomic import StagedFile
from sim.bad_input import InputError

__all__ = ["Condition", "parse_where", "run_mask", "slice_folder", "where_text"]

_PATTERN = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)?)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$")
ALIASES = {"started": "started_at", "task": "task_id", "run": "run_id"}
"""Short names accepted for ``runs.parquet`` columns."""
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@dataclass(frozen=True)
class Condition:
    """One ``--where``: ``column`` (of ``runs.parquet``), ``op`` and the
    ``value`` as written."""

    column: str
    op: str
    value: str

    @property
    def text(self) -> str:
        """The condition as the user writes it (``model=gpt-4o``)."""
        return f"{self.column}{self.op}{self.value}"


def parse_where(texts: str | Sequence[str] | None) -> tuple[Condition, ...]:
    """The conditions of ``--where`` texts (one or many); ``()`` for none."""
    if texts is None:
        return ()
    items = [texts] if isinstance(texts, str) else list(texts)
    out = []
    for text in items:
        match = _PATTERN.match(str(text))
        if match is None or not match.group(3):
            raise InputError(f"{text!r} is not COLUMN=VALUE (or !=, >=, <=, >, <), e.g. "
                             f"model=gpt-4o or 'started>=2025-01-01'", path="--where")
        column, op, value = match.groups()
        out.append(Condition(ALIASES.get(column, column), op, value))
    return tuple(out)


def _typed(series: pd.Series, c: Condition) -> Any:
    """The condition's value as the column's type."""
    where = f"--where {c.text}"
    if isinstance(series.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(
            series.dtype):
        try:
            moment = pd.Timestamp(c.value)
        except (ValueError, TypeError):
            raise InputError(f"{c.value!r} is not a date or time (e.g. 2025-01-01)",
                             path=where) from None
        if moment.tzinfo is None:
            moment = moment.tz_localize("UTC")
        return moment if isinstance(series.dtype, pd.DatetimeTZDtype) else moment.tz_convert(
            None)
    values = series.dropna()
    if pd.api.types.is_bool_dtype(series.dtype) or (
            series.dtype == object and len(values) and all(isinstance(v, bool) for v in values)):
        word = c.value.lower()
        if word not in _TRUE | _FALSE:
            raise InputError(f"{c.value!r} is not true or false", path=where)
        return word in _TRUE
    if pd.api.types.is_numeric_dtype(series.dtype):
        try:
            return float(c.value)
        except ValueError:
            raise InputError(f"{c.value!r} is not a number", path=where) from None
    return c.value


def _listed(value: Any) -> list[Any] | None:
    """The items of a list cell (a list, tuple or array), else None."""
    if isinstance(value, list | tuple | np.ndarray):
        return list(value)
    return None


def _field(value: Any, key: str) -> Any:
    """Field ``key`` of a struct cell (a dict) or a map cell (a list of
    ``(key, value)`` pairs); None when absent."""
    if isinstance(value, dict):
        return value.get(key)
    pairs = _listed(value)
    if pairs is not None:
        for pair in pairs:
            if isinstance(pair, tuple | list) and len(pair) == 2 and pair[0] == key:
                return pair[1]
    return None


def _column(runs: pd.DataFrame, c: Condition, source: str) -> pd.Series:
    """The values ``c`` compares: a column, or a field of a struct or map
    column (``metadata.team``); an unknown one is an InputError listing the
    columns."""
    if c.column in runs.columns:
        return runs[c.column]
    base, _, key = c.column.partition(".")
    if key and base in runs.columns:
        return runs[base].map(lambda v: _field(v, key))
    raise InputError(f"no column {c.column!r} in runs.parquet; columns: "
                     f"{', '.join(runs.columns)}", source=source, path=f"--where {c.text}")


def run_mask(runs: pd.DataFrame, conditions: Sequence[Condition], *, source: str = ""
             ) -> np.ndarray:
    """Which rows of the runs table ``runs`` every condition selects (an
    unknown column is an InputError listing the columns; a list column
    takes ``=`` and ``!=`` only: holds, or does not hold, the value)."""
    keep = np.ones(len(runs), dtype=bool)
    for c in conditions:
        series = _column(runs, c, source)
        present = series.notna().to_numpy(dtype=bool)
        items = [_listed(v) for v in series]
        if any(i is not None for i in items):
            if c.op not in ("=", "!="):
                raise InputError(f"{c.column!r} is a list of tags: use = (holds) or != "
                                 "(does not hold)", source=source, path=f"--where {c.text}")
            holds = np.array([i is not None and any(str(t) == c.value for t in i)
                              for i in items], dtype=bool)
            keep &= holds if c.op == "=" else ~holds
            continue
        if series.dtype == object and c.column not in runs.columns:
            series = series.astype(object).map(lambda v: v if v is None else str(v))
        value = _typed(series, c)
        if isinstance(value, bool):
            column = series.astype(object)
        elif isinstance(value, float):
            column = series.astype(float)
        elif isinstance(value, str):
            column = series.astype(object).map(lambda v: v if v is None else str(v))
        else:
            column = series
        if c.op == "!=":
            hit = ~present | (column != value).fillna(True).to_numpy(dtype=bool)
        else:
            compared = _COMPARE[c.op](column, value)
            hit = present & compared.fillna(False).to_numpy(dtype=bool)
        keep &= hit
    return keep


def slice_folder(folder: str | os.PathLike[str], conditions: Sequence[Condition],
                 out: str | os.PathLike[str]
                 ) -> tuple[Path, int, int]:
    """Write the runs of the trace folder ``folder`` that the conditions
    select, with their calls, to the folder ``out`` (new, empty, or
    ``folder`` itself: its two files replaced, each atomically); returns
    ``(out, runs selected, runs in the folder)``. No run selected is an
    InputError naming the conditions."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from sim.traces.reading import load_tables

    runs, calls = load_tables(folder)
    frame = runs.to_pandas()
    keep = run_mask(frame, conditions, source=str(folder))
    shown = " ".join(c.text for c in conditions)
    if not keep.any():
        raise InputError(f"no run matches --where {shown} (of {len(frame):,} runs)",
                         source=str(folder))
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    chosen = runs.filter(pa.array(keep))
    ids = chosen.column("run_id")
    kept = calls.filter(pc.is_in(calls.column("run_id"), ids))
    for name, table in (("calls.parquet", kept), ("runs.parquet", chosen)):
        with StagedFile(target / name) as staged:  # then renamed: out may be the folder itself
            pq.write_table(table, staged.handle)
    return target, int(keep.sum()), len(frame)


def where_text(conditions: Sequence[Condition]) -> str:
    """``--where model=gpt-4o --where exit=user_stop`` (empty for none): how a
    report names the slice."""
    return " ".join(f"--where {c.text}" for c in conditions)
