"""Candidates the recording cannot answer, forecast by the calibrated world.

A setting that loosens a budget in force (runs the recorded harness stopped
would have gone on: the recording holds nothing past the stop) or changes the
no-progress detector is evaluated on the world calibrated to the same traces
(:func:`calibrated_world`): ``runs`` simulated tasks under the harness in force
and under the candidate, on common random numbers (task ``i`` is the same
task on both sides, so the successes lost are counted pairwise, as in
replay). Every number of such a row is labelled ``forecast`` and carries the
calibration's verdict (its ``fidelity``).

:func:`calibrated_world` is the one place this package calls calibration, so
that a change of calibration's entry point touches one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.bad_input import InputError
from sim.tuning import evidence
from sim.tuning.knobs import Setting, scenario_changes

FORECAST = "forecast"
DEFAULT_RUNS = 2000
"""Simulated tasks per forecast candidate (and for the harness in force)."""


@dataclass(frozen=True)
class CalibratedWorld:
    """A world fitted to the traces: ``doc`` is the fitted scenario document
    (a mapping with ``harness`` and ``world``), ``accepted`` the calibration's
    verdict, ``reasons`` why it was rejected (empty when accepted)."""

    doc: dict[str, Any]
    accepted: bool
    reasons: tuple[str, ...] = ()

    @property
    def fidelity(self) -> str:
        """The verdict as a sentence attached to every forecast."""
        if self.accepted:
            return "calibrated world, fit accepted on held-out runs"
        return "calibrated world, fit REJECTED: " + "; ".join(self.reasons)


def calibrated_world(folder: str | Path, *, seed: int = 0, evaluations: int = 45
                     ) -> CalibratedWorld:
    """Fit a world to the trace folder (the adapter to :mod:`sim.calibration`)."""
    from sim.calibration.pipeline import calibrate

    result = calibrate(folder, seed=seed, evaluations=evaluations, with_ladder=False,
                       progress=False)
    return CalibratedWorld(dict(result.doc), result.status == 0, tuple(result.reasons))


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    node = doc
    *head, last = dotted.split(".")
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value


class ForecastEvaluator:
    """Simulates candidates on a calibrated world, paired with the harness in
    force (``in_force``: the setting of the knobs searched as they are)."""

    def __init__(self, world: CalibratedWorld, in_force: Setting, *, runs: int = DEFAULT_RUNS,
                 seed: int = 0) -> None:
        if runs < 1:
            raise InputError(f"forecast runs must be at least 1, got {runs}")
        self.world = world
        self.runs = runs
        self.seed = seed
        base = self._simulate(in_force)
        self.base_success = base["success"]
        self.base_cost = base["cost"]

    def _simulate(self, s: Setting) -> dict[str, Any]:
        import copy

        from sim.engines.direct import run_task
        from sim.scenario.model import validate
        from sim.sweeps.cells import build_cell, cells_of
        from sim.world.streams import StreamPool

        doc = copy.deepcopy(self.world.doc)
        doc.pop("sweep", None)
        for dotted, value in scenario_changes(s).items():
            _set(doc, dotted, value)
        doc.update(seed=self.seed, tasks=self.runs)
        scenario = validate(doc, str(doc.get("name") or "calibrated world"))
        cell = build_cell(cells_of(scenario)[0])
        pool = StreamPool()
        records = [run_task(cell, i, pool) for i in range(self.runs)]
        return {"success": np.array([r.outcome == "succeeded" for r in records]),
                "cost": np.array([r.cost_usd for r in records]),
                "time": np.array([r.active_s for r in records]),
                "outcomes": [r.outcome for r in records]}

    def evaluate(self, s: Setting) -> dict[str, Any]:
        """The frontier row of the candidate ``s`` (a forecast)."""
        sim = self._simulate(s)
        return evidence.row(base_success=self.base_success, success=sim["success"],
                            cost=sim["cost"], base_cost=self.base_cost, time_s=sim["time"],
                            outcomes=sim["outcomes"], method=FORECAST,
                            fidelity=self.world.fidelity)
