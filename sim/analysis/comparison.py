"""What a comparison holds: its two sides (:class:`Side`), its limits
(:class:`Thresholds`) and its result (:class:`Comparison`, with the verdict
in words and as JSON), and the constants of the verdict. The statistics that
fill a Comparison are in :mod:`sim.analysis.compare`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sim.analysis import frames
from sim.analysis.bootstrap import BOOTSTRAP_SEED
from sim.bad_input import InputError

ROW_COLUMNS: tuple[str, ...] = (
    "cell", "task", "outcome", "steps", "input_tokens", "cache_read_tokens",
    "cache_write_tokens", "output_tokens", "cost_usd", "ground_truth")
"""Columns a side's rows must have (a subset of the TaskRecord fields)."""

METRICS: tuple[tuple[str, str], ...] = (
    ("steps", "steps"), ("prompt_tokens", "input tokens"),
    ("output_tokens", "output tokens"), ("cost_usd", "cost (USD)"))
"""(column, label) of the per-task quantities compared; ``prompt_tokens`` is
input + cache read + cache write tokens, as in summary.json's ``input_tokens``."""

STATS: tuple[str, ...] = ("mean", "p50", "p95", "max")
PAIRINGS: tuple[str, ...] = ("auto", "paired", "unpaired")
POWER = 0.80
"""Power of the sample-size calculation for inconclusive checks."""

REGRESSION, WITHIN, INCONCLUSIVE = "regression", "within", "inconclusive"
MAX_TASKS_TO_DECIDE = 10**9
"""Beyond this many tasks a check counts as undecidable in practice (None)."""
EXIT_STATUS = {"no regression": 0, "regression": 1, "inconclusive": 3}
"""Exit status of each verdict (2 is bad input, raised as an InputError)."""


MIN_ALPHA = 1e-9
"""The smallest family-wise level taken: below about 1e-16, ``1 - alpha / 2``
is 1.0 in floating point and no normal quantile exists (the tests' critical
values raised); no bootstrap of a sweep resolves a level below this."""


