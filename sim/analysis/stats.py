"""Summary statistics used by every table, summary.json and report.

**The one percentile definition** (seed 001's ``pct``): sort the sample
x(0) <= ... <= x(n-1) and take the value at 0-based rank ``floor(q*n)``,
clamped to ``n-1``. So a percentile is always an observed value (never an
interpolation), p50 of an even-sized sample is the upper median, and p100 is
the max. Equivalently, it is the smallest observed x whose empirical CDF
exceeds q (strictly). It equals numpy's ``method="inverted_cdf"`` when ``q*n``
is not an integer and is the next order statistic up when it is.

``q*n`` is the floating-point product, exactly as seed 001 computes it
(``int(q * len(xs))``), so results match seed 001 and numpy's float arithmetic.
For the quantiles reports use, the float rank equals the exact one (0.5
always; 0.95 checked for every n up to 200,000); a ``q`` such as 0.29 (stored
as 0.28999...) can land one rank lower than its decimal suggests. Pass a
:class:`~fractions.Fraction` for exact ranks: ``Fraction(29, 100)``.

Units are those of the input: steps are counts, tokens are counts, cost is
USD, times are seconds. Results are plain Python numbers (``int`` for integral
input, ``float`` otherwise) so that JSON output is stable. These functions run
once per cell, never per simulated step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from statistics import NormalDist
from typing import Literal, cast

import numpy as np
from numpy.typing import ArrayLike

CI_METHODS: tuple[str, ...] = ("wilson", "exact")


def _sample(values: ArrayLike) -> np.ndarray:
    """A 1-D numeric array of ``values`` (booleans as 0/1); raises ValueError
    when empty, not numeric or containing NaN."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        raise ValueError("statistics of an empty sample are undefined")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"statistics need numbers, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("sample contains NaN")
    return arr


def rank(q: float | Fraction, n: int) -> int:
    """The 0-based rank ``min(n-1, floor(q*n))`` of the q-th percentile in a
    sorted sample of ``n`` values; ``q`` in [0, 1]. ``q*n`` is a float product
    (seed 001's ``int(q * n)``), or exact when ``q`` is a Fraction."""
    if n < 1:
        raise ValueError("rank needs a sample of at least one value")
    if not isinstance(q, Fraction):
        q = float(q)
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    return min(n - 1, math.floor(q * n))


def percentile(values: ArrayLike, q: float | Fraction) -> int | float:
    """The value at 0-based rank ``floor(q*n)`` (clamped to ``n-1``) of the
    sorted sample: an observed value, in the units of ``values``.

    >>> percentile([10, 20, 30, 40], 0.5)
    30
    >>> percentile([1.5, 0.5, 2.5], 0.95)
    2.5
    """
    arr = _sample(values)
    r = rank(q, arr.size)
    return np.partition(arr, r)[r].item()


def _mean(arr: np.ndarray) -> float:
    """Mean from an exact integer sum or a correctly rounded ``math.fsum``, so
    it does not depend on summation order; clamped to [min, max] against
    rounding."""
    if arr.dtype.kind in "iu":
        return int(arr.sum()) / arr.size
    mean = math.fsum(arr.tolist()) / arr.size
    return min(max(mean, float(arr.min())), float(arr.max()))


def _total(arr: np.ndarray) -> int | float:
    """Sum as an exact int, or a correctly rounded float (``math.fsum``)."""
    if arr.dtype.kind in "iu":
        return int(arr.sum())
    return math.fsum(arr.tolist())


def describe(values: ArrayLike) -> dict[str, int | float]:
    """``{"p50", "p95", "max", "mean"}`` of a sample, in its units.

    Percentiles follow the module's definition (observed values: ``int`` for
    integral input); the mean is a ``float``.
    """
    arr = np.sort(_sample(values))
    n = arr.size
    return {
        "p50": arr[rank(0.5, n)].item(),
        "p95": arr[rank(0.95, n)].item(),
        "max": arr[-1].item(),
        "mean": _mean(arr),
    }


def cost_summary(costs: ArrayLike) -> dict[str, float]:
    """``{"mean", "p50", "p95", "max", "total"}`` of per-task costs in USD
    (all floats; the total is a correctly rounded sum)."""
    arr = np.sort(_sample(costs).astype(np.float64))
    n = arr.size
    return {
        "mean": _mean(arr),
        "p50": float(arr[rank(0.5, n)]),
        "p95": float(arr[rank(0.95, n)]),
        "max": float(arr[-1]),
        "total": float(_total(arr)),
    }


def outcome_counts(outcomes: Iterable[str]) -> dict[str, int]:
    """``{outcome: count}`` ordered by count descending, then by name."""
    counts = Counter(outcomes)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def outcome_shares(outcomes: Iterable[str]) -> dict[str, float]:
    """``{outcome: share}`` (share = count / tasks, in [0, 1]) ordered by share
    descending, then by name; ``{}`` for no outcomes."""
    counts = outcome_counts(outcomes)
    n = sum(counts.values())
    return {name: count / n for name, count in counts.items()}


def share_ci(k: int, n: int, level: float = 0.95, method: str = "wilson") -> tuple[float, float]:
    """Two-sided confidence interval ``(low, high)`` for a share ``k/n``.

    ``method`` is ``"wilson"`` (Wilson score interval: good coverage near the
    nominal ``level`` on average, the default for comparison reports) or
    ``"exact"`` (Clopper-Pearson: coverage at least ``level`` for every true
    share, wider). Bounds are shares in [0, 1], as
    :func:`scipy.stats.binomtest` gives them (Wilson in closed form here,
    Clopper-Pearson by scipy).
    """
    if method not in CI_METHODS:
        raise ValueError(f"method must be one of {CI_METHODS}, got {method!r}")
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if method == "wilson":  # closed form, Newcombe (1998), as scipy computes it
        return _wilson(int(k), int(n), level)
    from scipy import stats as scipy_stats  # imported here: scipy is slow to import

    ci = scipy_stats.binomtest(int(k), int(n)).proportion_ci(
        confidence_level=level, method=cast(Literal["exact"], method))  # wilson: above
    return float(ci.low), float(ci.high)


def _wilson(k: int, n: int, level: float) -> tuple[float, float]:
    """The two-sided Wilson score interval without continuity correction, in
    the arithmetic of scipy's ``binomtest(k, n).proportion_ci(method="wilson")``
    (so a simulating command needs no scipy to report its shares)."""
    p = k / n
    z = NormalDist().inv_cdf(0.5 + 0.5 * level)
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    return (0.0 if k == 0 else center - delta), (1.0 if k == n else center + delta)
