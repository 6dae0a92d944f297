"""Step-function time series of the DES engine: tasks in system, busy model
slots and sandboxes, queue lengths.

Each series records ``(time, value)`` at every change, so time averages are
exact integrals (not samples): the time-average number in system over a
drained run equals the sum of the tasks' times in system divided by the
horizon, which is what Little's law checks.
"""

from __future__ import annotations


class Series:
    """A piecewise-constant quantity, changed by increments at given times."""

    __slots__ = ("name", "times", "values", "_value", "_area", "_last", "peak")

    def __init__(self, name: str) -> None:
        self.name = name
        self.times: list[float] = [0.0]
        self.values: list[float] = [0.0]
        self._value = 0.0
        self._area = 0.0
        self._last = 0.0
        self.peak = 0.0

    def add(self, now: float, delta: float) -> None:
        """Change the value by ``delta`` at time ``now`` (seconds, non-decreasing)."""
        last = self._last
        if now < last:
            raise ValueError(f"{self.name}: time went backwards ({now} < {last})")
        value = self._value
        self._area += value * (now - last)
        self._last = now
        value += delta
        self._value = value
        if value > self.peak:
            self.peak = value
        if last == now:  # times[-1] is always the last change (0.0 at first)
            self.values[-1] = value
        else:
            self.times.append(now)
            self.values.append(value)

    def pulse(self, now: float) -> None:
        """``add(now, 1)`` then ``add(now, -1)`` (a request granted the
        instant it was made: counted in a queue for no time), in one call
        with the same result."""
        value = self._value
        self.add(now, 1)
        self._value = value  # the second add: no time passes, back to the value
        self.values[-1] = value

    @property
    def value(self) -> float:
        """The current value."""
        return self._value

    def integral(self, until: float) -> float:
        """The area under the series from 0 to ``until`` (value x seconds)."""
        return self._area + self._value * (until - self._last)

    def time_average(self, until: float) -> float:
        """The mean value over [0, ``until``]."""
        return self.integral(until) / until if until > 0 else 0.0
