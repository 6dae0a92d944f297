"""Ranges of the world's lognormals, checked when a scenario is loaded.

A lognormal draw is ``median * exp(sigma * Z)``: with a log-sd of 1000 (a
value pydantic accepts: ``sigma > 0``) the first draw with ``Z > 0.71``
overflows a float, and ``world.difficulty.mu: -1000`` makes the median
``exp(-1000)``, which is 0. The world's own models accept both; here every
lognormal of a validated scenario's world (task difficulty, tool and
latency durations, size distributions, mixture components, task classes)
is held to :data:`MAX_LOG_SD` and :data:`MAX_LOG_MEDIAN`, so that every draw is a finite
float: ``|log median| + sigma * |Z|`` stays below 709 (the log of the
largest float) unless ``|Z| > 65``, which a normal draw never gives.

:func:`check_world` raises :class:`RangeError` (a ValueError) naming the dotted
path of the first lognormal out of range.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from sim.world.distributions import Lognormal
from sim.world.params import DurationParams, LognormalDifficulty

__all__ = ["MAX_LOG_MEDIAN", "MAX_LOG_SD", "RangeError", "check_world"]

MAX_LOG_SD = 10.0
"""Largest log-sd (``sigma``) of a lognormal in the world (a factor e^10 per sd)."""
MAX_LOG_MEDIAN = 50.0
"""Largest ``|log(median)|`` (``|mu|`` of ``world.difficulty``) of a lognormal in the world."""


class RangeError(ValueError):
    """A lognormal of the world out of range: ``path`` is its dotted field."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def join(path: str, part: str | int) -> str:
    """``path`` extended by a key (``a.b``) or a list position (``a[2]``)."""
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def check_world(world: BaseModel, path: str = "world") -> None:
    """A RangeError at the dotted path of the first lognormal of ``world``
    (a validated :class:`~sim.world.params.WorldParams`, or any part of one
    at ``path``) whose log-sd or log-median is out of range."""
    stack: list[tuple[Any, str]] = [(world, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, BaseModel):
            _check_one(value, where)
            for name in type(value).model_fields:
                stack.append((getattr(value, name), join(where, name)))
        elif isinstance(value, list | tuple):
            stack.extend((item, join(where, i)) for i, item in enumerate(value))
        elif isinstance(value, dict):
            stack.extend((item, join(where, str(key))) for key, item in value.items())


def _check_one(model: BaseModel, where: str) -> None:
    if isinstance(model, LognormalDifficulty):
        _log_median(model.mu, join(where, "mu"))
        _sigma(model.sigma, join(where, "sigma"))
    elif isinstance(model, Lognormal):
        _log_median(math.log(model.median), join(where, "median"), model.median)
        _sigma(model.sigma, join(where, "sigma"))
    elif isinstance(model, DurationParams) and model.distribution == "lognormal":
        _log_median(math.log(model.median_s), join(where, "median_s"), model.median_s)
        _sigma(model.sigma, join(where, "sigma"))


def _sigma(sigma: float, where: str) -> None:
    if sigma > MAX_LOG_SD:
        raise RangeError(f"a lognormal's log-sd must be at most {MAX_LOG_SD:g} (a factor of "
                         f"e^{MAX_LOG_SD:g} per standard deviation), got {sigma:g}", where)


def _log_median(log_median: float, where: str, shown: float | None = None) -> None:
    if abs(log_median) > MAX_LOG_MEDIAN:
        got = f"{shown:g} (log {log_median:g})" if shown is not None else f"{log_median:g}"
        raise RangeError(f"a lognormal's log-median must be within [-{MAX_LOG_MEDIAN:g}, "
                         f"{MAX_LOG_MEDIAN:g}], got {got}", where)
