"""Sampling tolerances shared by the statistical tests (one definition each).

A share observed in ``n`` independent trials is checked against the
probability ``p`` that theory gives it, within ``z`` binomial standard errors
``sqrt(p (1 - p) / n)``; each test module states its ``z`` (or the false-alarm
rate it comes from), so every call says how strict it is.
"""

from __future__ import annotations

import math

from scipy import stats


def z_of(alpha: float) -> float:
    """The two-sided normal critical value for a false-alarm rate ``alpha``."""
    return float(stats.norm.ppf(1 - alpha / 2))


def within(share: float, p: float, n: float, *, z: float) -> bool:
    """Whether ``share`` (observed successes / ``n``) is within ``z`` binomial
    standard errors of ``p``. At p = 0 or 1 the allowance is below 1 / n for
    any practical n, so only an exact agreement passes."""
    return abs(share - p) <= z * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12
