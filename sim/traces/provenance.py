"""The ``provenance`` column of calls.parquet: how each figure of a call was obtained.

Every call records, for each column of :data:`~sim.traces.schema.PROVENANCE_FIELDS`
(the five token counts and the cost), whether the figure is ``exact`` (as the
source records it), ``derived`` (computed from recorded figures), ``estimated``
(from content length, or a partial count) or ``unknown`` (not recorded: the
column is null). In the file it is one struct column of six dictionary-encoded
strings, never null; in memory a ``(6, calls)`` array of ``int8`` codes, the
index of each value in :data:`~sim.traces.schema.PROVENANCES`, so a column for
a million calls that are all exact costs a few megabytes of zeros.

One rule, applied by the writer and by the reader of a folder written before
the column existed (:func:`default_codes`): a figure a call does not list is
exact when it holds a value and unknown when it is null. The reader checks the
converse too (:func:`check`): a token count is null exactly when its
provenance is unknown, and a null cost is unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.bad_input import InputError
from sim.traces.schema import (
    ESTIMATED,
    EXACT,
    PROVENANCE_FIELDS,
    PROVENANCE_TYPE,
    PROVENANCES,
    TOKEN_COLUMNS,
    UNKNOWN,
)

CODES: dict[str, int] = {value: code for code, value in enumerate(PROVENANCES)}
"""Each provenance's code: its index in :data:`PROVENANCES`."""

EXACT_CODE, UNKNOWN_CODE = CODES[EXACT], CODES[UNKNOWN]
_DICTIONARY = pa.array(PROVENANCES, pa.string())

Counts = dict[str, dict[str, int]]
"""``{field: {provenance: calls}}``: a count of calls per figure and provenance."""


def column(codes: np.ndarray) -> pa.StructArray:
    """The ``provenance`` column of ``codes`` (``int8``, one row per field of
    :data:`PROVENANCE_FIELDS`, one column per call)."""
    children = [_DICTIONARY.take(pa.array(row, pa.int8())) for row in codes]
    return pa.StructArray.from_arrays(children, fields=list(PROVENANCE_TYPE))


def default_codes(table: pa.Table | Mapping[str, Any]) -> np.ndarray:
    """The codes of calls that list no provenance: per field, exact where
    ``table``'s column (Arrow, with nulls) holds a value and unknown where it
    is null."""
    rows = len(table) if isinstance(table, pa.Table) else len(table["cost_usd"])
    codes = np.zeros((len(PROVENANCE_FIELDS), rows), dtype=np.int8)
    for i, name in enumerate(PROVENANCE_FIELDS):
        values = table[name]
        if values.null_count:
            codes[i] = np.where(pc.is_null(values).to_numpy(zero_copy_only=False),
                                UNKNOWN_CODE, EXACT_CODE)
    return codes


def default_column(table: pa.Table | Mapping[str, Any]) -> pa.StructArray:
    """The ``provenance`` of calls that list none (:func:`default_codes`):
    what a folder written before the column existed reads as, and sim's own
    traced calls (every count exact)."""
    return column(default_codes(table))


def record_codes(provenance: Mapping[str, str]) -> tuple[int, ...]:
    """One call's listed provenance (``CallRecord.provenance``) as codes,
    fields not listed exact (the writer makes a null figure unknown).
    ValueError for a value or field outside the model (an importer's bug)."""
    codes = [EXACT_CODE] * len(PROVENANCE_FIELDS)
    for name, value in provenance.items():
        try:
            codes[PROVENANCE_FIELDS.index(name)] = CODES[value]
        except (ValueError, KeyError):
            raise ValueError(f"provenance {name!r}: {value!r} is not one of "
                             f"{PROVENANCES} for one of {PROVENANCE_FIELDS}") from None
    return tuple(codes)


