"""Thin evidence: when the traces are too few to tell.

A candidate **might save more** than the recommendation when it is cheaper
than it and loses no more than the allowed share of successes on these runs,
yet the upper end of its interval is above the allowed share: more runs could
show it keeps successes. The runs that would decide are those giving the
allowed share's test 80% power for that candidate, assuming its observed loss
is the true one and the interval's half-width shrinks as ``1/sqrt(n)``
(:mod:`sim.analysis.compare`'s planning rule).

**Thin evidence** (status 3): the recommendation is to keep the harness in
force (nothing that differs was shown to cost less and keep successes) while
such a candidate exists, or no recorded run succeeded (or none records
whether it did: the traces hold no outcome). When the
recommendation already saves, a candidate that might save more is reported
(:attr:`Thin.candidate`) with status 0: there is a setting to act on now.
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
    """What more runs could decide: ``why`` in a sentence, about how many
    runs would decide (``runs_to_decide``, None when more runs cannot), the
    frontier row that might save more (``candidate``, None when no run
    succeeded), and whether the evidence is thin (``status`` 3) or only
    leaves a cheaper setting open beside a recommendation that saves (0)."""

    why: str
    runs_to_decide: int | None = None
    candidate: dict[str, Any] | None = None
    status: int = STATUS_THIN


def judge_thin(recommended: dict[str, Any], base: dict[str, Any],
               candidates: list[dict[str, Any]], limit: float, judged: int | None = None
               ) -> Thin | None:
    """What more runs could decide beside the recommended frontier row
    ``recommended`` (``base`` is the harness in force) among ``candidates``
    (module docstring), or None when nothing cheaper is open. ``judged``:
    the runs whose source records whether they were resolved (None: not
    counted)."""
    if not base["base_successes"]:
        if judged == 0:
            return Thin("no recorded run says whether it succeeded (the traces hold no "
                        "outcome: resolved is empty), so there are no successes to keep and "
                        "no limit can be judged")
        return Thin("no recorded run succeeded under the harness in force: there are no "
                    "successes to keep, so no limit can be judged")
    status = STATUS_THIN if recommended is base else 0
    hopeful = [r for r in candidates
               if r["objective_ratio"] < recommended["objective_ratio"] - 1e-9
               and r["lost_share"] <= limit and not r["keeps_successes"]]
    if not hopeful:
        return None
    needs = [(runs_to_decide(r["runs"], r["lost_share"], r["lost_high"], limit), r)
             for r in hopeful]
    decidable = [(n, r) for n, r in needs if n is not None]
    if decidable:
        n, r = min(decidable, key=lambda nr: (nr[0], nr[1]["objective_ratio"]))
        forecast = r["method"] == "forecast"
        which = "simulated runs (--forecast-runs)" if forecast else "runs like these"
        return Thin(f"too few runs to tell: {r['setting']} ({r['method']}) loses "
                    f"{pct_interval(r['lost_share'], r['lost_low'], r['lost_high'])} of "
                    f"{r['base_successes']:,} {'simulated' if forecast else 'recorded'} "
                    f"successes, within the {100 * limit:g}% allowed but not surely; about "
                    f"{n:,} {which} would decide (80% power), against {r['runs']:,} now",
                    n, r, status)
    r = min(hopeful, key=lambda row: row["objective_ratio"])
    return Thin("too few runs to tell: every cheaper setting's loss of successes is "
                "at its limit, which more runs cannot decide", None, r, status)
