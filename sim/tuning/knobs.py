"""The limits ``tune`` searches, a candidate setting as data, and its grid.

A **knob** is one harness limit: ``tokens`` (``harness.budgets.tokens``,
prompt tokens over a run), ``money`` (``harness.budgets.money_usd``, USD per
run), ``steps`` (``harness.budgets.steps``, model calls per run) and
``detector`` (the no-progress detector's ``repeat_threshold``: identical calls
in a row that count as a loop; 0 means the detector is off). A **setting**
maps each searched knob to a value; None is an unlimited budget.

A value *tightens* the harness in force when it is a finite budget at or
below the one in force (or any finite budget where none is in force); such a
setting can be replayed exactly on recorded runs. A looser budget, or any
change of the detector, needs the calibrated world (a forecast).

**The grid** of a budget knob comes from what each recorded run *needed* for
the harness to admit every call it made (:func:`needs`): its step count, its
prompt tokens over all calls, and for money the largest ``spent before call
k + worst case of call k`` (the harness refuses a call whose worst case would
overshoot: :func:`sim.harness.budgets.worst_case_cost`). The candidates are
those needs' quantiles over the recorded successes, rounded up to two
significant figures (so a candidate admits every run whose need is at or below
the quantile), plus the largest need of all runs; where a budget is in force,
looser values (x1.5, x2) are added as forecasts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.bad_input import InputError

BUDGET_KNOBS: tuple[str, ...] = ("tokens", "money", "steps")
KNOBS: tuple[str, ...] = (*BUDGET_KNOBS, "detector")
FIELDS: dict[str, str] = {"tokens": "tokens", "money": "money_usd", "steps": "steps"}
"""Budget knob -> field of ``harness.budgets``."""
UNITS: dict[str, str] = {"tokens": "prompt tokens per run", "money": "USD per run",
                         "steps": "model calls per run",
                         "detector": "identical calls in a row (0: off)"}
QUANTILES: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99, 1.0)
"""Quantiles of the recorded successes' needs that become candidates."""
LOOSER: tuple[float, ...] = (1.5, 2.0)
"""Factors of a budget in force that become (forecast) candidates."""
DETECTOR_GRID: tuple[int, ...] = (0, 5, 4, 3, 2)
"""Candidate repeat thresholds of the detector knob (0: off)."""

Value = int | float | None
Setting = tuple[tuple[str, Value], ...]
"""A candidate: ``((knob, value), ...)`` in :data:`KNOBS` order (hashable)."""


def parse_knobs(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """The knobs of ``--knobs`` (comma-separated, or a sequence), in
    :data:`KNOBS` order; None or ``budgets`` gives the budget knobs. An
    unknown name is an InputError naming the option."""
    if text is None:
        return BUDGET_KNOBS
    items = text.split(",") if isinstance(text, str) else list(text)
    names: set[str] = set()
    for item in (i.strip() for i in items):
        if item == "budgets":
            names.update(BUDGET_KNOBS)
        elif item in KNOBS:
            names.add(item)
        elif item:
            raise InputError(f"unknown knob {item!r}; choose among {', '.join(KNOBS)} "
                             f"(or 'budgets')", path="--knobs")
    if not names:
        raise InputError("no knob to search", path="--knobs")
    return tuple(k for k in KNOBS if k in names)


_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9}


def _candidate(knob: str, text: str) -> Value:
    """One ``--candidates`` value of ``knob`` (``1.2M``, ``$0.5``, ``30``,
    ``unlimited``; ``off`` or a threshold for the detector)."""
    word = text.strip().lower().replace(",", "").replace("_", "")
    if word in ("unlimited", "none"):
        if knob == "detector":
            raise ValueError("the detector takes off or a repeat threshold")
        return None
    if knob == "detector" and word == "off":
        return 0
    word = word.removeprefix("$")
    scale = _SUFFIX.get(word[-1:], 1.0)
    number = float(word[:-1] if scale != 1.0 else word)
    if not math.isfinite(number) or number < 0 or (number == 0 and knob != "detector"):
        raise ValueError("must be positive")
    value = round(number * scale, 6)
    if value == 0 and knob != "detector":  # below the millionth a money value keeps
        raise ValueError("must be at least 0.000001")
    if knob == "money":
        return value
    if value != int(value):
        raise ValueError("must be a whole number")
    return int(value)


