"""The DES folds its time series' logs every few hundred ended tasks
(sim/engines/des.py, ``FOLD_EVERY``; :meth:`Series.fold`) instead of
once when they are read. Where the folds fall must change nothing: a series
folded in pieces equals one folded at once and one whose changes are applied
one by one; a run folding after every few tasks gives the process-per-task
oracle's results exactly, with and without operators, across seeds."""

from __future__ import annotations

import random

import pytest

from sim.engines import des as des_task  # the task process lives in des.py
from sim.engines.des import DesEngine
from sim.engines.monitor import PULSE, Series
from tests.des_oracle import ProcessEngine
from tests.test_des_driving import OPERATIONS, TIGHT, outputs


def changes(seed: int, n: int, step: float = 1) -> list[tuple[float, float]]:
    """``n`` random changes of a count (never below 0) by ``step`` at
    non-decreasing times, many of them at equal times, with pulses
    (:data:`PULSE`) among them."""
    rng = random.Random(seed)
    now, value, out = 0.0, 0, []
    for _ in range(n):
        if rng.random() < 0.6:
            now += rng.choice((rng.random() * 10, 0.1, 1.0))
        sign = rng.choice((1, -1, 0)) if value > 0 else rng.choice((1, 0))
        value += sign
        out.append((now, sign * step if sign else PULSE))
    return out


def state(series: Series, until: float) -> tuple:
    return (list(series.times), list(series.values), series.peak, series.value,
            series.integral(until))


def applied_one_by_one(log: list[tuple[float, float]], until: float) -> tuple:
    """The step function by definition: the value, the area under it and the
    peak updated change by change; one point per distinct time."""
    times, values = [0.0], [0.0]
    value = area = last = peak = 0.0
    for now, delta in log:
        area += value * (now - last)
        pulse = delta != delta  # PULSE is NaN
        peak = max(peak, value + 1 if pulse else value + delta)
        if not pulse:
            value += delta
        if now == last:
            values[-1] = value
        else:
            times.append(now)
            values.append(value)
        last = now
    return times, values, peak, value, area + value * (until - last)


@pytest.mark.parametrize("step", [1, 0.1, 1 / 3])
@pytest.mark.parametrize("seed", range(6))
def test_folding_in_pieces_changes_nothing(seed, step):
    """The same floats (points, peak, value, area) folded at once, in
    pieces and change by change, for counts and for steps that floats do not
    hold exactly (sums in a different order would differ)."""
    log = changes(seed, 400, step)
    until = log[-1][0] + 5.0
    whole, pieces = Series("whole"), Series("pieces")
    rng = random.Random(seed + 100)
    for change in log:
        whole.record(change)
        pieces.record(change)
        if rng.random() < 0.05:
            pieces.fold()
    assert state(pieces, until) == state(whole, until) == applied_one_by_one(log, until)


def test_a_change_out_of_order_is_refused_when_folded():
    s = Series("x")
    s.record((5.0, 1))
    s.fold()
    s.record((4.0, -1))
    with pytest.raises(ValueError, match="x: time went backwards"):
        s.fold()
    assert (list(s.times), list(s.values), s.value) == ([0.0, 5.0], [0.0, 1.0], 1.0)


def test_a_change_at_a_nan_time_is_refused_when_folded():
    s = Series("x")
    s.record((1.0, 1))
    s.record((float("nan"), 1))
    with pytest.raises(ValueError, match="x: time went backwards"):
        s.fold()
    assert (list(s.times), list(s.values)) == ([0.0, 1.0], [0.0, 1.0])


@pytest.mark.parametrize("seed", [12, 13])
def test_folding_every_few_tasks_gives_the_oracles_results(seed, monkeypatch):
    """Folds after every 7 ended tasks, mid-run and at equal times, with
    operators pausing and cancelling, and on capacity.yaml as shipped."""
    monkeypatch.setattr(des_task, "FOLD_EVERY", 7)
    for overrides, tasks in (([*TIGHT, OPERATIONS], 120), ([], 150)):
        assert outputs(DesEngine, overrides, tasks, seed) == outputs(ProcessEngine, overrides,
                                                                     tasks, seed)
