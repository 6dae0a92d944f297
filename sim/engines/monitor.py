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

from array import array
from struct import pack


class Series:
    """A piecewise-constant quantity, changed by increments at given times.

    A change is logged as it comes (:meth:`add`, :meth:`pulse`: one append)
    and folded into the step function when the series is read (``times``,
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
        self._log: list[tuple[float, float | None]] = []  # (time, delta; None: a pulse)
        self._seen = 0.0  # the time of the last change logged
        # record((now, delta)): add(now, delta) in one C call, (now, None) a
        # pulse; the time order is checked when the log is folded instead
        self.record = self._log.append

    def add(self, now: float, delta: float) -> None:
        """Change the value by ``delta`` at time ``now`` (seconds, non-decreasing)."""
        if now < self._seen:
            raise ValueError(f"{self.name}: time went backwards ({now} < {self._seen})")
        self._seen = now
        self._log.append((now, delta))

    def pulse(self, now: float) -> None:
        """``add(now, 1)`` then ``add(now, -1)`` (a request granted the
        instant it was made: counted in a queue for no time), in one call
        with the same result."""
        if now < self._seen:
            raise ValueError(f"{self.name}: time went backwards ({now} < {self._seen})")
        self._seen = now
        self._log.append((now, None))

    def fold(self) -> None:
        """Apply the logged changes: each moves the area on to its time, then
        changes the value (a pulse: up by one, for no time) and the peak, and
        records the new value at its time (replacing the last point when
        that is at the same time; ``_times[-1]`` is always the last change).
        Reading the series folds; so does the DES engine every few hundred
        tasks, which keeps the log small: a whole run's log (some 50 entries
        per task on capacity.yaml) cost about 10% more CPU time at 20,000
        tasks than folding as it goes, from the memory it fills. (Folding on
        numpy arrays was slower than this loop: 0.18 against 0.12 us per
        entry; ``np.array(log, dtype=float)`` alone costs more instructions
        than the loop.) The new points are gathered in lists, starting from
        the last point, and moved to the arrays at the end as bytes
        (``struct.pack``: ``array.fromlist`` parses each float through
        ``PyArg_Parse``, some 450 machine instructions a point). In the loop,
        each entry appends its point; a change at the last point's time (rare)
        first drops that point, so the common path tests no flag. ``value +
        1.0`` (not ``+ 1``: the same float) keeps a pulse's addition on
        CPython's float-float fast path. Measured by replaying a capacity.yaml
        run's logs under callgrind: 1,980 instructions an entry before, 1,460
        with these changes."""
        log = self._log
        if not log:
            return
        value, area, last, peak = self._value, self._area, self._last, self._peak
        times, values = [self._times.pop()], [self._values.pop()]
        for now, delta in log:
            if now > last:  # a new point
                area += value * (now - last)
                last = now
            elif now == last:  # no area (it would add 0.0); the last point is replaced
                del times[-1], values[-1]
            else:  # a change recorded out of order (or at a NaN time)
                log.clear()
                self._extend(times, values)
                raise ValueError(f"{self.name}: time went backwards ({now} < {last})")
            if delta is None:  # a pulse: peak at value + 1, back to value
                if value + 1.0 > peak:
                    peak = value + 1.0
            else:
                value += delta
                if value > peak:
                    peak = value
            times.append(now)  # list.append by name: CPython's specialised call
            values.append(value)
        self._extend(times, values)
        self._value, self._area, self._last, self._peak = value, area, last, peak
        log.clear()

    def _extend(self, times: list[float], values: list[float]) -> None:
        """Append points to the arrays, as bytes (``struct.pack``: cheaper
        than ``array.fromlist``, see :meth:`fold`). A separate method so that
        :meth:`fold`'s loop stays short enough for its jumps to need no
        ``EXTENDED_ARG`` (one more instruction an entry, 30 machine
        instructions)."""
        count = f"{len(times)}d"
        self._times.frombytes(pack(count, *times))
        self._values.frombytes(pack(count, *values))

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