def parse_candidates(text: str | Sequence[str] | Mapping[str, Sequence[Value]] | None,
                     knobs: Sequence[str] = KNOBS) -> dict[str, list[Value]]:
    """A user's own candidates: ``tokens=1.2M,1.5M steps=30,40 money=$0.5``
    (one text or several; ``k``/``M`` suffixes, ``unlimited``), or a mapping;
    an unknown knob, one not searched or a bad value is an InputError naming
    ``--candidates``."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {k: list(v) for k, v in text.items()}
    items = text.split() if isinstance(text, str) else [w for t in text for w in t.split()]
    out: dict[str, list[Value]] = {}
    for item in items:
        knob, sep, values = item.partition("=")
        if not sep or knob not in KNOBS:
            raise InputError(f"{item!r} is not KNOB=VALUE,VALUE with KNOB among "
                             f"{', '.join(KNOBS)} (e.g. tokens=1.2M,1.5M)", path="--candidates")
        if knob not in knobs:
            raise InputError(f"{knob} is not searched (--knobs {','.join(knobs)})",
                             path="--candidates")
        for value in filter(None, values.split(",")):
            try:
                out.setdefault(knob, []).append(_candidate(knob, value))
            except (ValueError, IndexError) as error:
                raise InputError(f"{knob}={value!r}: {error}", path="--candidates") from None
    return out


def setting(values: Mapping[str, Value]) -> Setting:
    """A setting from ``{knob: value}`` (knobs in :data:`KNOBS` order)."""
    return tuple((k, values[k]) for k in KNOBS if k in values)


def label(s: Setting) -> str:
    """``tokens=120000 steps=30`` (``unlimited``/``off`` for None/0)."""
    parts = []
    for knob, value in s:
        if knob == "detector":
            shown = "off" if not value else f"repeat {value}"
        elif value is None:
            shown = "unlimited"
        elif knob == "money":
            shown = f"${value:g}"
        else:
            shown = f"{int(value):,}"
        parts.append(f"{knob}={shown}")
    return " ".join(parts)


@dataclass(frozen=True)
class InForce:
    """The harness in force, as the knobs see it: each budget knob's value
    (None: unlimited) and the detector's repeat threshold (0: off)."""

    values: Mapping[str, Value]

    def tightens(self, s: Setting) -> bool:
        """Whether ``s`` only tightens (or keeps) the harness in force: every
        budget finite and at or below the one in force, the detector as it is."""
        for knob, value in s:
            current = self.values.get(knob)
            if knob == "detector":
                if (value or 0) != (current or 0):
                    return False
            elif value is None:
                if current is not None:
                    return False
            elif current is not None and value > current:
                return False
        return True


def nice_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant figures (x > 0).

    >>> nice_up(123456), nice_up(0.01234), nice_up(30)
    (130000.0, 0.013, 30.0)
    """
    if x <= 0 or not math.isfinite(x):
        raise ValueError(f"nice_up needs a positive number, got {x!r}")
    scale = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    value = math.ceil(round(x / scale, 9)) * scale
    return float(f"{value:.{digits}g}")


def budget_grid(knob: str, needs_all: np.ndarray, succeeded: np.ndarray,
                in_force: Value) -> list[Value]:
    """Candidate values of a budget knob from the runs' needs (see the module
    docstring), ascending, then None when no budget is in force."""
    if knob not in BUDGET_KNOBS:
        raise ValueError(f"not a budget knob: {knob!r}")
    base = needs_all[succeeded] if succeeded.any() else needs_all
    values: set[float] = set()
    if base.size:
        ordered = np.sort(base)
        for q in QUANTILES:
            values.add(_round(knob, float(ordered[min(len(ordered) - 1, math.floor(q * len(
                ordered)))])))
    if needs_all.size:
        values.add(_round(knob, float(needs_all.max())))
    if in_force is not None:
        values = {v for v in values if v <= in_force} | {float(in_force)}
        values.update(_round(knob, in_force * f) for f in LOOSER)
    grid: list[Value] = [int(v) if knob != "money" else v for v in sorted(values) if v > 0]
    if in_force is None:
        grid.append(None)
    return grid


def _round(knob: str, value: float) -> float:
    value = max(value, 1e-6 if knob == "money" else 1.0)
    if knob == "steps":
        return float(math.ceil(value))
    return nice_up(value)


def detector_grid(in_force: Value) -> list[Value]:
    """Candidate repeat thresholds: off and 5..2, the one in force included."""
    grid: list[Value] = list(DETECTOR_GRID)
    if in_force and in_force not in grid:
        grid.append(int(in_force))
    return grid


def neighbours(grid: Sequence[Value], value: Value) -> list[Value]:
    """``value`` and its neighbours on ``grid`` (one step each way)."""
    i = list(grid).index(value)
    return list(grid[max(0, i - 1):i + 2])


def cheaper_first(grid: Iterable[Value]) -> list[Value]:
    """Budget values tightest first (None last)."""
    return sorted(grid, key=lambda v: (v is None, v if v is not None else 0))


def scenario_changes(s: Setting) -> dict[str, Any]:
    """The setting as dotted scenario paths: ``{"harness.budgets.tokens": v,
    "harness.detector.enabled": b, "harness.detector.repeat_threshold": r}``."""
    out: dict[str, Any] = {}
    for knob, value in s:
        if knob == "detector":
            out["harness.detector.enabled"] = bool(value)
            if value:
                out["harness.detector.repeat_threshold"] = int(value)
        else:
            out[f"harness.budgets.{FIELDS[knob]}"] = value
    return out
