"""Step-function time series of the DES engine: tasks in system, busy model
slots and sandboxes, queue lengths.

Each series records ``(time, value)`` at every change, so time averages are
exact integrals (not samples): the time-average number in system over a
drained run equals the sum of the tasks' times in system divided by the
horizon, which is what Little's law checks. The points are kept as C
doubles (``array('d')``: 8 bytes a number, not a 32-byte float object; a
capacity.yaml run makes some 48 points per task), which numpy reads without
a copy.
"""

from __future__ import annotations

import math
from array import array
from struct import pack

import numpy as np

PULSE = math.nan
"""The delta that logs a pulse (:meth:`Series.pulse`): up by one and back, at once."""


class Series:
    """A piecewise-constant quantity, changed by increments at given times.

    A change is logged as it comes (:meth:`add`, :meth:`pulse`, ``record``:
    its time and delta appended to a flat list of floats, a pulse's delta
    :data:`PULSE`) and folded into the step function when the series is read (``times``,
    ``values``, ``peak``, ``value``, :meth:`integral`), in the same order and
    with the same arithmetic as if it had been applied at once, so the floats
    are the same."""

    __slots__ = ("name", "_times", "_values", "_value", "_area", "_last", "_peak", "_log",
                 "_seen", "record")

    def __init__(self, name: str) -> None:
        self.name = name
        self._times = array("d", (0.0,))
        self._values = array("d", (0.0,))
        self._value = 0.0
        self._area = 0.0
        self._last = 0.0
        self._peak = 0.0
        self._log: list[float] = []  # time, delta, time, delta, ... (delta PULSE: a pulse)
        self._seen = 0.0  # the time of the last change logged
        # record((now, delta)): add(now, delta) in one C call (list.extend),
        # (now, PULSE) a pulse; the time order is checked when the log is
        # folded instead
        self.record = self._log.extend

    def add(self, now: float, delta: float) -> None:
        """Change the value by ``delta`` at time ``now`` (seconds, non-decreasing)."""
        if now < self._seen:
            raise ValueError(f"{self.name}: time went backwards ({now} < {self._seen})")
        self._seen = now
        self._log.extend((now, delta))

    def pulse(self, now: float) -> None:
        """``add(now, 1)`` then ``add(now, -1)`` (a request granted the
        instant it was made: counted in a queue for no time), in one call
        with the same result."""
        if now < self._seen:
            raise ValueError(f"{self.name}: time went backwards ({now} < {self._seen})")
        self._seen = now
        self._log.extend((now, PULSE))

    def fold(self) -> None:
        """Apply the logged changes in the order they were logged, with the
        arithmetic of applying each at once: a change moves the area on to
        its time (``area += value * (now - last)`` at each new time, summed
        in order), changes the value (a pulse: up by one, for no time) and
        the peak, and leaves the value after the last change at each time as
        that time's point (replacing the last point when at its time).
        Done with numpy over the whole log, read as doubles in one
        ``struct.pack``: the sums are cumulative sums started from the running
        value and area (``cumsum`` adds in order, so the floats are those of a
        Python loop over the changes); a log with a time out of order (or
        NaN) goes through :meth:`_fold_in_order`, which keeps the points
        before it and raises. Reading the series folds; so does the DES
        engine every few hundred tasks, which keeps the log small. On
        capacity.yaml this costs about 6,000 machine instructions a task
        (some 48 changes), against 51,000 for a Python loop over the changes
        (``np.array`` of a list of pairs alone cost more than that loop:
        hence the flat log and ``struct.pack``)."""
        log = self._log
        if not log:
            return
        flat = np.frombuffer(pack(f"{len(log)}d", *log))  # t0, d0, t1, d1, ...
        times, deltas = flat[0::2], flat[1::2]
        last = self._last
        if not (times[0] >= last and (times[1:] >= times[:-1]).all()):  # NaN fails too
            self._fold_in_order(log)
            return
        log.clear()
        pulses = np.isnan(deltas)
        steps = np.where(pulses, 0.0, deltas)
        steps[0] += self._value  # value after each change, summed in order from the value
        values = np.cumsum(steps)
        peak = max(self._peak, float((values + pulses).max()))  # a pulse peaks at value + 1
        ends = np.empty(len(times), dtype=bool)  # the last change at each time
        np.not_equal(times[1:], times[:-1], out=ends[:-1])
        ends[-1] = True
        point_times, point_values = times[ends], values[ends]
        before_times = np.concatenate(([last], point_times[:-1]))
        before_values = np.concatenate(([self._value], point_values[:-1]))
        areas = before_values * (point_times - before_times)
        if point_times[0] == last:  # the last point's time: no area, its value replaced
            areas[0] = self._area
            self._values[-1] = float(point_values[0])
            point_times, point_values = point_times[1:], point_values[1:]
        else:
            areas = np.concatenate(([self._area], areas))
        self._area = float(np.cumsum(areas)[-1])
        self._times.frombytes(point_times.tobytes())
        self._values.frombytes(point_values.tobytes())
        self._value, self._last, self._peak = float(values[-1]), float(times[-1]), peak

    def _fold_in_order(self, log: list[float]) -> None:
        """Apply the logged changes one by one, up to one out of order (or at
        a NaN time): the points before it are kept, the log is emptied and a
        ValueError raised."""
        value, last = self._value, self._last
        times, values = [self._times.pop()], [self._values.pop()]
        for i in range(0, len(log), 2):
            now, delta = log[i], log[i + 1]
            if now == last:
                del times[-1], values[-1]
            elif not now > last:
                log.clear()
                count = f"{len(times)}d"
                self._times.frombytes(pack(count, *times))
                self._values.frombytes(pack(count, *values))
                raise ValueError(f"{self.name}: time went backwards ({now} < {last})")
            last = now
            if delta == delta:  # not a pulse
                value += delta
            times.append(now)
            values.append(value)
        raise AssertionError("a log in order was folded one change at a time")  # pragma: no cover

    @property
    def times(self) -> array[float]:
        """The times of the changes (seconds; 0.0 first): a sequence of floats
        (``array('d')``; ``np.asarray`` reads it without a copy)."""
        self.fold()
        return self._times

    @property
    def values(self) -> array[float]:
        """The value from each of :attr:`times` on (``array('d')``, as :attr:`times`)."""
        self.fold()
        return self._values

    @property
    def peak(self) -> float:
        """The highest value reached (a pulse counts, for no time)."""
        self.fold()
        return self._peak

    @property
    def value(self) -> float:
        """The current value."""
        self.fold()
        return self._value

    def integral(self, until: float) -> float:
        """The area under the series from 0 to ``until`` (value x seconds)."""
        self.fold()
        return self._area + self._value * (until - self._last)

    def time_average(self, until: float) -> float:
        """The mean value over [0, ``until``]."""
        return self.integral(until) / until if until > 0 else 0.0
