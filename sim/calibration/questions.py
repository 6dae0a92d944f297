"""The questions a calibration's forecast is judged on out of sample, and
the one row type that holds each answer (:class:`Row`).

A question is a key with a label and a unit: the ladder's figures
(:data:`LADDER`: shares, shown in points), the per-run metrics (KS
distances) and the fan-out's (:data:`FANOUT`, measured by
:func:`sim.calibration.fanout.validate`). :mod:`sim.calibration.accuracy`
builds the rows of the ladder and the per-run metrics, :mod:`sim.calibration.fanout`
those of the fan-out (with a sampling limit); both use :class:`Row`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

LADDER = ("stopped", "lost", "saved")
"""The ladder questions (shares of runs or of dollars; in points when times 100)."""

FANOUT: dict[str, str] = {
    "children": "children per run (KS)",
    "spawn_rate": "spawns per productive call, by step bin",
    "child_steps": "steps per child (KS)",
}
"""The fan-out questions :func:`sim.calibration.fanout.validate` answers (key -> what it is)."""

QUESTIONS: dict[str, str] = {
    "stopped": "share stopped",
    "lost": "successes lost",
    "saved": "dollars saved",
    "steps": "steps per run (KS)",
    "prompt": "prompt tokens per run (KS)",
    "output": "output tokens per run (KS)",
    "cost": "cost per run (KS)",
    **FANOUT,
}
"""Question key -> what it is (ladder figures first, then per-run KS
distances, then the fan-out's)."""


def unit(key: str) -> str:
    """The unit of question ``key``'s error and floor."""
    if key in LADDER:
        return "share (x100: points)"
    return "share" if key == "spawn_rate" else "KS distance"


@dataclass(frozen=True)
class Row:
    """One question over the folds: ``error`` (the forecast's, or the fitted
    parameters', mean miss of the held-out runs), ``floor`` (the same miss
    when the other folds' runs are the forecast: the sampling floor), over
    ``cells`` (rung-and-fold, fold, or fold-and-bin cells); ``limit``, when
    known, the error a right fit exceeds with chance about 1% (the fan-out's
    rows: :func:`sim.calibration.fanout.validate`), else None."""

    key: str
    error: float
    floor: float
    cells: int
    limit: float | None = None

    @property
    def label(self) -> str:
        """What the question is."""
        return QUESTIONS[self.key]

    @property
    def ratio(self) -> float:
        """Error over floor (NaN when the floor is 0 or unknown)."""
        return self.error / self.floor if self.floor > 0 else math.nan

    @property
    def passed(self) -> bool | None:
        """Whether the error is within the sampling limit (None without one)."""
        return None if self.limit is None else self.error <= self.limit

    def summary(self) -> dict[str, Any]:
        """The row as JSON-ready numbers: the question, error, floor, ratio and
        cells, then the limit and whether it passed for a row with a limit
        (``calibration.json``'s fan-out ``held_out``), else the unit (the
        accuracy table's rows)."""
        out: dict[str, Any] = {"question": self.label, "error": self.error,
                               "floor": self.floor, "ratio": self.ratio, "cells": self.cells}
        if self.limit is not None:
            return out | {"limit": self.limit, "passed": self.passed}
        return out | {"unit": unit(self.key)}
