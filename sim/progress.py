"""Progress on stderr that suits where stderr goes.

On a terminal :func:`progress_bar` is a plain tqdm bar, redrawn in place.
Anywhere else (a CI log, a file, a pipe) redrawn frames would pile up as
carriage returns, so the bar writes one whole line each time another tenth of
the total is done (and one when it closes): at most 11 lines however long the
run. A bar without a total writes one line when it closes.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from tqdm import tqdm


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is an interactive terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress(tqdm):
    """A tqdm bar that writes one line per tenth of ``total`` instead of
    redrawing (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._shown_tenth = 0  # the first line is written at 10%
        self._shown_n: float = 0
        kwargs["mininterval"] = 0  # display() decides what is written
        kwargs["miniters"] = 1
        kwargs["dynamic_ncols"] = False
        kwargs.setdefault("ncols", 80)
        kwargs.setdefault("ascii", True)
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        """Write the bar as one line when another tenth is done."""
        if self.total:
            tenth = min(10, int(10 * self.n / self.total))
            if tenth > self._shown_tenth:
                self._shown_tenth = tenth
                self._line()

    def _line(self) -> None:
        self._shown_n = self.n
        self.fp.write(self.__str__() + "\n")
        self.fp.flush()

    def close(self) -> None:
        """Write the last line (unless it was just written) and stop, without
        tqdm's closing carriage return."""
        if self.disable:
            return
        if self.n != self._shown_n or not self.total:
            self._line()
        self._decr_instances(self)  # type: ignore[attr-defined]  # tqdm's registry
        self.disable = True


def progress_bar(*args: Any, file: IO[str] | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar on ``file`` (default stderr): drawn in place on a terminal,
    one line per tenth otherwise. Takes tqdm's arguments; its ``desc`` (which
    may hold a scenario's name) is printed with control characters as visible
    escapes (:func:`~sim.output.safe_text.printable`)."""
    from sim.output.safe_text import printable

    if isinstance(kwargs.get("desc"), str):
        kwargs["desc"] = printable(kwargs["desc"], newlines=False)
    stream = sys.stderr if file is None else file
    cls = tqdm if is_terminal(stream) else LineProgress
    return cls(*args, file=stream, **kwargs)
