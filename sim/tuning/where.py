"""Slices of a trace folder: ``--where COLUMN OP VALUE`` on ``runs.parquet``.

A **condition** is ``column=value``, ``column!=value``, ``column>=value``,
``column<=value``, ``column>value`` or ``column<value`` on any column of
``runs.parquet`` (``model``, ``task_id``, ``exit``, ``resolved``,
``started_at``, ``steps``, ``cost_usd``, ``source``, ``file``, ...). The value
is read as the column's type: a timestamp (``started>=2025-01-01``; a date or
an ISO time, UTC unless it says otherwise; ``started`` is short for
``started_at``), a number, a boolean (``true``/``false``, ``1``/``0``,
``yes``/``no``) or text (compared exactly; ``<``/``>`` in text order). A run
whose value is missing matches no condition but ``!=``. Several conditions
all hold (AND).

:func:`parse_where` reads the texts (bad input is an
:class:`~sim.bad_input.InputError` naming ``--where``), :func:`run_mask`
selects runs of a table, and :func:`slice_folder` writes the selected runs
and their calls to a new trace folder (the same files, filtered rows), so
every reader (replay, calibration) sees the slice and nothing else.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.bad_input import InputError

__all__ = ["Condition", "parse_where", "run_mask", "slice_folder"]

_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$")
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


def run_mask(runs: pd.DataFrame, conditions: Sequence[Condition], *, source: str = ""
             ) -> np.ndarray:
    """Which rows of the runs table ``runs`` every condition selects (an
    unknown column is an InputError listing the columns)."""
    keep = np.ones(len(runs), dtype=bool)
    for c in conditions:
        if c.column not in runs.columns:
            raise InputError(f"no column {c.column!r} in runs.parquet; columns: "
                             f"{', '.join(runs.columns)}", source=source,
                             path=f"--where {c.text}")
        series = runs[c.column]
        value = _typed(series, c)
        present = series.notna().to_numpy()
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


def slice_folder(folder: str | Path, conditions: Sequence[Condition], out: str | Path
                 ) -> tuple[Path, int, int]:
    """Write the runs of the trace folder ``folder`` that the conditions
    select, with their calls, to the (empty or new) folder ``out``; returns
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
    pq.write_table(chosen, target / "runs.parquet")
    pq.write_table(calls.filter(pc.is_in(calls.column("run_id"), ids)),
                   target / "calls.parquet")
    return target, int(keep.sum()), len(frame)
