"""Recorded runs as the replay driver reads them: plain, immutable records.

Built from the two tables of a trace folder (``runs.parquet`` and
``calls.parquet``, the trace model of :mod:`sim.traces`, read with its checked
reader by :func:`sim.drivers.replay.tables.read_trace_folder`) by
:func:`recorded_runs`, which takes them as pandas DataFrames (with nullable
dtypes or not; a missing value may be None, NaN or ``pd.NA``). Units: tokens
are counts, money is USD, times are seconds.

Two nullable columns of ``calls.parquet`` are used where a source records the
text: ``text_sha256`` (a hash of the response's text) and
``observation_sha256`` (a hash of the non-tool messages that entered after the
call, such as a simulated user's reply). They let the replay tell identical
text turns from different ones (:mod:`sim.drivers.replay`); where they are null
(or absent from the frames given) each text turn counts as distinct.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.bad_input import InputError
from sim.harness.messages import Usage

RUN_FIELDS: tuple[str, ...] = ("run_id", "source", "task_id", "model", "exit", "resolved",
                               "cost_usd")
CALL_FIELDS: tuple[str, ...] = ("run_id", "call", "model", "input_tokens", "cache_read_tokens",
                                "cache_write_tokens", "output_tokens", "reasoning_tokens",
                                "cost_usd", "finish_reason", "latency_s", "text_tokens",
                                "observation_tokens", "tool_calls")
"""Columns the replay needs (the trace model has more; they are ignored)."""


@dataclass(frozen=True, slots=True)
class RecordedTool:
    """One tool call a recorded response made and what came back: ``arguments``
    as canonical JSON (None when unrecorded), ``result_tokens`` (None: no result
    recorded), ``result_sha256`` of the result text, ``error`` flag, ``duration_s``."""

    name: str
    arguments: str | None = None
    result_tokens: int | None = None
    result_sha256: str | None = None
    error: bool = False
    duration_s: float | None = None

    def input(self) -> dict[str, Any] | None:
        """The arguments as the JSON object a tool_use block carries: the parsed
        object, ``{"arguments": value}`` for JSON that is not an object or for a
        raw string that is not JSON, None when unrecorded."""
        if self.arguments is None:
            return None
        parsed = _PARSED.get(self.arguments)
        if parsed is None:
            try:
                value = json.loads(self.arguments)
            except ValueError:
                value = {"arguments": self.arguments}
            parsed = value if isinstance(value, dict) else {"arguments": value}
            if len(_PARSED) >= _PARSED_KEPT:
                _PARSED.clear()
            _PARSED[self.arguments] = parsed
        return parsed


_PARSED: dict[str, dict[str, Any]] = {}
"""The objects of the last few thousand argument texts parsed: tool calls
repeat their arguments, and a block's arguments are never altered (blocks
are values), so equal texts share one object."""
_PARSED_KEPT = 4096


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One recorded model call: its ``usage`` (the harness's own per-call
    :class:`~sim.harness.messages.Usage`: the trace model's five counts, its
    ``reasoning_tokens`` as ``thinking_tokens``; ``usage.prompt_tokens`` is the
    whole prompt), ``cost_usd`` (None: unrecorded), ``finish_reason``
    verbatim, ``latency_s``, the size of its text (``text_tokens``), its tool
    calls, the tokens of non-tool messages that entered after it
    (``observation_tokens``), and its ``purpose``: ``step`` (a loop step; what
    imported runs' calls are), ``compaction``, ``verifier`` or ``finalize``
    (the tool-free call of ``harness.visibility.on_limit: finalize``) (sim's
    own recorded runs). The replay answers a request with this very ``usage``."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    finish_reason: str | None = None
    latency_s: float | None = None
    text_tokens: int = 0
    observation_tokens: int = 0
    tools: tuple[RecordedTool, ...] = ()
    model: str | None = None
    text_sha256: str | None = None
    observation_sha256: str | None = None
    purpose: str = "step"
    agent: str | None = None
    """The subagent that made the call (None: the run's own agent)."""


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """One recorded run: identity, the source's ``exit`` label verbatim,
    ``resolved`` (None: the source does not say), the run's recorded
    ``cost_usd`` (None: unrecorded) and its calls in order."""

    run_id: str
    calls: tuple[RecordedCall, ...]
    source: str = ""
    task_id: str | None = None
    model: str | None = None
    exit: str | None = None
    resolved: bool | None = None
    cost_usd: float | None = None

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return sum(len(c.tools) for c in self.calls)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens summed over the recorded calls."""
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def recorded_cost_usd(self) -> float | None:
        """The run's recorded cost, else the sum of its calls' recorded costs
        when every call has one, else None."""
        if self.cost_usd is not None:
            return self.cost_usd
        costs = [c.cost_usd for c in self.calls if c.cost_usd is not None]
        return math.fsum(costs) if costs and len(costs) == len(self.calls) else None


# ----------------------------------------------------------- from tables
def recorded_runs(runs: Any, calls: Any, *, source: str = "") -> list[RecordedRun]:
    """The runs of a trace folder's two tables (pandas DataFrames), in the
    order of ``runs``, each with its calls sorted by ``call``. A missing column
    or a bad value is an :class:`InputError` naming ``source`` (the folder), the
    column and the run."""
    for table, names, file in ((runs, RUN_FIELDS, "runs.parquet"),
                               (calls, CALL_FIELDS, "calls.parquet")):
        missing = [n for n in names if n not in table.columns]
        if missing:
            raise InputError(f"{file} lacks the column(s) {', '.join(missing)}",
                             source=source)
    ids = runs["run_id"].astype(str)
    if ids.duplicated().any():
        raise InputError(f"run_id {ids[ids.duplicated()].iloc[0]!r} appears more than once",
                         source=source, path="runs.parquet.run_id")
    extra = [n for n in ("text_sha256", "observation_sha256", "purpose", "agent")
             if n in calls.columns]
    by_run: dict[str, list[tuple[int, RecordedCall]]] = {}
    for row in calls[list(CALL_FIELDS) + extra].to_dict("records"):
        run_id = str(row["run_id"])
        where = f"calls.parquet, run {run_id!r}, call {row['call']}"
        by_run.setdefault(run_id, []).append((_count(row["call"], "call", where, source),
                                              _call(row, where, source)))
    out = []
    for row in runs[list(RUN_FIELDS)].to_dict("records"):
        run_id = str(row["run_id"])
        numbered = sorted(by_run.pop(run_id, []), key=lambda pair: pair[0])
        if [i for i, _ in numbered] != list(range(len(numbered))):
            raise InputError(f"the calls of run {run_id!r} are not numbered 0..n-1",
                             source=source, path="calls.parquet.call")
        out.append(RecordedRun(
            run_id=run_id, calls=tuple(c for _, c in numbered),
            source=_text(row["source"]) or "", task_id=_text(row["task_id"]),
            model=_text(row["model"]), exit=_text(row["exit"]),
            resolved=_flag(row["resolved"]),
            cost_usd=_money(row["cost_usd"], "cost_usd", f"runs.parquet, run {run_id!r}",
                            source)))
    if by_run:
        orphan = sorted(by_run)[0]
        raise InputError(f"calls of a run that runs.parquet does not list: {orphan!r}",
                         source=source, path="calls.parquet.run_id")
    return out


def _call(row: Mapping[str, Any], where: str, source: str) -> RecordedCall:
    usage = Usage(
        input_tokens=_count(row["input_tokens"], "input_tokens", where, source),
        cache_read_tokens=_count(row["cache_read_tokens"], "cache_read_tokens", where, source),
        cache_write_tokens=_count(row["cache_write_tokens"], "cache_write_tokens", where,
                                  source),
        output_tokens=_count(row["output_tokens"], "output_tokens", where, source),
        thinking_tokens=_count(row["reasoning_tokens"], "reasoning_tokens", where, source))
    return RecordedCall(
        usage=usage, cost_usd=_money(row["cost_usd"], "cost_usd", where, source),
        finish_reason=_text(row["finish_reason"]),
        latency_s=_seconds(row["latency_s"], "latency_s", where, source),
        text_tokens=_count(row["text_tokens"], "text_tokens", where, source, default=0),
        observation_tokens=_count(row["observation_tokens"], "observation_tokens", where,
                                  source, default=0),
        tools=tuple(_tool(t, f"{where}, tool call {i}", source)
                    for i, t in enumerate(_items(row["tool_calls"], where, source))),
        model=_text(row["model"]), text_sha256=_text(row.get("text_sha256")),
        observation_sha256=_text(row.get("observation_sha256")),
        purpose=_purpose(row.get("purpose"), where, source), agent=_text(row.get("agent")))


PURPOSES: tuple[str, ...] = ("step", "compaction", "verifier", "finalize")


def _purpose(value: Any, where: str, source: str) -> str:
    if _missing(value):
        return "step"
    if str(value) not in PURPOSES:
        raise InputError(f"purpose is {value!r}: expected one of {', '.join(PURPOSES)}",
                         source=source, path=where)
    return str(value)


def _tool(item: Any, where: str, source: str) -> RecordedTool:
    if not isinstance(item, Mapping) or _missing(item.get("name")):
        raise InputError("a tool call must be a record with a name", source=source,
                         path=where)
    return RecordedTool(
        name=str(item["name"]), arguments=_text(item.get("arguments")),
        result_tokens=_count(item.get("result_tokens"), "result_tokens", where, source,
                             default=None),
        result_sha256=_text(item.get("result_sha256")), error=bool(_flag(item.get("error"))),
        duration_s=_seconds(item.get("duration_s"), "duration_s", where, source))


def _items(value: Any, where: str, source: str) -> Iterable[Any]:
    if isinstance(value, list | tuple) or (hasattr(value, "__len__") and hasattr(value, "dtype")):
        return list(value)  # a list, or the numpy array pandas may give for a list column
    if _missing(value):
        return ()
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise InputError(f"tool_calls must be a list, got {type(value).__name__}",
                         source=source, path=where)
    return list(value)


# ------------------------------------------------------------ values
def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, pd.NA (whose comparison is NA: truthiness raises)
    except TypeError:
        return True


def _text(value: Any) -> str | None:
    return None if _missing(value) else str(value)


def _flag(value: Any) -> bool | None:
    return None if _missing(value) else bool(value)


def _number(value: Any, name: str, where: str, source: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} is {value!r}, not a number", source=source,
                         path=where) from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{name} is {value!r}: expected a finite number >= 0",
                         source=source, path=where)
    return number


def _count(value: Any, name: str, where: str, source: str, default: Any = ...) -> Any:
    if _missing(value):
        if default is ...:
            raise InputError(f"{name} is missing", source=source, path=where)
        return default
    number = _number(value, name, where, source)
    if not number.is_integer():
        raise InputError(f"{name} is {value!r}, not a whole number of tokens",
                         source=source, path=where)
    return int(number)


def _money(value: Any, name: str, where: str, source: str) -> float | None:
    return None if _missing(value) else _number(value, name, where, source)


def _seconds(value: Any, name: str, where: str, source: str) -> float | None:
    return None if _missing(value) else _number(value, name, where, source)
