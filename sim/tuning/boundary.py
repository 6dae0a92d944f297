"""The boundary of a budget knob: between the last value that keeps successes
and the first that does not, to the resolution a user can set.

The grid (:mod:`sim.tuning.knobs`) places candidates at the recorded runs'
own quantiles, so two neighbours can be far apart (360,000 then 250,000
tokens). For each budget knob searched alone, :func:`find_boundary` takes the
tightest grid value that keeps successes (``keeps``) and the next tighter one
that does not (``refused``), and bisects between them: each midpoint, rounded
to :func:`resolution`, is evaluated (replayed: both ends only tighten the
harness in force, so every midpoint does too) and becomes the new ``keeps``
or ``refused``, until they are one resolution apart. Replaying a tighter
budget never admits a call a looser one refused, so what a budget keeps is
monotone in it and the bisection finds the tightest value that keeps
successes between the two.

Every step is recorded (:class:`Step`: the value, whether it keeps
successes, the runs it stops and the successes it loses), so a report can
show where the boundary lies and what each side costs.

Resolution (what a user sets): a step budget to 1 step; a token or money
budget to three significant figures of the looser end (tokens at least 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.tuning.knobs import BUDGET_KNOBS, Value

__all__ = ["Boundary", "Step", "between", "find_boundary", "resolution"]

MAX_STEPS = 24
"""Evaluations one bisection may make (a guard; 3 significant figures need ~10)."""


def resolution(knob: str, value: float) -> float:
    """The finest difference a user sets for ``knob`` near ``value`` (> 0)."""
    if knob == "steps":
        return 1.0
    scale = 10.0 ** (math.floor(math.log10(value)) - 2) if value > 0 else 1.0
    return max(scale, 1.0) if knob == "tokens" else scale


def between(knob: str, low: float, high: float) -> Value:
    """A value strictly between ``low`` and ``high`` rounded to the resolution
    at ``high``, or None when none is left (they are one resolution apart)."""
    step = resolution(knob, high)
    mid = math.floor(((low + high) / 2) / step) * step
    if knob == "money":
        mid = float(f"{mid:.12g}")
    if mid <= low + 1e-12:
        mid = low + step
    if not (low + 1e-12 < mid < high - 1e-12):
        return None
    return mid if knob == "money" else round(mid)


@dataclass(frozen=True)
class Step:
    """One evaluated value of the bisection: whether it ``keeps`` successes,
    the runs it ``stops``, the successes it loses (``lost`` of ``of``)."""

    value: Value
    keeps: bool
    stops: int
    lost: int
    of: int


@dataclass
class Boundary:
    """A knob's boundary: the tightest value found that keeps successes
    (``keeps``, None when no grid value does) and the loosest that does not
    (``refused``), with every ``steps`` evaluated (grid ends first)."""

    knob: str
    keeps: Value = None
    refused: Value = None
    steps: list[Step] = field(default_factory=list)

    def sentence(self) -> str:
        """``steps: keeps successes at 26 (stops 3 runs, loses 0 of 517); not
        at 25 (stops 5, loses 2); 4 values bisected``."""
        def said(s: Step) -> str:
            return f"stops {s.stops:,} runs, loses {s.lost:,} of {s.of:,}"

        by_value = {s.value: s for s in self.steps}
        if self.keeps is None or self.refused is None:
            return f"{self.knob}: no boundary between grid values to search"
        keep, refuse = by_value[self.keeps], by_value[self.refused]
        return (f"{self.knob}: keeps successes at {_shown(self.knob, self.keeps)} "
                f"({said(keep)}); not at {_shown(self.knob, self.refused)} ({said(refuse)}); "
                f"{max(0, len(self.steps) - 2)} values bisected")


def _shown(knob: str, value: Value) -> str:
    if value is None:
        return "unlimited"
    return f"${value:g}" if knob == "money" else f"{int(value):,}"


def find_boundary(knob: str, grid: list[Value], rows: Mapping[Value, dict[str, Any] | None],
                  evaluate: Callable[[Value], dict[str, Any] | None],
                  keeps: Callable[[dict[str, Any]], bool],
                  replayable: Callable[[Value], bool]) -> Boundary:
    """Bisect ``knob`` between its tightest grid value that keeps successes
    and the next tighter one (module docstring). ``rows``: the grid's frontier
    rows by value (None rows skipped); ``evaluate(value)``: a value's row
    with the other knobs as in force; ``keeps(row)``: whether it keeps
    successes; ``replayable(value)``: whether it only tightens the harness in
    force (both ends must, or nothing is bisected)."""
    found = Boundary(knob)
    if knob not in BUDGET_KNOBS:
        return found
    known = {v: r for v, r in rows.items() if v is not None and r is not None}
    finite = sorted(v for v in grid if v in known)
    kept = [v for v in finite if keeps(known[v])]
    if not kept:
        return found
    hi = kept[0]
    below = [v for v in finite if v < hi]
    if not below:
        return found
    lo = below[-1]
    if not (replayable(hi) and replayable(lo)):
        return found
    found.keeps, found.refused = hi, lo
    found.steps += [_step(lo, known[lo], keeps), _step(hi, known[hi], keeps)]
    for _ in range(MAX_STEPS):
        assert hi is not None and lo is not None
        mid = between(knob, float(lo), float(hi))
        if mid is None:
            break
        row = evaluate(mid)
        if row is None:
            break
        step = _step(mid, row, keeps)
        found.steps.append(step)
        if step.keeps:
            hi = found.keeps = mid
        else:
            lo = found.refused = mid
    return found


def _step(value: Value, row: dict[str, Any], keeps: Callable[[dict[str, Any]], bool]) -> Step:
    return Step(value, keeps(row), int(row["stopped_runs"]), int(row["lost"]),
                int(row["base_successes"]))
