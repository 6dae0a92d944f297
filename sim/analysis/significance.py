"""Significance tests and intervals for comparing outcome shares, and Holm's
adjustment of many p-values (the statistical primitives of
:mod:`sim.analysis.compare`; see its docstring for which test is used when).

Shares are in [0, 1]; changes of shares are differences in [-1, 1]. Each
function is pure: counts in, an interval or a p-value out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from sim.analysis import stats


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