@dataclass(frozen=True)
class Thresholds:
    """When a change is a regression. ``max_share_drop_pp``: percentage points
    (the succeeded share may fall, or a failure outcome's share rise, by at most
    this much); ``max_cost_rise_pct``: percent (mean or p95 cost may rise by at
    most this much); ``alpha``: the family-wise level of the tests;
    ``resamples``: bootstrap resamples."""

    max_share_drop_pp: float = 1.0
    max_cost_rise_pct: float = 5.0
    alpha: float = 0.05
    resamples: int = 2000

    def validate(self) -> Thresholds:
        """Self, or an InputError naming the bad setting."""
        for name in ("max_share_drop_pp", "max_cost_rise_pct"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"{name} must be a non-negative number, got {value!r}")
        if not MIN_ALPHA <= self.alpha < 1:
            raise InputError(f"alpha must be in [{MIN_ALPHA:g}, 1), got {self.alpha!r}")
        if self.resamples < 100:
            raise InputError(f"resamples must be at least 100, got {self.resamples!r}")
        return self


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a ``label`` for tables, a ``source`` sentence
    (where the rows came from), the per-task ``rows``, the cells in order with
    their sweep parameters, and the root ``seed`` when known (None for results
    folders, whose seed is not recorded)."""

    label: str
    source: str
    rows: pd.DataFrame
    cells: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self) -> None:
        missing = [c for c in ROW_COLUMNS if c not in self.rows.columns]
        if missing:
            raise InputError(f"rows lack the columns {missing}", source=self.source)
        if len(self.rows) == 0:
            raise InputError("no tasks to compare", source=self.source)
        unknown = sorted(set(self.rows["cell"].astype(str)) - set(self.cells))
        if unknown:
            raise InputError(f"rows of cells {unknown} not listed", source=self.source)

    def cell_rows(self, cell: str) -> pd.DataFrame:
        """The rows of ``cell`` in task order, with a ``prompt_tokens`` column."""
        rows = self.rows[self.rows["cell"] == cell].sort_values("task", kind="stable")
        rows = rows.reset_index(drop=True)
        if rows["task"].duplicated().any():
            raise InputError(f"cell {cell!r} has duplicate task indices", source=self.source)
        return rows.assign(prompt_tokens=(rows["input_tokens"] + rows["cache_read_tokens"]
                                          + rows["cache_write_tokens"]).astype("int64"))


@dataclass(frozen=True)
class Comparison:
    """A comparison of a candidate harness setting against a base.

    DataFrames (one row per cell and item; ``cell`` names the base cell,
    changes are candidate minus base):

    * ``outcomes``: ``cell, outcome, base_tasks, base_count, base_share,
      candidate_tasks, candidate_count, candidate_share, change_pp, ci_low_pp,
      ci_high_pp, p_value, test`` (shares in [0, 1], changes and interval in
      percentage points, a (1 - alpha) interval);
    * ``metrics``: ``cell, metric, stat, base, candidate, change, change_pct,
      ci_low, ci_high, ci_low_pct, ci_high_pct, p_value`` for steps, prompt
      tokens, output tokens and cost (USD) and stats mean, p50, p95, max (no
      interval for max; ``*_pct`` is the interval of the change in percent);
    * ``tests``: ``cell, test, statistic, df, p_value`` for the whole outcome
      distribution;
    * ``checks``: ``cell, check, change, unit, threshold, ci_low, ci_high,
      p_value, p_adjusted, test, beyond_threshold, regression, improvement,
      within, status, tasks_to_decide``: the verdict's items (change and
      interval in the check's unit, pp or %), p-values Holm-adjusted over
      every check of the comparison, ``status`` one of ``regression``,
      ``within`` or ``inconclusive``, and for an inconclusive check the tasks
      per cell on each side that would decide it (see the module docstring).

    ``outcome`` is ``regression``, ``no regression`` or ``inconclusive``,
    ``exit_status`` 1, 0 or 3, ``verdict`` says it in words and
    ``tasks_to_decide`` is what an inconclusive comparison needs.

    >>> result = compare_sides(base_side, candidate_side)  # doctest: +SKIP
    >>> result.regression, result.checks.query("regression")  # doctest: +SKIP
    """

    base: Side
    candidate: Side
    cell_pairs: tuple[tuple[str, str], ...]
    paired: bool
    pairing_note: str
    thresholds: Thresholds
    outcomes: pd.DataFrame
    metrics: pd.DataFrame
    tests: pd.DataFrame
    checks: pd.DataFrame
    changes: tuple[tuple[str, str, str], ...] = ()
    """The settings that differ between the sides, ``(dotted path, base
    value, candidate value)`` as text (:func:`sim.scenario.diff.setting_changes`);
    empty when they are the same or unknown (task rows without a scenario)."""

    @property
    def changed(self) -> str:
        """The changes in one line (``harness.detector.nudges: 1 -> 2; ...``,
        at most four and how many more), or "" when none are known."""
        if not self.changes:
            return ""
        shown = "; ".join(f"{p}: {a} -> {b}" for p, a, b in self.changes[:4])
        more = len(self.changes) - 4
        return shown + (f"; and {more} more" if more > 0 else "")

    @property
    def title(self) -> str:
        """What is compared, for headlines: the cells' name and what changed
        (``bounded: harness.detector.nudges: 1 -> 2``) when the settings are
        known to differ, else ``BASE vs CANDIDATE`` by their labels."""
        if self.changes:
            names = [b for b, _ in self.cell_pairs]
            where = names[0] if len(names) == 1 else f"{len(names)} cells"
            return f"{where}: {self.changed}"
        return f"{self.base.label} vs {self.candidate.label}"

    @property
    def regression(self) -> bool:
        """Whether any check is a regression."""
        return bool(self.checks["regression"].any())

    @property
    def outcome(self) -> str:
        """``regression`` (any check is one), ``no regression`` (every check is
        within its limit) or ``inconclusive``."""
        if self.regression:
            return "regression"
        return "no regression" if bool(self.checks["within"].all()) else "inconclusive"

    @property
    def exit_status(self) -> int:
        """The CLI's exit status: 0 no regression, 1 regression, 3 inconclusive."""
        return EXIT_STATUS[self.outcome]

    @property
    def tasks_to_decide(self) -> int | None:
        """Tasks per cell on each side that would decide every inconclusive
        check (the largest need; None when decided, or when a change sits
        exactly on its limit)."""
        if self.outcome != "inconclusive":
            return None
        needs = self.checks.loc[self.checks["status"] == INCONCLUSIVE, "tasks_to_decide"]
        if needs.isna().any():
            return None
        return int(needs.max())

    @property
    def verdict(self) -> str:
        """The verdict in words: ``regression: ...`` listing each failing
        check, ``no regression (...)``, or ``inconclusive: ...`` with the tasks
        that would decide it."""
        outcome = self.outcome
        if outcome == "regression":
            failing = self.checks[self.checks["regression"]]
            return "regression: " + "; ".join(check_sentence(row) for row in
                                              frames.records(failing))
        if outcome == "no regression":
            return (f"no regression: every one of the {len(self.checks)} checks is within its "
                    f"limit ({round(100 * (1 - self.thresholds.alpha))}% intervals inside)")
        open_ = self.checks[self.checks["status"] == INCONCLUSIVE]
        need = self.tasks_to_decide
        more = (f"about {need:,} tasks per cell on each side would decide "
                f"{'it' if len(open_) == 1 else 'them'} ({round(100 * POWER)}% power if the "
                f"changes are as measured)" if need is not None else
                "a change sits (all but) on its limit, so no practical number of tasks "
                "decides it")
        return (f"inconclusive: {len(open_)} of {len(self.checks)} checks neither within their "
                f"limits nor a significant regression; {more}")

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON values (NaN as None)."""
        return {
            "base": {"label": self.base.label, "source": self.base.source,
                     "seed": self.base.seed},
            "candidate": {"label": self.candidate.label, "source": self.candidate.source,
                          "seed": self.candidate.seed},
            "cells": [{"base": b, "candidate": c} for b, c in self.cell_pairs],
            "changes": [{"path": p, "base": a, "candidate": b} for p, a, b in self.changes],
            "paired": self.paired,
            "pairing": self.pairing_note,
            "thresholds": {"max_share_drop_pp": self.thresholds.max_share_drop_pp,
                           "max_cost_rise_pct": self.thresholds.max_cost_rise_pct,
                           "alpha": self.thresholds.alpha,
                           "bootstrap_resamples": self.thresholds.resamples,
                           "bootstrap_seed": BOOTSTRAP_SEED},
            "regression": self.regression,
            "outcome": self.outcome,
            "exit_status": self.exit_status,
            "tasks_to_decide": self.tasks_to_decide,
            "power": POWER,
            "verdict": self.verdict,
            "outcomes": _records(self.outcomes),
            "metrics": _records(self.metrics),
            "tests": _records(self.tests),
            "checks": _records(self.checks),
        }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frames.records(frame):
        out.append({k: _plain(v) for k, v in row.items()})
    return out


def _plain(value: Any) -> Any:
    if value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def check_sentence(row: Mapping[str, Any]) -> str:
    """One check in words, e.g. ``bounded: succeeded share fell 6.6 pp (95%
    interval -7.1 to -6.1 pp; limit 1 pp; adjusted p = 3e-120)``; an
    inconclusive check adds the tasks that would decide it."""
    change = row["change"]
    unit = " pp" if row["unit"] == "pp" else "%"
    verb = "rose" if change > 0 else "fell" if change < 0 else "changed"
    interval = ""
    if row.get("ci_low") is not None and math.isfinite(row["ci_low"]) and math.isfinite(
            row["ci_high"]):
        interval = f"interval {row['ci_low']:+.1f} to {row['ci_high']:+.1f}{unit}; "
    text = (f"{row['cell']}: {row['check']} {verb} {abs(change):.1f}{unit} ({interval}limit "
            f"{row['threshold']:g}{unit}; adjusted p = {format_p(row['p_adjusted'])})")
    if row.get("status") == INCONCLUSIVE:
        need = row.get("tasks_to_decide")
        text += (f": undecided, about {int(need):,} tasks would decide it"
                 if need is not None and not pd.isna(need) else ": undecided")
    return text


def format_p(p: float) -> str:
    """A p-value for tables: 3 significant digits, or ``<1e-300``."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    if p < 1e-300:
        return "<1e-300"
    if p < 1e-3:
        return f"{p:.1e}"
    return f"{p:.3f}"
