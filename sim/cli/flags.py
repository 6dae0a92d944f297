"""Argument types that hold command-line numbers and paths to their bounds.

Each is an ``argparse`` ``type=``: a value out of bounds is argparse's usage
error (``error: argument --resamples: ...``, exit status 2) before anything
runs. NaN and infinities are never numbers a flag takes.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def finite_float(*, low: float | None = None, high: float | None = None,
                 low_open: bool = False, unit: str = "") -> Callable[[str], float]:
    """A type parsing a finite float in ``[low, high]`` (``(low, high]`` when
    ``low_open``); ``unit`` is named in the message."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {_range(low, high, low_open)}"
                                             f"{unit}, got {text}")
        return value
    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A type parsing an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, "
                                             f"got {text}")
        return value
    return parse


def folder_path(text: str) -> str:
    """A type for an output path: not empty (an empty ``--out`` would silently
    fall back to the default folder), no NUL character, no name or path too
    long for the file system (:func:`sim.user_paths.path_problem`)."""
    from sim.user_paths import path_problem

    if not text.strip():
        raise argparse.ArgumentTypeError("must name a path, got an empty one")
    problem = path_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _range(low: float | None, high: float | None, low_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}]"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    return f"<= {high:g}"
