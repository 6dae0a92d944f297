"""How far the forecast is from held-out runs, against the sampling floor.

A calibration's forecast answers questions about runs it did not see: for a
ladder of budgets (:mod:`sim.calibration.ladder`), the share of runs stopped,
the successes lost and the dollars saved; and the distribution of each per-run
metric (steps, prompt tokens, output tokens, cost). Each fold's forecast
misses its held-out runs by some amount, and part of that is sampling: even a
perfect model, fitted on the other folds' runs, would miss by as much as those
runs themselves do. So each error is shown beside its **sampling floor**, the
error of the other folds' runs taken *as* the forecast (their replay under
the budget, or their per-run values), which is the error of a model that
reproduces its training runs exactly:

- **a ladder question** (``stopped``, ``lost``, ``saved``): per rung and fold,
  ``|forecast_k - replay_k|`` and ``|floor_k - replay_k|`` (shares, so in
  points when times 100); the error is the mean over every rung and fold;
- **a per-run metric**: per fold, the KS distance of the held-out runs to the
  fold world's simulation, and to the other folds' held-out runs pooled; the
  mean over folds;
- **fan-out** (traces whose calls record subagents): children per run, spawn
  rate by step bin and steps per child of each fold's held-out runs against
  the fan-out fitted on the other folds, and against those folds' runs
  (:func:`sim.calibration.fanout.validate`).

``ratio`` is error over floor: about 1 means as good as the sample sizes
allow (the floor's training set is the same size as the world's), well above
1 a misfit. The floor is noisier than a world's simulation of many runs, so
a right world can come out a little below 1.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from sim.calibration.questions import LADDER, Row
from sim.calibration.simulate import Sample, pooled


def ladder_rows(rungs: list[Any]) -> list[Row]:
    """The ladder questions' rows from :class:`sim.calibration.ladder.Rung`
    per-fold figures (rungs and folds without a finite floor left out)."""
    out = []
    for key in LADDER:
        errors, floors = [], []
        for rung in rungs:
            for fold in rung.folds:
                fc, rp, fl = (fold.get(s, {}).get(key, math.nan)
                              for s in ("forecast", "replay", "floor"))
                if all(math.isfinite(v) for v in (fc, rp, fl)):
                    errors.append(abs(fc - rp))
                    floors.append(abs(fl - rp))
        if errors:
            out.append(Row(key, float(np.mean(errors)), float(np.mean(floors)), len(errors)))
    return out


def ks_rows(real_folds: list[Sample], sim_folds: list[Sample]) -> list[Row]:
    """The per-run metrics' rows: each fold's held-out runs against its
    simulation and against the other folds' held-out runs."""
    from sim.calibration.verdict import TESTED, ks_distance

    out: list[Row] = []
    k = len(real_folds)
    if k < 2:
        return out
    for key in TESTED:
        errors, floors = [], []
        for i in range(k):
            held = _finite(real_folds[i], key)
            others = _finite(pooled([r for j, r in enumerate(real_folds) if j != i]), key)
            sim = _finite(sim_folds[i], key)
            if held.size and others.size and sim.size:
                errors.append(ks_distance(held, sim))
                floors.append(ks_distance(held, others))
        if errors:
            out.append(Row(key, float(np.mean(errors)), float(np.mean(floors)), len(errors)))
    return out


def _finite(sample: Sample, key: str) -> np.ndarray:
    values = np.asarray(getattr(sample, key), float)
    return values[np.isfinite(values)]


def rows(calibration: Any) -> list[Row]:
    """Every question's row of a :class:`sim.calibration.result.Calibration`
    (its fan-out rows last, when it has any, shown as the others are:
    without their sampling limit)."""
    folds = calibration.folds
    return (ladder_rows(calibration.ladder)
            + ks_rows([f.real for f in folds], [f.sim for f in folds])
            + [replace(r, limit=None) for r in calibration.fanout_rows])


def markdown(tables: dict[str, list[Row]]) -> list[str]:
    """One Markdown table of ``tables`` (agent or trace set -> its rows):
    per agent and question, the forecast's error, the floor's and their ratio
    (ladder questions in points, per-run metrics as KS distances)."""
    lines = ["| agent | question | forecast error | sampling floor | ratio |",
             "|---|---|---|---|---|"]
    for agent, table in tables.items():
        for row in table:
            if row.key in LADDER:
                err, floor = f"{100 * row.error:.1f} points", f"{100 * row.floor:.1f} points"
            else:
                err, floor = f"{row.error:.3f}", f"{row.floor:.3f}"
            ratio = f"{row.ratio:.2f}" if math.isfinite(row.ratio) else "n/a"
            lines.append(f"| {agent} | {row.label} | {err} | {floor} | {ratio} |")
    return lines
