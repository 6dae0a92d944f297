"""Comparisons of two harness settings: did the candidate move outcomes or cost?

Input is two sets of per-task rows (the columns of
:class:`~sim.task_record.TaskRecord`), one per side, cells matched by name; output
is a :class:`Comparison` holding DataFrames and a verdict. Nothing here runs a
simulation (see :func:`sim.api.compare`) or writes a file (see
:mod:`sim.output.html`).

**Paired or unpaired.** Task ``i`` of a cell draws from the ``i``-th child of
the root seed, so with the same seed task ``i`` is the same task on both sides
(common random numbers) and rows pair up by (cell, task index). Paired tests
use only the tasks whose outcome changed, which is why they detect small
effects that independent samples of the same size cannot. With different
seeds or different task sets the sides are independent samples and the
unpaired tests below are used instead; the report says which. Every test
treats tasks as independent of each other, which holds for the direct engine;
in a DES cell tasks share capacity (queues, rate limits), so its intervals
are somewhat optimistic about time-related effects.

Outcome shares (shares in [0, 1]; changes in percentage points):

* interval of the change: Newcombe's hybrid score interval built from the two
  95% Wilson intervals of :func:`sim.analysis.stats.share_ci`, with the correlation of
  the paired indicators (Newcombe 1998, paired data, method 10) or without it
  (independent samples, method 10 of the companion paper);
* test of one outcome (succeeded, or one failure outcome): paired, McNemar's
  exact test, a two-sided binomial test of the discordant pairs against 1/2
  (:func:`scipy.stats.binomtest`); unpaired, Fisher's exact test on the 2x2
  table;
* test of the whole outcome distribution: paired, the Stuart-Maxwell test of
  marginal homogeneity (McNemar's test generalised to K outcomes). The usual
  chi-square test of a 2 x K table assumes two independent samples: on paired
  runs, where most tasks end the same way on both sides, it ignores that
  agreement and is far too conservative. Unpaired, the chi-square test of
  homogeneity of the 2 x K table (:func:`scipy.stats.chi2_contingency`).

Steps, prompt tokens, output tokens and cost: mean, p50, p95 and max per side
(:mod:`sim.analysis.stats`' percentile definition), and percentile-bootstrap intervals
of the change in mean, p50 and p95 (:func:`scipy.stats.bootstrap`, resampling
tasks in pairs when paired, each side alone otherwise, from a fixed seed so a
report is reproducible). The max gets no interval: the bootstrap cannot
estimate the sampling distribution of an extreme.

**Verdict.** Each check has a limit: the succeeded share may fall, and each
failure outcome's share may rise, by at most ``max_share_drop_pp``
percentage points; the mean and the p95 cost may rise by at most
``max_cost_rise_pct`` percent. Each check ends in one of three states:

* **regression**: its change passes the limit in the bad direction and its
  p-value, adjusted by Holm's method over every check of the comparison
  (every cell), is below ``alpha``, so a release with no effect is flagged
  with probability at most ``alpha`` however many outcomes and cells there
  are (p-values of cost changes come from the bootstrap distribution of
  their intervals);
* **within its limit**: its (1 - alpha) interval lies inside the limit on
  the bad side (the interval's upper end for a rise, its lower end for the
  succeeded share's fall): a one-sided non-inferiority test at level
  ``alpha / 2``, the equivalence test of "no regression";
* **inconclusive**: neither, because the tasks are too few to tell.

The comparison is a **regression** (exit status 1) when any check is one;
**no regression** (exit 0) only when every check is within its limit (an
intersection-union test: each at ``alpha / 2``, no adjustment needed, since
all must pass); otherwise **inconclusive** (exit 3): a green light needs
evidence, and few tasks give none.

**Tasks that would decide.** For each inconclusive check, assuming the true
change is the one measured and that interval half-widths shrink as
``1 / sqrt(n)`` (both sides growing together, paired or not), the tasks per
cell on each side that give the check power ``POWER`` (80%) to decide it:
``n * ((z_{1 - alpha/2} + z_POWER) / z_{1 - alpha/2} * h / d)^2`` for ``n``
tasks now, ``h`` the interval's half-width on the side facing the limit and
``d`` the distance from the measured change to the limit (the interval then
excludes the limit: within it when the change is inside, beyond it when
outside). The comparison needs the largest of these; a change at its limit
(or needing more than ``MAX_TASKS_TO_DECIDE`` tasks) cannot be decided by
more tasks in practice (reported as None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from sim.analysis import frames, stats
from sim.bad_input import InputError
from sim.harness.state import SUCCEEDED

BOOTSTRAP_SEED = 20_250_101
"""Seed of the bootstrap's resampling, fixed so a report is reproducible."""

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
        if not 0 < self.alpha < 1:
            raise InputError(f"alpha must be in (0, 1), got {self.alpha!r}")
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


