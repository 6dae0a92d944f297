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

:func:`out_of_range` names the dotted path of the first lognormal out of range
and what is wrong (the scenario's validation makes it an input error).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from sim.world.distributions import Lognormal
from sim.world.params import DurationParams, LognormalDifficulty

__all__ = ["MAX_LOG_MEDIAN", "MAX_LOG_SD", "join", "out_of_range"]

MAX_LOG_SD = 10.0
"""Largest log-sd (``sigma``) of a lognormal in the world (a factor e^10 per sd)."""
MAX_LOG_MEDIAN = 50.0
"""Largest ``|log(median)|`` (``|mu|`` of ``world.difficulty``) of a lognormal in the world."""


def join(path: str, part: str | int) -> str:
    """``path`` extended by a key (``a.b``) or a list position (``a[2]``)."""
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def out_of_range(world: BaseModel, path: str = "world") -> tuple[str, str] | None:
    """The first lognormal of ``world`` (a validated
    :class:`~sim.world.params.WorldParams`, or any part of one at ``path``)
    whose log-sd or log-median is out of range, as ``(dotted path, message)``;
    None when every one is within range."""
    return next(_problems(world, path), None)


def _problems(world: BaseModel, path: str) -> Iterator[tuple[str, str]]:
    stack: list[tuple[Any, str]] = [(world, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, BaseModel):
            yield from _check_one(value, where)
            for name in type(value).model_fields:
                stack.append((getattr(value, name), join(where, name)))
        elif isinstance(value, list | tuple):
            stack.extend((item, join(where, i)) for i, item in enumerate(value))
        elif isinstance(value, dict):
            stack.extend((item, join(where, str(key))) for key, item in value.items())


def _check_one(model: BaseModel, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(model, LognormalDifficulty):
        log_median, shown, name = model.mu, None, "mu"
    elif isinstance(model, Lognormal):
        log_median, shown, name = math.log(model.median), model.median, "median"
    elif isinstance(model, DurationParams) and model.distribution == "lognormal":
        log_median, shown, name = math.log(model.median_s), model.median_s, "median_s"
    else:
        return
    if abs(log_median) > MAX_LOG_MEDIAN:
        got = f"{shown:g} (log {log_median:g})" if shown is not None else f"{log_median:g}"
        yield join(where, name), (f"a lognormal's log-median must be within "
                                  f"[-{MAX_LOG_MEDIAN:g}, {MAX_LOG_MEDIAN:g}], got {got}")
    if model.sigma > MAX_LOG_SD:
        yield join(where, "sigma"), (f"a lognormal's log-sd must be at most {MAX_LOG_SD:g} (a "
                                     f"factor of e^{MAX_LOG_SD:g} per standard deviation), "
                                     f"got {model.sigma:g}")
