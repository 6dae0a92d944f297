"""Impossible values in a run: nulled (or refused), and counted by field and reason.

Real traces are dirty: clocks skew (a tool "finishing" before it started), a
field holds NaN, a limit is ``2**64`` or negative, a start is in year 1. Before
a run is written (:mod:`sim.traces.writer`), :func:`repair_run` checks every
value of it against the trace model's bounds (:data:`~sim.traces.model.MAX_SECONDS`,
:data:`~sim.traces.model.MAX_USD`, :data:`~sim.traces.model.MAX_COUNT`,
:data:`~sim.traces.model.MAX_LIMIT`, ``[EARLIEST, LATEST)``) and sets an
optional value that breaks them to null, returning one :data:`Repair`
``(field, reason)`` per value changed: ``field`` is dotted
(``runs.duration_s``, ``calls.latency_s``, ``calls.tool_calls.duration_s``)
and ``reason`` one of :data:`REASONS`. So whatever is written, the reader
(:func:`~sim.traces.model.load_tables`) accepts, and one bad value never costs
the run or the folder.

A tool call's name is required too: a name that is null, empty, only
whitespace or not a string (a number, an object) makes the run unusable
(``tool call without a name``, the detail naming the call and the value), never
a made-up name such as ``"None"`` (importers pass the recorded value as it is).

Token counts are required (never null): a count that is not an integer in
``[0, MAX_COUNT]``, or a run whose sums exceed it, makes the run unusable
(:class:`~sim.traces.skips.Unusable`, ``invalid token count``). Repairs a
source's convention explains (reasoning counted apart from the output, a
prompt total reported without its cache) are made where the counts are read
(:mod:`sim.traces.usage`) and counted the same way.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Any

from sim.traces.model import (
    EARLIEST,
    LATEST,
    LIMIT_COLUMNS,
    MAX_COUNT,
    MAX_LIMIT,
    MAX_SECONDS,
    MAX_USD,
    MONEY_COLUMNS,
    SECONDS_COLUMNS,
    SIZE_COLUMNS,
    TOKEN_COLUMNS,
    USAGE_ATTRIBUTES,
    CallRecord,
    RunRecord,
    ToolCallRecord,
)
from sim.traces.skips import BAD_COUNT, NO_TOOL_NAME, Unusable

Repair = tuple[str, str]
"""``(dotted field, reason)`` of one value repaired or set to null."""

NEGATIVE = "negative: set to null"
NOT_FINITE = "not a finite number: set to null"
TOO_LARGE = "out of range (too large): set to null"
NOT_POSITIVE = "not positive: set to null"
BAD_TYPE = "wrong type: set to null"
BAD_TIME = "start outside 2000-2099: set to null"
REASONING_APART = "reasoning above output: counted apart from the output"
PROMPT_WITHOUT_CACHE = "cache above the prompt: the prompt taken as without the cache"
PARTS_KEPT = "cache parts do not add up to the prompt: the provider's parts kept"

REASONS: tuple[str, ...] = (NEGATIVE, NOT_FINITE, TOO_LARGE, NOT_POSITIVE, BAD_TYPE, BAD_TIME,
                            REASONING_APART, PROMPT_WITHOUT_CACHE, PARTS_KEPT)

_TEXT_RUN = ("task_id", "model", "exit")
_TEXT_CALL = ("model", "finish_reason", "purpose", "text_sha256", "observation_sha256")
_TEXT_TOOL = ("id", "arguments", "result_sha256")


def repair_run(run: RunRecord) -> list[Repair]:
    """Null every impossible optional value of ``run`` (in place: a call,
    which is frozen, is replaced in ``run.calls`` by its repaired copy) and
    return the repairs, in field order; Unusable when a token count or a
    token sum is impossible. The run's own notes (``run.repairs``, from the
    importer) are not included."""
    out: list[Repair] = []
    _apply(run, _record(run, "runs", out, _TEXT_RUN, integral_limits=True))
    if not isinstance(run.calls, list):
        raise Unusable(BAD_COUNT, "the run's calls are not a list")
    sums = dict.fromkeys(TOKEN_COLUMNS, 0)
    for index, call in enumerate(run.calls):
        for name in TOKEN_COLUMNS:
            value = getattr(call.usage, USAGE_ATTRIBUTES[name])
            if (isinstance(value, bool) or not isinstance(value, int)
                    or not 0 <= value <= MAX_COUNT):
                raise Unusable(BAD_COUNT, f"call {index}: {name} is {short_repr(value)}, not a "
                                          f"token count in [0, {MAX_COUNT:,}]")
            sums[name] += value
        changes = _record(call, "calls", out, _TEXT_CALL)
        if not isinstance(call.tool_calls, list):
            changes["tool_calls"] = []
            out.append(("calls.tool_calls", BAD_TYPE))
        if changes:
            call = run.calls[index] = replace(call, **changes)
        for number, tool in enumerate(call.tool_calls):
            if not is_tool_name(tool.name):
                raise Unusable(NO_TOOL_NAME, f"call {index}: tool call {number}: "
                                             f"calls.tool_calls.name is {short_repr(tool.name)}, "
                                             f"not a tool's name")
            _apply(tool, _record(tool, "tool_calls", out, _TEXT_TOOL, prefix="calls."))
            if tool.error is not None and not isinstance(tool.error, bool):
                tool.error = None
                out.append(("calls.tool_calls.error", BAD_TYPE))
    for name, total in sums.items():
        if total > MAX_COUNT:
            raise Unusable(BAD_COUNT, f"the run's {name} sum to {total:.3g}, above "
                                      f"{MAX_COUNT:,}")
    started = run.started_at
    if started is not None:
        if not isinstance(started, datetime):
            run.started_at = None
            out.append(("runs.started_at", BAD_TYPE))
        else:
            aware = started if started.tzinfo is not None else started.replace(
                tzinfo=EARLIEST.tzinfo)
            if not EARLIEST <= aware < LATEST:
                run.started_at = None
                out.append(("runs.started_at", BAD_TIME))
    return out


NO_NAME_TEXTS = frozenset({"none", "null", "nil", "undefined"})
"""Texts a writer leaves where it stringified a missing name (Python's
``str(None)``, JSON's null, JavaScript's undefined): no tool is named so."""


def is_tool_name(value: Any) -> bool:
    """Whether ``value`` can be a tool's name: a string with a character other
    than whitespace that is not the text of a missing value
    (:data:`NO_NAME_TEXTS`, any case)."""
    return (isinstance(value, str) and bool(value.strip())
            and value.strip().lower() not in NO_NAME_TEXTS)


def _record(record: RunRecord | CallRecord | ToolCallRecord, kind: str, out: list[Repair],
            texts: tuple[str, ...], *, integral_limits: bool = False, prefix: str = ""
            ) -> dict[str, Any]:
    """The repaired values of ``record`` (a ``kind`` of :data:`SECONDS_COLUMNS`),
    by field: what :func:`_bounded` and a text that is not a string change;
    each repair noted in ``out``. ``record`` itself is not changed."""
    where = f"{prefix}{kind}."
    changes: dict[str, Any] = {}
    for name in SECONDS_COLUMNS[kind]:
        _bounded(record, name, MAX_SECONDS, where, out, changes)
    for name in MONEY_COLUMNS[kind]:
        _bounded(record, name, MAX_USD, where, out, changes,
                 positive=name == "cost_limit_usd")
    for name in SIZE_COLUMNS[kind]:
        _bounded(record, name, MAX_COUNT, where, out, changes, integral=True)
    if integral_limits:
        for name in LIMIT_COLUMNS:
            _bounded(record, name, MAX_LIMIT, where, out, changes, integral=True,
                     positive=True)
    for name in texts:
        value = getattr(record, name)
        if value is not None and not isinstance(value, str):
            changes[name] = None
            out.append((where + name, BAD_TYPE))
    return changes


def _apply(record: RunRecord | ToolCallRecord, changes: dict[str, Any]) -> None:
    """Set each field of ``changes`` on ``record`` (a mutable record)."""
    for name, value in changes.items():
        setattr(record, name, value)


def _bounded(record: Any, name: str, high: float, where: str, out: list[Repair],
             changes: dict[str, Any], *, integral: bool = False, positive: bool = False
             ) -> None:
    """Null ``record.name`` in ``changes`` unless it is a number in ``[0,
    high]`` (above 0 when ``positive``; an int when ``integral``: an
    integral float becomes that int in ``changes``), noting why."""
    value = getattr(record, name)
    if value is None:
        return
    reason = None
    if integral and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
        changes[name] = value
    if isinstance(value, bool) or not isinstance(value, int | float):
        reason = BAD_TYPE
    elif isinstance(value, float) and not math.isfinite(value):
        reason = NOT_FINITE
    elif integral and not isinstance(value, int):
        reason = BAD_TYPE
    elif value < 0:
        reason = NEGATIVE
    elif positive and value == 0:
        reason = NOT_POSITIVE
    elif value > high:
        reason = TOO_LARGE
    if reason is not None:
        changes[name] = None
        out.append((where + name, reason))


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to 60 characters (a huge int as its size in bits)."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"an integer of {value.bit_length():,} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
