"""Thin evidence: when the traces are too few to tell.

**Thin evidence** (status 3): no candidate cheaper than the harness in force
keeps successes, yet one of them loses no more than the allowed share on these
runs: the traces are too few to tell. The runs that would decide are those
giving the allowed share's test 80% power for that candidate, assuming its
observed loss is the true one and the interval's half-width shrinks as
``1/sqrt(n)`` (:mod:`sim.analysis.compare`'s planning rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import stats as scipy_stats

from sim.analysis.compare import POWER
from sim.tuning.evidence import pct_interval

__all__ = ["STATUS_THIN", "Thin", "judge_thin", "runs_to_decide"]

ALPHA = 0.05
MAX_RUNS_TO_DECIDE = 10**9
STATUS_THIN = 3


def runs_to_decide(n: int, share: float, high: float, limit: float) -> int | None:
    """Runs giving the test of ``share <= limit`` 80% power (module docstring)."""
    z = scipy_stats.norm.ppf(1 - ALPHA / 2)
    factor = (z + scipy_stats.norm.ppf(POWER)) / z
    half, distance = high - share, limit - share
    if distance <= 0 or half <= 0:
        return None
    planned = n * (factor * half / distance) ** 2
    if planned > MAX_RUNS_TO_DECIDE:
        return None
    planned = max(1, math.ceil(planned))
    scale = 10 ** max(0, len(str(planned)) - 2)
    return int(-(-planned // scale) * scale)


@dataclass(frozen=True)
class Thin:
    """The verdict of thin evidence (status :data:`STATUS_THIN`): why the runs
    are too few to tell and, when more runs could decide, about how many."""

    why: str
    runs_to_decide: int | None = None


def judge_thin(recommended: dict[str, Any], base: dict[str, Any],
               candidates: list[dict[str, Any]], limit: float) -> Thin | None:
    """Thin evidence for the recommended frontier row ``recommended`` among
    ``candidates`` (module docstring), or None when the evidence suffices."""
    if not base["base_successes"]:
        return Thin("no recorded run succeeded under the harness in force: there are no "
                    "successes to keep, so no limit can be judged")
    if recommended["objective_ratio"] < 1.0:
        return None
    hopeful = [r for r in candidates if r["objective_ratio"] < 1.0 and r["lost_share"] <= limit
               and not r["keeps_successes"]]
    if not hopeful:
        return None
    needs = [(runs_to_decide(r["runs"], r["lost_share"], r["lost_high"], limit), r)
             for r in hopeful]
    decidable = [(n, r) for n, r in needs if n is not None]
    if decidable:
        n, r = min(decidable, key=lambda nr: nr[0])
        forecast = r["method"] == "forecast"
        which = "simulated runs (--forecast-runs)" if forecast else "runs like these"
        return Thin(f"too few runs to tell: {r['setting']} ({r['method']}) loses "
                    f"{pct_interval(r['lost_share'], r['lost_low'], r['lost_high'])} of "
                    f"{r['base_successes']:,} {'simulated' if forecast else 'recorded'} "
                    f"successes, within the {100 * limit:g}% allowed but not surely; about "
                    f"{n:,} {which} would decide (80% power), against {r['runs']:,} now", n)
    return Thin("too few runs to tell: every cheaper setting's loss of successes is "
                "at its limit, which more runs cannot decide")