# ------------------------------------------------------- share statistics

def newcombe_interval(k1: int, k2: int, n1: int, n2: int, *, both: int | None = None,
                      level: float = 0.95) -> tuple[float, float]:
    """Interval for the change ``k2/n2 - k1/n1`` of two shares (Newcombe's
    hybrid score interval from the Wilson intervals of each share).

    Independent samples when ``both`` is None; paired data when ``both`` is the
    number of pairs with the event on both sides (then ``n1 == n2`` is the
    number of pairs), which brings in the correlation of the two indicators
    (Newcombe 1998, method 10). Bounds are differences of shares, in [-1, 1].

    >>> low, high = newcombe_interval(50, 60, 100, 100)
    >>> round(low, 3), round(high, 3)
    (-0.037, 0.232)
    """
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = stats.share_ci(k1, n1, level)
    l2, u2 = stats.share_ci(k2, n2, level)
    phi = 0.0
    if both is not None:
        if n1 != n2:
            raise ValueError("paired shares need the same number of pairs on both sides")
        a, b, c = both, k1 - both, k2 - both  # a: both, b: side 1 only, c: side 2 only
        d = n1 - a - b - c
        if min(a, b, c, d) < 0:
            raise ValueError(f"inconsistent paired counts k1={k1}, k2={k2}, both={both}")
        denominator = (a + b) * (c + d) * (a + c) * (b + d)
        phi = (a * d - b * c) / math.sqrt(denominator) if denominator else 0.0
    # change = p2 - p1: its lower end pairs p2's lower error with p1's upper one
    low = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    high = math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return p2 - p1 - low, p2 - p1 + high


def mcnemar_exact(only_base: int, only_candidate: int) -> float:
    """Two-sided p-value of McNemar's exact test: the discordant pairs (event on
    one side only) split as Binomial(b + c, 1/2) under no change. 1.0 when no
    pair is discordant."""
    discordant = only_base + only_candidate
    if discordant == 0:
        return 1.0
    return float(scipy_stats.binomtest(only_candidate, discordant, 0.5).pvalue)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of two independent shares."""
    return float(scipy_stats.fisher_exact(np.array([[k1, n1 - k1], [k2, n2 - k2]])).pvalue)


def stuart_maxwell(table: np.ndarray) -> tuple[float, int, float]:
    """Stuart-Maxwell test of marginal homogeneity of a K x K table of paired
    outcomes (rows: base, columns: candidate): ``(statistic, df, p_value)``.

    With d the differences of the row and column margins and S their
    covariance under homogeneity (``S_ii = n_i. + n_.i - 2 n_ii``,
    ``S_ij = -(n_ij + n_ji)``), the statistic ``d' S^- d`` is chi-square with
    ``rank(S)`` degrees of freedom. Outcomes that never change are left out (a
    zero row and column of S); with two outcomes it is McNemar's chi-square.
    No discordant pair gives ``(0.0, 0, 1.0)``.
    """
    n = np.asarray(table, dtype=np.float64)
    rows, cols = n.sum(axis=1), n.sum(axis=0)
    off = rows + cols - 2 * np.diag(n)
    keep = np.flatnonzero(off > 0)
    if keep.size < 2:
        return 0.0, 0, 1.0
    sub = n[np.ix_(keep, keep)]
    d = (rows - cols)[keep][:-1]
    s = -(sub + sub.T)
    np.fill_diagonal(s, off[keep])
    s = s[:-1, :-1]
    df = int(np.linalg.matrix_rank(s))
    statistic = float(d @ np.linalg.pinv(s) @ d)
    return statistic, df, float(scipy_stats.chi2.sf(statistic, df))


def chi_square_homogeneity(counts1: Sequence[int], counts2: Sequence[int]
                           ) -> tuple[float, int, float]:
    """Chi-square test that two independent samples share one outcome
    distribution (a 2 x K table; outcomes seen on neither side dropped):
    ``(statistic, df, p_value)``; ``(0.0, 0, 1.0)`` with fewer than two outcomes."""
    table = np.array([counts1, counts2], dtype=np.int64)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 0.0, 0, 1.0
    result = scipy_stats.chi2_contingency(table, correction=False)
    return float(result.statistic), int(result.dof), float(result.pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: rejecting where the adjusted p-value is
    below alpha keeps the family-wise error rate at alpha.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for position, i in enumerate(order):
        running = max(running, min(1.0, (m - position) * p_values[i]))
        adjusted[i] = running
    return adjusted


# ---------------------------------------------------------- the bootstrap

def _stat_columns(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean, p50 and p95 of ``x`` along ``axis`` (sim.analysis.stats' percentiles)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    ranks = [stats.rank(0.5, n), stats.rank(0.95, n)]
    part = np.partition(x, ranks, axis=-1)
    return np.stack([x.mean(axis=-1), part[..., ranks[0]], part[..., ranks[1]]])


def _weighted_stats(values: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Mean, p50 and p95 of resamples given as counts: ``weights[r, j]`` copies
    of ``values[j]`` (sorted ascending) in resample ``r`` of size ``n``;
    shape ``(3, resamples)``. The percentile is the value at rank floor(q n),
    as in :mod:`sim.analysis.stats`."""
    cumulative = np.cumsum(weights, axis=1)
    out = [weights @ values / n]
    for q in (0.5, 0.95):
        position = (cumulative > stats.rank(q, n)).argmax(axis=1)
        out.append(values[position])
    return np.stack(out)


