"""The documented bounds of scenario documents, and the walk that holds a
document to them before any field is validated.

A scenario file is data someone may send you: whatever it holds, loading it
must end quickly in a clean run or one clear error. These bounds keep every
accepted document small enough to validate at once and every number small
enough that derived times, token counts and costs stay finite:

* every number is finite and at most ``MAX_NUMBER`` (10^12) in magnitude
  (rates and speeds that divide into times have their own lower bounds,
  :data:`MIN_RATE`, in the field reference);
* every string is at most ``MAX_STRING`` characters; mapping keys are strings;
* a document nests at most ``MAX_DEPTH`` levels and holds at most
  ``MAX_NODES`` values once YAML aliases are expanded (a 343-byte alias bomb
  expands to hundreds of millions);
* a cell runs at most ``MAX_TASKS`` tasks, a sweep grid has at most
  ``MAX_CELLS`` cells, and a run at most ``MAX_TOTAL_TASKS`` tasks over all
  its cells (every task's record is held in memory);
* a command uses at most ``MAX_WORKERS`` worker processes;
* the sizes that drive a run's time and memory are bounded too: at most
  ``MAX_ATTEMPTS`` retries of one call, ``MAX_RESAMPLES`` bootstrap
  resamples, and a simulated run ends after at most ``MAX_RUN_STEPS`` model
  calls and ``MAX_RUN_RETRIES`` harness retries (a scenario without a step or
  retry budget is simulated with these as its budgets, so a doom loop that
  nothing else stops ends as ``budget_exhausted:steps``);
* a lognormal in the world has a log-sd of at most ``MAX_LOG_SD`` and its
  median within ``[e^-MAX_LOG_MEDIAN, e^MAX_LOG_MEDIAN]``, so every draw is
  a finite float (see :mod:`sim.world.ranges`, where these two bounds live).

:func:`check_document` raises :class:`~sim.bad_input.InputError` naming the
dotted path of the first value out of bounds.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from sim.bad_input import InputError
from sim.harness import params as _harness_params
from sim.world.params import MIN_RATE
from sim.world.ranges import MAX_LOG_MEDIAN, MAX_LOG_SD, join

__all__ = ["MAX_ATTEMPTS", "MAX_CELLS", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_LOG_MEDIAN",
           "MAX_LOG_SD", "MAX_NODES", "MAX_NUMBER", "MAX_RESAMPLES", "MAX_RUN_RETRIES",
           "MAX_RUN_STEPS", "MAX_STRING", "MAX_TASKS", "MAX_TOTAL_TASKS", "MAX_WORKERS", "MIN_RATE",
           "check_document", "check_number", "check_workers", "join"]

MAX_FILE_BYTES = 5_000_000
"""The largest scenario file read (bytes)."""
MAX_NUMBER = 1e12
MAX_STRING = 10_000
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_TASKS = 1_000_000
MAX_CELLS = 1_000
MAX_TOTAL_TASKS = 2_000_000
MAX_WORKERS = 256
MAX_ATTEMPTS = _harness_params.MAX_ATTEMPTS
"""Most retries of one model or tool call (``harness.retry.*``)."""
MAX_RESAMPLES = 100_000
"""Most bootstrap resamples of a comparison (``compare --resamples``)."""
MAX_RUN_STEPS = 100_000
"""Most model calls of one simulated run: the step budget of a scenario without one."""
MAX_RUN_RETRIES = 100_000
"""Most harness retries of one simulated run: the retry budget of a scenario without one."""


def check_number(value: int | float, path: str, source: str = "") -> None:
    """An InputError at ``path`` unless ``value`` is a finite number within the bounds."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"must be a finite number, got {value!r}", source=source, path=path)
    if abs(value) > MAX_NUMBER:
        raise InputError(f"must be at most {MAX_NUMBER:.0e} in magnitude, got {_short(value)}",
                         source=source, path=path)


def check_document(doc: Any, source: str = "", path: str = "") -> None:
    """Raise an InputError naming the first value of ``doc`` (a parsed
    YAML document or part of one, at dotted ``path``) that breaks the
    bounds of the module docstring: a number out of range, a long string, a
    key that is not a string, a value of a type YAML documents do not hold,
    too deep a nesting or too many values. The walk visits shared values once
    per reference (as validation would) and stops at ``MAX_NODES``."""
    stack: list[tuple[Any, str, int]] = [(doc, path, 1)]
    visited = 0
    while stack:
        value, where, depth = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            raise InputError(f"the document holds more than {MAX_NODES:,} values (YAML "
                             f"aliases expanded)", source=source, path=where)
        if depth > MAX_DEPTH:
            raise InputError(f"nests deeper than {MAX_DEPTH} levels", source=source,
                             path=where)
        if isinstance(value, dict | list | tuple):
            stack.extend((item, at, depth + 1) for item, at in _children(value, where, source))
        else:
            _check_scalar(value, where or "(top level)", source)


def _children(value: dict[Any, Any] | list[Any] | tuple[Any, ...], where: str,
              source: str) -> list[tuple[Any, str]]:
    """The items of a mapping or list with their dotted paths; an InputError
    for a key that is not a string or is too long."""
    if not isinstance(value, dict):
        return [(item, join(where, i)) for i, item in enumerate(value)]
    for key in value:
        if not isinstance(key, str):
            raise InputError(f"keys must be strings, got {key!r} ({type(key).__name__})",
                             source=source, path=where or "(top level)")
        if len(key) > MAX_STRING:
            raise InputError(f"a key of {len(key):,} characters", source=source,
                             path=where or "(top level)")
    return [(item, join(where, key)) for key, item in value.items()]


def _check_scalar(value: Any, where: str, source: str) -> None:
    """An InputError unless ``value`` is a scalar a scenario holds within bounds."""
    if isinstance(value, bool) or value is None or isinstance(value, datetime.date):
        return
    if isinstance(value, int | float):
        check_number(value, where, source)
    elif isinstance(value, str):
        if len(value) > MAX_STRING:
            raise InputError(f"a string of {len(value):,} characters; at most "
                             f"{MAX_STRING:,} are allowed", source=source, path=where)
    else:
        kind = getattr(type(value), "__name__", "value")
        if hasattr(value, "item") and callable(value.item):  # a numpy scalar
            raise InputError(f"a {kind}: give a plain Python number or string",
                             source=source, path=where)
        raise InputError(f"a {kind} is not a scenario value (numbers, strings, "
                         f"booleans, null, dates, lists and mappings are)",
                         source=source, path=where)


def check_workers(workers: int | None, flag: str = "--workers") -> None:
    """An InputError unless ``workers`` is None or an int in [1, MAX_WORKERS]."""
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise InputError(f"{flag} must be an integer, got {workers!r}")
    if not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"{flag} must be between 1 and {MAX_WORKERS}, got {workers}")


def _short(value: int | float) -> str:
    text = repr(value)
    return text if len(text) <= 30 else f"{text[:12]}... ({len(text)} digits)"
