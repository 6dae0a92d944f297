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
        if now < self._last:
            raise ValueError(f"{self.name}: time went backwards ({now} < {self._last})")
        self._area += self._value * (now - self._last)
        self._last = now
        self._value += delta
        if self._value > self.peak:
            self.peak = self._value
        if self.times[-1] == now:
            self.values[-1] = self._value
        else:
            self.times.append(now)
            self.values.append(self._value)

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
