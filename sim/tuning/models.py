"""Several models in one folder: whether their runs differ, and so whether
``tune`` recommends per model.

Runs of different models need different limits when their lengths differ:
a step cap fitted to a terse model stops a verbose one's successes. A folder
(or ``--where`` slice) whose ``model`` column names at least two models with
:data:`MIN_RUNS` runs or more each is tested: a Kruskal-Wallis test
(:func:`scipy.stats.kruskal`) of the runs' steps and of their prompt tokens
(input, cache read and cache write) across those models; the runs **differ**
when either p-value is below :data:`ALPHA`. Then ``tune`` recommends for each
such model on its own runs (``--where model=M``) beside the pooled answer,
and says so at the top; otherwise one recommendation holds for all, with the
test as its reason. Models with fewer runs are named and left to the pooled
answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats as scipy_stats

from sim.traces.where import Condition, run_mask

__all__ = ["ALPHA", "MIN_RUNS", "ModelSplit", "slug", "split_by_model"]

MIN_RUNS = 5
"""Runs a model needs for its own recommendation (and to enter the test)."""
ALPHA = 0.05


@dataclass(frozen=True)
class ModelSplit:
    """Whether the runs of the folder's ``models`` (those with
    :data:`MIN_RUNS` runs or more, most runs first) ``differ``; ``reason`` in
    a sentence; ``few``: models with fewer runs."""

    models: tuple[str, ...] = ()
    differ: bool = False
    reason: str = ""
    few: tuple[str, ...] = field(default_factory=tuple)


def split_by_model(folder: str | os.PathLike[str], conditions: Sequence[Condition] = ()
                   ) -> ModelSplit:
    """The test of the module docstring on the runs of ``folder`` that
    ``conditions`` select and that a replay can use (every call's usage
    recorded: :func:`~sim.drivers.replay.reading.without_unknown_usage`), so a
    model whose runs all lack usage gets no search of its own. Reads only the
    columns it needs (of the calls, their run and token counts): ``tune``
    has read and checked the folder whole before (:func:`~sim.traces.reading.load_tables`)."""
    import pyarrow.parquet as pq

    from sim.drivers.replay.reading import without_unknown_usage
    from sim.traces.schema import CALLS_FILE, RUNS_FILE, TOKEN_COLUMNS

    path = Path(folder)
    names = pq.read_schema(path / RUNS_FILE).names
    columns = ["model", "steps", "input_tokens", "cache_read_tokens", "cache_write_tokens",
               *(c.column for c in conditions if c.column in names)]
    runs = pq.read_table(path / RUNS_FILE, columns=list(dict.fromkeys(
        ["run_id", *columns, *TOKEN_COLUMNS])))
    calls = pq.read_table(path / CALLS_FILE, columns=["run_id", *TOKEN_COLUMNS])
    runs, _, _ = without_unknown_usage(runs, calls)
    frame = runs.select(list(dict.fromkeys(columns))).to_pandas()
    frame = frame[run_mask(frame, conditions, source=str(folder))]
    counts = frame["model"].dropna().value_counts()
    if len(counts) < 2:
        return ModelSplit(tuple(counts.index))
    enough = tuple(str(m) for m, n in counts.items() if n >= MIN_RUNS)
    few = tuple(str(m) for m, n in counts.items() if n < MIN_RUNS)
    if len(enough) < 2:
        return ModelSplit(enough, False, f"{len(counts)} models, but fewer than two with "
                                          f"{MIN_RUNS} runs or more: one recommendation for all",
                          few)
    frame = frame.assign(prompt=frame["input_tokens"] + frame["cache_read_tokens"]
                         + frame["cache_write_tokens"])
    p_values = {}
    for column, name in (("steps", "steps"), ("prompt", "prompt tokens")):
        groups = [frame.loc[frame["model"] == m, column].to_numpy(float) for m in enough]
        p_values[name] = _kruskal(groups)
    shown = ", ".join(f"{name} p={p:.2g}" for name, p in p_values.items())
    differ = any(p < ALPHA for p in p_values.values())
    if differ:
        reason = (f"{len(enough)} models whose runs differ (Kruskal-Wallis across models: "
                  f"{shown}): each gets its own recommendation")
    else:
        reason = (f"{len(enough)} models whose runs do not differ (Kruskal-Wallis across "
                  f"models: {shown}): one recommendation is safe for all")
    return ModelSplit(enough, differ, reason, few)


def _kruskal(groups: list) -> float:
    """The Kruskal-Wallis p-value; 1.0 when every value is the same."""
    try:
        return float(scipy_stats.kruskal(*groups).pvalue)
    except ValueError:  # all numbers identical
        return 1.0


def slug(model: str) -> str:
    """A file name for a model's recommendation (``gpt-4o``; ``xai_grok-3``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"

