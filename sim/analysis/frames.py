"""A frame's rows with the types the code reads them with.

pandas-stubs types each field of ``DataFrame.itertuples()`` as the union of every
scalar pandas can hold, keys ``DataFrame.to_dict("records")`` by ``Hashable`` and
types ``DataFrame.loc[key]`` as a Series or a frame;
the frames built here (records, comparisons, checks) have string column names and
number, string or bool fields. These helpers return exactly what pandas returns,
typed for that use.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pandas as pd


def rows(frame: pd.DataFrame) -> Iterator[Any]:
    """The frame's rows as named tuples (``frame.itertuples()``)."""
    return cast("Iterator[Any]", frame.itertuples())


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as dicts keyed by column name (``frame.to_dict("records")``)."""
    return cast("list[dict[str, Any]]", frame.to_dict("records"))


def row(frame: pd.DataFrame, key: str | tuple[str, ...]) -> pd.Series:
    """The one row at index ``key`` (``frame.loc[key]``): ``key`` names a single row (a
    unique index, or every level of a MultiIndex), so pandas returns a Series."""
    loc: Any = frame.loc  # pandas-stubs' overloads of loc[] take no union of key types
    return cast("pd.Series", loc[key])