def codes_of(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A ``provenance`` column (as read) back as a ``(6, calls)`` array of codes."""
    codes = np.empty((len(PROVENANCE_FIELDS), len(values)), dtype=np.int8)
    for i, name in enumerate(PROVENANCE_FIELDS):
        text = pc.struct_field(values, name)
        codes[i] = pc.index_in(text, _DICTIONARY).to_numpy(zero_copy_only=False)
    return codes


def count(codes: np.ndarray) -> Counts:
    """``{field: {provenance: calls}}`` of a ``(6, calls)`` array of codes
    (provenances with no call left out)."""
    out: Counts = {}
    for i, name in enumerate(PROVENANCE_FIELDS):
        found = np.bincount(codes[i], minlength=len(PROVENANCES))
        out[name] = {value: int(n) for value, n in zip(PROVENANCES, found, strict=True) if n}
    return out


def add_counts(total: dict[str, Counter], counts: Counts) -> None:
    """Add ``counts`` into ``total`` (``{field: Counter}``)."""
    for name, by_value in counts.items():
        total.setdefault(name, Counter()).update(by_value)


def check(calls: pa.Table, path: Path | str) -> None:
    """The ``provenance`` column of ``calls`` agrees with the figures, or an
    InputError naming the file, the dotted field and the run: every value is
    one of :data:`PROVENANCES`; a token count is null exactly when its
    provenance is unknown; a null cost is unknown."""
    values = calls.column("provenance")
    for name in PROVENANCE_FIELDS:
        text = pc.struct_field(values, name)
        known = pc.is_in(text, _DICTIONARY)
        if not pc.all(known).as_py():
            _refuse(calls, path, f"provenance.{name}", pc.invert(known),
                    f"not one of {', '.join(PROVENANCES)}")
        unknown = pc.equal(text, UNKNOWN)
        missing = pc.is_null(calls.column(name))
        if name in TOKEN_COLUMNS:
            _refuse(calls, path, name, pc.and_(missing, pc.invert(unknown)),
                    "null token count whose provenance is not unknown")
            _refuse(calls, path, name, pc.and_(unknown, pc.invert(missing)),
                    "token count whose provenance is unknown (it should be null)")
        else:
            _refuse(calls, path, f"provenance.{name}", pc.and_(missing, pc.invert(unknown)),
                    "null cost whose provenance is not unknown")


def _refuse(calls: pa.Table, path: Path | str, field: str, mask: Any, what: str) -> None:
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():
        return
    index = pc.index(mask, True).as_py()
    raise InputError(f"{what} in run {calls.column('run_id')[index].as_py()!r} "
                     f"(call {calls.column('call')[index].as_py()})", source=str(path),
                     path=field)


def conform(values: pa.ChunkedArray, path: Path | str) -> pa.ChunkedArray:
    """A ``provenance`` column written by another tool (plain strings, fields
    nullable) cast to :data:`PROVENANCE_TYPE`, or an InputError."""
    try:
        return values.cast(PROVENANCE_TYPE)
    except (pa.ArrowException, ValueError):
        raise InputError(f"column has type {values.type}, expected {PROVENANCE_TYPE}",
                         source=str(path), path="provenance") from None




RELIED_ON: dict[str, str] = {
    "input_tokens": "input tokens", "cache_read_tokens": "cache read tokens",
    "cache_write_tokens": "cache write tokens", "output_tokens": "output tokens",
    "cost_usd": "cost"}
"""The figures downstream commands rely on (calibration's fits, replay's
prices, the summary's statistics), with their names in a warning."""

WARN_SHARE = 0.01
"""A warning is given when a relied-on figure is estimated or unknown for
more than this share of a source's calls."""


def warnings(by_source: Mapping[str, Mapping[str, Mapping[str, int]]]) -> list[str]:
    """One line per source whose relied-on figures (:data:`RELIED_ON`) are
    estimated or unknown for more than :data:`WARN_SHARE` of its calls, from
    ``{source: {field: {provenance: calls}}}``: which figures, how (estimated,
    unknown, or both) and the share of the source's calls, e.g. ``inspect:
    output tokens estimated for 12.0%, cost unknown for 100.0% of 1,000 calls``."""
    lines = []
    for source, counts in sorted(by_source.items()):
        calls = sum(counts.get("input_tokens", {}).values())
        if not calls:
            continue
        parts = []
        for name, label in RELIED_ON.items():
            by_value = counts.get(name, {})
            estimated, unknown = by_value.get(ESTIMATED, 0), by_value.get(UNKNOWN, 0)
            share = (estimated + unknown) / calls
            if share > WARN_SHARE:
                how = ("estimated or unknown" if estimated and unknown
                       else "estimated" if estimated else "unknown")
                parts.append(f"{label} {how} for {100 * share:.1f}%")
        if parts:
            lines.append(f"{source}: {', '.join(parts)} of {calls:,} calls")
    return lines
