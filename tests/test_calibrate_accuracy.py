"""The forecast's accuracy against the sampling floor.

Each ladder fold carries, besides its forecast and its replay, the floor: the
other folds' held-out runs replayed, taken as the forecast
(:func:`sim.calibration.ladder.pool_rungs`). The accuracy rows
(:mod:`sim.calibration.accuracy`) average ``|forecast - replay|`` and
``|floor - replay|`` over rungs and folds, and per-run KS distances of each
fold's held-out runs to its simulation and to the other folds' runs. Checked
against hand computations on small fixtures.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.calibration import accuracy
from sim.calibration.ladder import Budget, Side, pool_rungs
from sim.calibration.simulate import Sample


def _side(stopped: list[bool], fold: int) -> Side:
    n = len(stopped)
    s = np.array(stopped)
    return Side(stopped=s, lost=s.copy(), known=np.ones(n, bool),
                saved=np.where(s, 1.0, 0.0), cost=np.full(n, 2.0), fold=np.full(n, fold))


def test_the_floor_of_a_fold_is_the_other_folds_replay_pooled():
    """Three folds whose replays stop 1 of 2, 0 of 2 and 2 of 4 runs: fold 0's
    floor is the other folds' pooled (2 of 6 stopped), fold 2's (1 of 4);
    dollars saved are 1 of each stopped run's 2."""
    replays = [_side([True, False], 0), _side([False, False], 1),
               _side([True, True, False, False], 2)]
    forecasts = [_side([False, False], k) for k in range(2)] + [_side([False] * 4, 2)]
    per_fold = [[(f, r)] for f, r in zip(forecasts, replays, strict=True)]
    (rung,) = pool_rungs(per_fold, [Budget("steps", 5, "p50 steps")], 0)
    assert rung.folds[0]["floor"]["stopped"] == pytest.approx(2 / 6)
    assert rung.folds[2]["floor"]["stopped"] == pytest.approx(1 / 4)
    assert rung.folds[0]["floor"]["saved"] == pytest.approx(2 / 12)


def test_ladder_rows_average_the_absolute_gaps_over_rungs_and_folds():
    """Two rungs of two folds: stopped gaps 0.1, 0.3, 0.0, 0.2 (mean 0.15),
    floor gaps 0.1, 0.1, 0.1, 0.1 (mean 0.1): ratio 1.5."""
    class Rung:
        def __init__(self, folds):
            self.folds = folds

    def fold(fc, rp, fl):
        return {"forecast": {"stopped": fc}, "replay": {"stopped": rp},
                "floor": {"stopped": fl}}

    rungs = [Rung([fold(0.5, 0.4, 0.5), fold(0.1, 0.4, 0.3)]),
             Rung([fold(0.2, 0.2, 0.1), fold(0.0, 0.2, 0.3)])]
    (row,) = accuracy.ladder_rows(rungs)
    assert row.key == "stopped" and row.cells == 4
    assert row.error == pytest.approx(0.15) and row.floor == pytest.approx(0.1)
    assert row.ratio == pytest.approx(1.5)


def _runs(steps: list[float]) -> Sample:
    s = np.array(steps, float)
    return Sample(s, s * 100, s * 10, s * 0.01, np.array(["agent"] * len(s), object),
                  np.ones(len(s)), np.zeros(0, np.int64), np.zeros(0, np.int64))


def test_ks_rows_compare_each_fold_with_its_world_and_with_the_other_folds():
    """Fold 0 holds 1, 2; fold 1 holds 3, 4. Fold 0 against its simulation
    [1, 2] is 0 and against the other fold 1; fold 1 against [1, 2, 3, 4] is
    0.5 and against fold 0 is 1: error 0.25, floor 1 for every metric."""
    real = [_runs([1, 2]), _runs([3, 4])]
    sims = [_runs([1, 2]), _runs([1, 2, 3, 4])]
    rows = accuracy.ks_rows(real, sims)
    assert [r.key for r in rows] == ["steps", "prompt", "output", "cost"]
    for r in rows:
        assert r.error == pytest.approx(0.25) and r.floor == pytest.approx(1.0)
    table = "\n".join(accuracy.markdown({"a": rows}))
    assert "| a | steps per run (KS) | 0.250 | 1.000 | 0.25 |" in table
