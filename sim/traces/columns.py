"""Model calls recorded as columns: one Python list per column of ``calls.parquet``.

:class:`CallColumns` is the buffer :class:`~sim.traces.simulated.RunRecorder`
writes into while runs are simulated: a recorded call is one entry appended to
each column list (and one per tool call to the tool calls' lists), never an
object of its own, and no object of the harness is kept (the buffer holds
numbers and strings only, which the garbage collector need not walk). Several
runs (a chunk's) may share one buffer, their calls interleaved (the DES
engine); :meth:`CallColumns.table` orders them by run and builds the Arrow
table of :data:`~sim.traces.model.CALLS_SCHEMA` in one go, with each run's
call count and token sums for ``runs.parquet``.

Hashes of texts are kept in a small cache (:func:`text_sha256`): a simulated
world says the same few sentences over and over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from sim.traces.model import (
    CALLS_SCHEMA,
    OBSERVATION_JOIN,
    TOKEN_COLUMNS,
    TOOL_CALL_TYPE,
    USAGE_ATTRIBUTES,
    CallRecord,
    ToolCallRecord,
    Usage,
)

_HASHES: dict[str, str] = {}
_HASHES_KEPT = 4096


def text_sha256(text: str) -> str:
    """:func:`~sim.traces.model.sha256_text` of ``text`` (UTF-8, a lone
    surrogate as its code unit), from a cache of the
    last few thousand texts hashed (cleared when full)."""
    digest = _HASHES.get(text)
    if digest is None:
        if len(_HASHES) >= _HASHES_KEPT:
            _HASHES.clear()
        digest = _HASHES[text] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def texts_sha256(texts: list[str]) -> str:
    """The hash of ``texts`` concatenated (a response's text blocks)."""
    if len(texts) == 1:
        return text_sha256(texts[0])
    return text_sha256("".join(texts))


def observed_sha256(texts: Sequence[str | None]) -> str | None:
    """:func:`~sim.traces.model.joined_sha256` of ``texts``, cached."""
    recorded = [t for t in texts if t is not None]
    return text_sha256(OBSERVATION_JOIN.join(recorded)) if recorded else None


_PLAIN = (*TOKEN_COLUMNS, "model", "cost_usd", "finish_reason", "started_s", "latency_s",
          "text_tokens", "observation_tokens", "purpose", "text_sha256", "observation_sha256")
"""Columns written as they were recorded."""


class CallColumns:
    """The calls of one or more runs, a list per column. A call is row ``i``
    of every row column; ``run`` holds its run's key (its index in the run
    is its place among the run's rows), the token columns its usage,
    ``tools`` how many tool calls it made: those are the next entries of
    the tool columns (the call's id, the tool's name, the canonical JSON
    arguments; the result's size in tokens, hash, error flag and the tool's
    time in seconds, None until seen). ``dropped`` lists rows the harness
    did not account (left out of every table)."""

    __slots__ = ("arguments", "cache_read_tokens", "cache_write_tokens", "cost_usd",
                 "dropped", "duration_s", "error", "finish_reason", "input_tokens",
                 "latency_s", "model", "observation_sha256", "observation_tokens",
                 "output_tokens", "purpose", "reasoning_tokens", "result_sha256",
                 "result_tokens", "run", "started_s", "text_sha256", "text_tokens",
                 "tool_id", "tool_name", "tools")

    def __init__(self) -> None:
        self.run: list[Any] = []
        self.input_tokens: list[int] = []
        self.cache_read_tokens: list[int] = []
        self.cache_write_tokens: list[int] = []
        self.output_tokens: list[int] = []
        self.reasoning_tokens: list[int] = []
        self.model: list[str | None] = []
        self.cost_usd: list[float | None] = []
        self.finish_reason: list[str | None] = []
        self.started_s: list[float | None] = []
        self.latency_s: list[float | None] = []
        self.text_tokens: list[int | None] = []
        self.tools: list[int] = []
        self.observation_tokens: list[int | None] = []
        self.purpose: list[str | None] = []
        self.text_sha256: list[str | None] = []
        self.observation_sha256: list[str | None] = []
        self.tool_id: list[str | None] = []
        self.tool_name: list[str] = []
        self.arguments: list[str | None] = []
        self.result_tokens: list[int | None] = []
        self.result_sha256: list[str | None] = []
        self.error: list[bool | None] = []
        self.duration_s: list[float | None] = []
        self.dropped: list[int] = []

    def __len__(self) -> int:
        return len(self.run)

    # ------------------------------------------------------------ tables
    def table(self, keys: Sequence[Any], run_ids: Sequence[str]
              ) -> tuple[pa.Table, np.ndarray, dict[str, np.ndarray]]:
        """The calls of the runs ``keys`` (in that order; ``run_ids`` their
        ids) as a table of :data:`CALLS_SCHEMA`, grouped by run in order;
        with each run's call count and its sums of every token column."""
        position = {key: i for i, key in enumerate(keys)}
        runs = np.fromiter((position[k] for k in self.run), dtype=np.int64, count=len(self.run))
        tools = np.asarray(self.tools, dtype=np.int64)
        offsets = np.zeros(len(tools) + 1, dtype=np.int64)
        np.cumsum(tools, out=offsets[1:])
        children = pa.StructArray.from_arrays([
            pa.array(self.tool_id, pa.string()),
            pa.array(self.tool_name, pa.string()),
            pa.array(self.arguments, pa.string()),
            pa.array(self.result_tokens, pa.int64()),
            pa.array(self.result_sha256, pa.string()),
            pa.array(self.error, pa.bool_()),
            pa.array(self.duration_s, pa.float64())], fields=list(TOOL_CALL_TYPE))
        columns: dict[str, Any] = {
            "run_id": pa.array(run_ids, pa.string()).take(pa.array(runs)),
            "call": pa.nulls(len(runs), pa.int64()),  # numbered once ordered, below
            "tool_calls": pa.ListArray.from_arrays(pa.array(offsets), children,
                                                   type=CALLS_SCHEMA.field("tool_calls").type),
            "agent": pa.nulls(len(runs), pa.string())}
        for name in _PLAIN:
            columns[name] = pa.array(getattr(self, name), CALLS_SCHEMA.field(name).type)
        table = pa.Table.from_arrays([columns[name] for name in CALLS_SCHEMA.names],
                                     schema=CALLS_SCHEMA)
        if self.dropped:
            kept = np.ones(len(runs), dtype=bool)
            kept[self.dropped] = False
            table, runs = table.filter(pa.array(kept)), runs[kept]
        if len(runs) > 1 and (np.diff(runs) < 0).any():  # interleaved runs (DES)
            order = np.argsort(runs, kind="stable")
            table, runs = table.take(pa.array(order)), runs[order]
        steps = np.bincount(runs, minlength=len(keys))
        ends = np.cumsum(steps)
        calls = np.arange(len(runs), dtype=np.int64) - np.repeat(ends - steps, steps)
        table = table.set_column(table.schema.get_field_index("call"),
                                 CALLS_SCHEMA.field("call"), pa.array(calls))
        sums = {}
        for name in TOKEN_COLUMNS:
            totals = np.zeros(len(runs) + 1, dtype=np.int64)
            np.cumsum(table.column(name).to_numpy(), out=totals[1:])
            sums[name] = totals[ends] - totals[ends - steps]
        return table, steps, sums

    def records(self) -> dict[Any, list[CallRecord]]:
        """The calls as :class:`~sim.traces.model.CallRecord` objects, by run
        key, each run's in order (for code that wants objects: a live run's
        recorder, or the writer's careful path)."""
        dropped = set(self.dropped)
        out: dict[Any, list[CallRecord]] = {}
        child = 0
        for row in range(len(self.run)):
            count = self.tools[row]
            tools = [ToolCallRecord(name=self.tool_name[i], id=self.tool_id[i],
                                    arguments=self.arguments[i],
                                    result_tokens=self.result_tokens[i],
                                    result_sha256=self.result_sha256[i], error=self.error[i],
                                    duration_s=self.duration_s[i])
                     for i in range(child, child + count)]
            child += count
            if row in dropped:
                continue
            usage = Usage(**{attribute: getattr(self, name)[row]
                             for name, attribute in USAGE_ATTRIBUTES.items()})
            out.setdefault(self.run[row], []).append(CallRecord(
                usage, tool_calls=tools, agent=None,
                **{name: getattr(self, name)[row] for name in _PLAIN[len(TOKEN_COLUMNS):]}))
        return out