def _relative(base: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """``100 (candidate - base) / base``; 0 when both are 0, +-inf when only the base is."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(base != 0, 100 * (candidate - base) / np.where(base != 0, base, 1),
                        np.where(candidate == base, 0.0, np.copysign(np.inf, candidate - base)))


def _resample_counts(inverse: np.ndarray, k: int, resamples: int,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Counts per distinct value (``inverse`` maps each task to its value) in
    ``resamples`` resamples of the tasks with replacement, as a list of
    ``(batch, k)`` arrays: multinomial draws when values are few (a draw
    costs about as much as counting 40 tasks), else resampled task indices
    counted (the same distribution either way); batches keep memory bounded."""
    n = inverse.size
    batch = max(1, 4_000_000 // k)
    shares = np.bincount(inverse, minlength=k) / n
    out = []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        if 40 * k <= n:
            out.append(rng.multinomial(n, shares, size=size))
        else:
            out.append(np.stack([np.bincount(inverse[rng.integers(0, n, n)], minlength=k)
                                 for _ in range(size)]))
    return out


def _side_stats(values: np.ndarray, batches: list[np.ndarray], n: int) -> np.ndarray:
    """Mean, p50 and p95 per resample of one side, from count batches over
    ``values`` (any order, repeats allowed)."""
    order = np.argsort(values, kind="stable")
    return np.concatenate([_weighted_stats(values[order], counts[:, order], n)
                           for counts in batches], axis=1)


def _index_stats(samples: tuple[np.ndarray, ...], paired: bool, resamples: int,
                 rng: np.random.Generator) -> list[np.ndarray]:
    """Mean, p50 and p95 per resample of each sample, resampling task
    indices (the same indices for every sample when ``paired``)."""
    n = max(x.size for x in samples)
    batch = max(1, 2_500_000 // n)
    out: list[list[np.ndarray]] = [[] for _ in samples]
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        shared = rng.integers(0, n, (size, n)) if paired else None
        for i, x in enumerate(samples):
            idx = shared if paired else rng.integers(0, x.size, (size, x.size))
            out[i].append(_stat_columns(x[idx]))
    return [np.concatenate(parts, axis=1) for parts in out]


def _resampled_side(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Mean, p50 and p95 per resample of one independent sample."""
    values, inverse = np.unique(x, return_inverse=True)
    if 4 * len(values) > x.size:  # mostly distinct: resample task indices
        return _index_stats((x,), False, resamples, rng)[0]
    return _side_stats(values, _resample_counts(inverse.reshape(-1), len(values), resamples,
                                                rng), x.size)


def bootstrap_changes(base: np.ndarray, candidate: np.ndarray, *, paired: bool,
                      resamples: int, level: float = 0.95, relative: bool = False
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile-bootstrap intervals and p-values of the change (candidate -
    base) in mean, p50 and p95: ``(low, high, p_value)``, arrays of three;
    with ``relative``, arrays of six, the last three the change in percent
    of the base's value (from the same resamples).

    Paired: tasks are resampled in pairs; unpaired: each side alone. When the
    values (pairs, when paired) are few compared with the tasks, as steps,
    tokens and costs are, a resample is drawn as counts per distinct value:
    a multinomial draw over the values with their observed shares, which is
    the ordinary bootstrap's distribution exactly, in time proportional to
    the number of values rather than of tasks; otherwise task indices are
    resampled. The resampling seed is
    :data:`BOOTSTRAP_SEED`. Intervals are the ``(1 - level) / 2`` and ``(1 +
    level) / 2`` quantiles of the resampled changes (linear interpolation);
    the p-value is twice the smaller bootstrap tail beyond zero (with the +1
    correction), the level at which the interval would just touch zero."""
    base = np.asarray(base, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if paired and base.shape != candidate.shape:
        raise ValueError("paired samples must have the same length")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    if paired:
        pairs, inverse = np.unique(np.column_stack([base, candidate]), axis=0,
                                   return_inverse=True)
        if 4 * len(pairs) > base.size:  # mostly distinct: resample task indices
            b_stats, c_stats = _index_stats((base, candidate), True, resamples, rng)
        else:
            batches = _resample_counts(inverse.reshape(-1), len(pairs), resamples, rng)
            b_stats = _side_stats(pairs[:, 0], batches, base.size)
            c_stats = _side_stats(pairs[:, 1], batches, base.size)
    else:
        b_stats, c_stats = (_resampled_side(x, resamples, rng) for x in (base, candidate))
    dist = c_stats - b_stats
    point = _stat_columns(candidate) - _stat_columns(base)
    if relative:
        dist = np.concatenate([dist, _relative(b_stats, c_stats)])
        point = np.concatenate([point, _relative(_stat_columns(base), _stat_columns(candidate))])
    below = (dist <= 0).sum(axis=-1)
    above = (dist >= 0).sum(axis=-1)
    p = np.minimum(1.0, 2 * (np.minimum(below, above) + 1) / (resamples + 1))
    tails = ((1 - level) / 2, (1 + level) / 2)
    with np.errstate(invalid="ignore"):
        low, high = np.quantile(dist, tails, axis=-1)
    nearest_low, nearest_high = np.quantile(dist, tails, axis=-1, method="nearest")
    low = np.where(np.isnan(low), nearest_low, low)  # interpolating between infinities
    high = np.where(np.isnan(high), nearest_high, high)
    return np.asarray(low), np.asarray(high), p


# -------------------------------------------------------------- the result

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


# ---------------------------------------------------------- the comparison

def match_cells(base: Side, candidate: Side) -> tuple[tuple[str, str], ...]:
    """Cell pairs: one cell each (whatever their names), else the same cell
    names on both sides (in the base's order); anything else is an InputError."""
    if len(base.cells) == 1 and len(candidate.cells) == 1:
        return ((base.cells[0], candidate.cells[0]),)
    if set(base.cells) != set(candidate.cells):
        only_b = sorted(set(base.cells) - set(candidate.cells))
        only_c = sorted(set(candidate.cells) - set(base.cells))
        raise InputError(
            f"the cells do not match by name: only in the base {only_b}, only in the "
            f"candidate {only_c} (multi-cell comparisons pair cells by name)")
    return tuple((name, name) for name in base.cells)


def decide_pairing(base: Side, candidate: Side, pairs: Sequence[tuple[str, str]],
                   pairing: str = "auto") -> tuple[bool, str]:
    """``(paired, note)``. ``auto`` pairs when every matched cell has the same
    task indices on both sides and the sides ran on the same task streams:
    equal seeds when both are known, else (a results folder records no seed)
    the same hidden ground truth for every task. ``paired`` insists on it
    (InputError when task indices differ), ``unpaired`` never pairs."""
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    same_tasks = all(
        np.array_equal(base.cell_rows(b)["task"].to_numpy(),
                       candidate.cell_rows(c)["task"].to_numpy()) for b, c in pairs)
    if pairing == "unpaired":
        return False, "unpaired (asked for): the sides are treated as independent samples"
    recorded = _recorded_pairing(base, candidate, pairs, pairing)
    if recorded is not None:
        return recorded
    if not same_tasks:
        if pairing == "paired":
            raise InputError("cannot pair: the sides ran different task indices")
        return False, ("unpaired: the sides ran different task sets, so tasks do not pair; "
                       "independent-sample tests are used")
    if pairing == "paired":
        return True, "paired (asked for): task i of each cell is compared with task i"
    if base.seed is not None and candidate.seed is not None:
        if base.seed == candidate.seed:
            return True, (f"paired: both sides ran the same task streams (seed {base.seed}), so "
                          "task i is the same task on both sides (common random numbers)")
        return False, (f"unpaired: the sides ran different seeds ({base.seed} and "
                       f"{candidate.seed}), so tasks do not pair; independent-sample tests "
                       "are used")
    same_truth = all(
        np.array_equal(base.cell_rows(b)["ground_truth"].to_numpy(),
                       candidate.cell_rows(c)["ground_truth"].to_numpy()) for b, c in pairs)
    if same_truth:
        return True, ("paired: every task has the same hidden ground truth on both sides, so "
                      "they ran the same task streams (common random numbers)")
    return False, ("unpaired: the tasks' hidden ground truth differs between the sides "
                   "(different seeds or task distributions); independent-sample tests "
                   "are used")


def _recorded_pairing(base: Side, candidate: Side, pairs: Sequence[tuple[str, str]],
                      pairing: str) -> tuple[bool, str] | None:
    """Pairing when a side replays recorded runs (its rows have a ``run_id``
    column, :mod:`sim.output.replay`): paired when both replayed the same runs
    in the same order; a replay and a simulation never pair. None when
    neither side is a replay."""
    replays = ["run_id" in side.rows.columns for side in (base, candidate)]
    if not any(replays):
        return None
    if all(replays) and all(
            base.cell_rows(b)["run_id"].astype(str).tolist()
            == candidate.cell_rows(c)["run_id"].astype(str).tolist() for b, c in pairs):
        return True, ("paired: both sides replayed the same recorded runs, so task i is the "
                      "same run on both sides")
    why = ("the sides replayed different recorded runs" if all(replays) else
           "one side replays recorded runs and the other simulates tasks")
    if pairing == "paired":
        raise InputError(f"cannot pair: {why}")
    return False, f"unpaired: {why}, so tasks do not pair; independent-sample tests are used"


def compare_sides(base: Side, candidate: Side, thresholds: Thresholds | None = None, *,
                  pairing: str = "auto") -> Comparison:
    """Compare ``candidate`` against ``base`` cell by cell (see the module
    docstring for the statistics and the verdict)."""
    thresholds = (thresholds or Thresholds()).validate()
    pairs = match_cells(base, candidate)
    paired, note = decide_pairing(base, candidate, pairs, pairing)
    level = 1 - thresholds.alpha
    outcomes, metrics, tests, checks = [], [], [], []
    for b_name, c_name in pairs:
        b_rows, c_rows = base.cell_rows(b_name), candidate.cell_rows(c_name)
        cell_outcomes = _outcome_table(b_name, b_rows, c_rows, paired, level)
        outcomes.append(cell_outcomes)
        tests.append(_distribution_test(b_name, b_rows, c_rows, paired))
        cell_metrics = _metric_table(b_name, b_rows, c_rows, paired, thresholds.resamples,
                                     level)
        metrics.append(cell_metrics)
        checks.extend(_checks(b_name, cell_outcomes, cell_metrics, thresholds))
    check_frame = pd.DataFrame(checks)
    check_frame["p_adjusted"] = holm(check_frame["p_value"].tolist())
    check_frame["regression"] = (check_frame["beyond_threshold"] == "worse") & (
        check_frame["p_adjusted"] < thresholds.alpha)
    check_frame["improvement"] = (check_frame["beyond_threshold"] == "better") & (
        check_frame["p_adjusted"] < thresholds.alpha)
    check_frame = _decide(check_frame, thresholds.alpha)
    columns = ["cell", "check", "change", "unit", "threshold", "ci_low", "ci_high", "p_value",
               "p_adjusted", "test", "beyond_threshold", "regression", "improvement", "within",
               "status", "tasks_to_decide"]
    return Comparison(base, candidate, tuple(pairs), paired, note, thresholds,
                      pd.concat(outcomes, ignore_index=True),
                      pd.concat(metrics, ignore_index=True),
                      pd.DataFrame(tests), check_frame[columns])


def _outcome_order(b_rows: pd.DataFrame, c_rows: pd.DataFrame) -> list[str]:
    """Outcomes seen on either side: succeeded first, then by base count, candidate
    count (descending) and name."""
    b = b_rows["outcome"].value_counts()
    c = c_rows["outcome"].value_counts()
    names = set(b.index) | set(c.index) | {SUCCEEDED}
    return sorted(names, key=lambda o: (o != SUCCEEDED, -b.get(o, 0), -c.get(o, 0), o))


def _outcome_table(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool,
                   level: float) -> pd.DataFrame:
    n1, n2 = len(b_rows), len(c_rows)
    b_out, c_out = b_rows["outcome"].to_numpy(), c_rows["outcome"].to_numpy()
    rows = []
    for outcome in _outcome_order(b_rows, c_rows):
        in_b, in_c = b_out == outcome, c_out == outcome
        k1, k2 = int(in_b.sum()), int(in_c.sum())
        if paired:
            both = int((in_b & in_c).sum())
            low, high = newcombe_interval(k1, k2, n1, n2, both=both, level=level)
            p, test = mcnemar_exact(k1 - both, k2 - both), "McNemar exact"
        else:
            low, high = newcombe_interval(k1, k2, n1, n2, level=level)
            p, test = fisher_exact(k1, n1, k2, n2), "Fisher exact"
        rows.append({"cell": cell, "outcome": outcome, "base_tasks": n1, "base_count": k1,
                     "base_share": k1 / n1, "candidate_tasks": n2, "candidate_count": k2,
                     "candidate_share": k2 / n2, "change_pp": 100 * (k2 / n2 - k1 / n1),
                     "ci_low_pp": 100 * low, "ci_high_pp": 100 * high, "p_value": p,
                     "test": test})
    return pd.DataFrame(rows)


def _distribution_test(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool
                       ) -> dict[str, Any]:
    names = _outcome_order(b_rows, c_rows)
    if paired:
        table = pd.crosstab(pd.Categorical(b_rows["outcome"], names),
                            pd.Categorical(c_rows["outcome"], names), dropna=False)
        statistic, df, p = stuart_maxwell(table.to_numpy())
        test = "Stuart-Maxwell (paired marginal homogeneity)"
    else:
        b = b_rows["outcome"].value_counts()
        c = c_rows["outcome"].value_counts()
        statistic, df, p = chi_square_homogeneity([int(b.get(o, 0)) for o in names],
                                                  [int(c.get(o, 0)) for o in names])
        test = "chi-square homogeneity (independent samples)"
    return {"cell": cell, "test": test, "statistic": statistic, "df": df, "p_value": p}


def _metric_table(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool,
                  resamples: int, level: float) -> pd.DataFrame:
    rows = []
    for column, _label in METRICS:
        b = b_rows[column].to_numpy()
        c = c_rows[column].to_numpy()
        db, dc = stats.describe(b), stats.describe(c)
        low, high, p = bootstrap_changes(b, c, paired=paired, resamples=resamples, level=level,
                                         relative=True)
        for i, stat in enumerate(STATS):
            change = dc[stat] - db[stat]
            rows.append({
                "cell": cell, "metric": column, "stat": stat, "base": float(db[stat]),
                "candidate": float(dc[stat]), "change": float(change),
                "change_pct": 100 * change / db[stat] if db[stat] else (
                    0.0 if change == 0 else math.inf),
                "ci_low": float(low[i]) if i < 3 else math.nan,
                "ci_high": float(high[i]) if i < 3 else math.nan,
                "ci_low_pct": float(low[i + 3]) if i < 3 else math.nan,
                "ci_high_pct": float(high[i + 3]) if i < 3 else math.nan,
                "p_value": float(p[i]) if i < 3 else math.nan})
    return pd.DataFrame(rows)


def _checks(cell: str, outcomes: pd.DataFrame, metrics: pd.DataFrame, t: Thresholds
            ) -> list[dict[str, Any]]:
    """The checks of one cell: each outcome's share, then mean and p95 cost.
    ``bad`` is +1 when a rise is bad, -1 when a fall is (the succeeded
    share); ``tasks`` the larger side's tasks."""
    out = []
    for row in outcomes.to_dict("records"):
        change = row["change_pp"]
        bad = -1 if row["outcome"] == SUCCEEDED else 1
        worse, better = bad * change > t.max_share_drop_pp, -bad * change > t.max_share_drop_pp
        out.append({"cell": cell, "check": f"{row['outcome']} share", "change": change,
                    "unit": "pp", "threshold": t.max_share_drop_pp,
                    "ci_low": row["ci_low_pp"], "ci_high": row["ci_high_pp"],
                    "p_value": row["p_value"], "test": row["test"],
                    "beyond_threshold": _beyond(worse, better), "bad": bad,
                    "tasks": max(row["base_tasks"], row["candidate_tasks"])})
    cost = metrics[metrics["metric"] == "cost_usd"].set_index("stat")
    tasks = int(outcomes["base_tasks"].iloc[0]), int(outcomes["candidate_tasks"].iloc[0])
    for stat in ("mean", "p95"):
        stat_row = frames.row(cost, stat)
        change = float(stat_row["change_pct"])
        worse, better = change > t.max_cost_rise_pct, -change > t.max_cost_rise_pct
        out.append({"cell": cell, "check": f"{stat} cost", "change": change, "unit": "%",
                    "threshold": t.max_cost_rise_pct, "ci_low": float(stat_row["ci_low_pct"]),
                    "ci_high": float(stat_row["ci_high_pct"]),
                    "p_value": float(stat_row["p_value"]),
                    "test": "bootstrap", "beyond_threshold": _beyond(worse, better), "bad": 1,
                    "tasks": max(tasks)})
    return out


def _decide(checks: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The checks with ``within``, ``status`` and ``tasks_to_decide`` added
    (see the module docstring) and the helper columns ``bad`` and ``tasks``
    dropped."""
    z = scipy_stats.norm.ppf(1 - alpha / 2)
    factor = (z + scipy_stats.norm.ppf(POWER)) / z
    within, status, needs = [], [], []
    for row in checks.to_dict("records"):
        bad, limit = row["bad"], row["threshold"]
        # the change and its interval in the bad direction: larger is worse
        d = bad * row["change"]
        low, high = sorted((bad * row["ci_low"], bad * row["ci_high"]))
        inside = bool(math.isfinite(high) and high <= limit)
        within.append(inside)
        if row["regression"]:
            status.append(REGRESSION)
        elif inside:
            status.append(WITHIN)
        else:
            status.append(INCONCLUSIVE)
        need = None
        if status[-1] == INCONCLUSIVE and math.isfinite(d):
            half, distance = (high - d, limit - d) if d <= limit else (d - low, d - limit)
            if distance > 0 and math.isfinite(half) and half > 0:
                planned = row["tasks"] * (factor * half / distance) ** 2
                need = _round_up(planned) if planned <= MAX_TASKS_TO_DECIDE else None
        needs.append(need)
    checks["within"] = within
    checks["status"] = status
    checks["tasks_to_decide"] = pd.array(needs, dtype="Int64")
    return checks.drop(columns=["bad", "tasks"])


def _round_up(n: float) -> int:
    """``n`` rounded up to two significant figures (a planning number)."""
    n = max(1, math.ceil(n))
    scale = 10 ** max(0, len(str(n)) - 2)
    return -(-n // scale) * scale


def _beyond(worse: bool, better: bool) -> str:
    return "worse" if worse else "better" if better else ""
