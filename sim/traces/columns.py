"""Model calls recorded as flat lists of fields, turned into ``calls.parquet``'s columns.

:class:`CallColumns` is the buffer :class:`~sim.traces.simulated.RunRecorder`
writes into while runs are simulated: a recorded call is one run of entries
appended to one list (and one per tool call to a second list), never an
object of its own, and no object of the harness is kept (the buffer holds
numbers and strings only, which the garbage collector need not walk). Several
runs (a chunk's) may share one buffer, their calls interleaved (the DES
engine); :meth:`CallColumns.table` orders them by run and builds the Arrow
table of :data:`~sim.traces.model.CALLS_SCHEMA` in one go, with each run's
call count and token sums for ``runs.parquet``. A run's subagents' calls are
calls of its run (under its key), each with its subagent's id in
:attr:`CallColumns.agents` (the ``agent`` column), as importers write them.

Texts are recorded as they are and hashed when the table is built
(:func:`hashed`): each distinct text of a chunk once, from a small cache of
the last few thousand (:func:`text_sha256`; a simulated world says the same
few sentences over and over).
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
from sim.traces.provenance import default_column

POOL = pa.system_memory_pool()
"""The allocator of the columns built from the recorded lists: the C library's.
Arrow's default (mimalloc) hands the builders' large buffers back to the system
as each chunk's table is built and faults them in again for the next: about 22
us of system time per task of a worker's traced chunks, against 6 with this
pool (the bytes are the same)."""

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


def observed_text(texts: Sequence[str | None]) -> str | None:
    """The texts of an observation joined as :func:`~sim.traces.model.joined_sha256`
    hashes them (None when there is none)."""
    recorded = [t for t in texts if t is not None]
    return OBSERVATION_JOIN.join(recorded) if recorded else None


def hashed(texts: list[str | None]) -> list[str | None]:
    """:func:`text_sha256` of each of ``texts`` (None stays None), each
    distinct text hashed once."""
    digests: dict[str | None, str | None] = {text: text_sha256(text) for text in set(texts)
                                             if text is not None}
    return list(map(digests.get, texts))


HASHED = frozenset({"text_sha256", "observation_sha256", "result_sha256"})
"""Fields recorded as their texts, hashed when the calls are turned into a
table or objects (:func:`hashed`: a text the world repeats is hashed once)."""


ROW = ("run", *TOKEN_COLUMNS, "model", "cost_usd", "finish_reason", "started_s", "latency_s",
       "text_tokens", "tools", "observation_tokens", "purpose", "text_sha256",
       "observation_sha256")
"""The fields of a recorded call, in their order in :attr:`CallColumns.rows`."""
RUN, COST, TOOLS, OBSERVATION_TOKENS, OBSERVATION_SHA256 = (
    ROW.index(name) for name in ("run", "cost_usd", "tools", "observation_tokens",
                                 "observation_sha256"))
WIDTH = len(ROW)
TOOL_ROW = tuple(field.name for field in TOOL_CALL_TYPE)
"""The fields of a recorded tool call, in their order in :attr:`CallColumns.tool_rows`
(``id``, ``name``, ``arguments``, ``result_tokens``, ``result_sha256``, ``error``,
``duration_s``)."""
TOOL_WIDTH = len(TOOL_ROW)
RESULT = TOOL_ROW.index("result_tokens")
"""Where a tool call's result fields start (set once its result is seen)."""

_PLAIN = (*TOKEN_COLUMNS, "model", "cost_usd", "finish_reason", "started_s", "latency_s",
          "text_tokens", "observation_tokens", "purpose", "text_sha256", "observation_sha256")
"""Columns written as they were recorded."""


class CallColumns:
    """The calls of one or more runs, flat. A call is :data:`WIDTH`
    consecutive entries of ``rows`` (the fields of :data:`ROW`: its run's
    key, its usage, ..., ``tools``: how many tool calls it made), call ``i``
    at ``rows[i * WIDTH:(i + 1) * WIDTH]``; its place in its run is its place
    among the run's calls. Its tool calls are the next :data:`TOOL_WIDTH`
    entries each of ``tool_rows`` (the fields of :data:`TOOL_ROW`: the call's
    id, the tool's name, the canonical JSON arguments; the result's size in
    tokens, hash, error flag and the tool's time in seconds, None until seen).
    ``dropped`` lists calls the harness did not account (left out of every
    table); ``agents`` maps a subagent's call (its number among all calls
    recorded) to the subagent's id, its ``agent`` column (the run's own calls
    are not in it: ``agent`` null). One entry appended per call (and per tool
    call), not one object: the buffer holds numbers and strings only."""

    __slots__ = ("agents", "dropped", "rows", "tool_rows")

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.tool_rows: list[Any] = []
        self.dropped: list[int] = []
        self.agents: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.rows) // WIDTH

    def column(self, name: str) -> list[Any]:
        """The field ``name`` of :data:`ROW` (or of :data:`TOOL_ROW`) of every
        call (tool call) recorded, in order; texts hashed (:data:`HASHED`)."""
        if name in ROW:
            values = self.rows[ROW.index(name)::WIDTH]
        else:
            values = self.tool_rows[TOOL_ROW.index(name)::TOOL_WIDTH]
        return hashed(values) if name in HASHED else values

    @property
    def run(self) -> list[Any]:
        """Each call's run key, in the order they were recorded."""
        return self.column("run")

    # ------------------------------------------------------------ tables
    def table(self, keys: Sequence[Any], run_ids: Sequence[str]
              ) -> tuple[pa.Table, np.ndarray, dict[str, np.ndarray]]:
        """The calls of the runs ``keys`` (in that order; ``run_ids`` their
        ids) as a table of :data:`CALLS_SCHEMA`, grouped by run in order;
        with each run's call count and its sums of every token column."""
        position = {key: i for i, key in enumerate(keys)}
        keyed = self.column("run")
        runs = np.fromiter(map(position.__getitem__, keyed), dtype=np.int64, count=len(keyed))
        tools = np.asarray(self.column("tools"), dtype=np.int64)
        offsets = np.zeros(len(tools) + 1, dtype=np.int64)
        np.cumsum(tools, out=offsets[1:])
        children = pa.StructArray.from_arrays(
            [pa.array(self.column(f.name), f.type, memory_pool=POOL)
             for f in TOOL_CALL_TYPE],
            fields=list(TOOL_CALL_TYPE))
        columns: dict[str, Any] = {
            "run_id": pa.array(run_ids, pa.string(), memory_pool=POOL).take(pa.array(runs)),
            "call": pa.nulls(len(runs), pa.int64()),  # numbered once ordered, below
            "tool_calls": pa.ListArray.from_arrays(pa.array(offsets), children,
                                                   type=CALLS_SCHEMA.field("tool_calls").type),
            "agent": (pa.array(list(map(self.agents.get, range(len(runs)))), pa.string())
                      if self.agents else pa.nulls(len(runs), pa.string()))}
        for name in _PLAIN:
            columns[name] = pa.array(self.column(name), CALLS_SCHEMA.field(name).type,
                                     memory_pool=POOL)
        columns["provenance"] = default_column(columns)  # sim's own figures: all exact
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
        calls = dict(zip(ROW, map(self.column, ROW), strict=True))
        tools = dict(zip(TOOL_ROW, map(self.column, TOOL_ROW), strict=True))
        out: dict[Any, list[CallRecord]] = {}
        child = 0
        for row in range(len(self)):
            count = calls["tools"][row]
            made = [ToolCallRecord(**{name: tools[name][i] for name in TOOL_ROW})
                    for i in range(child, child + count)]
            child += count
            if row in dropped:
                continue
            usage = Usage(**{attribute: calls[name][row]
                             for name, attribute in USAGE_ATTRIBUTES.items()})
            out.setdefault(calls["run"][row], []).append(CallRecord(
                usage, tool_calls=made, agent=self.agents.get(row),
                **{name: calls[name][row] for name in _PLAIN[len(TOKEN_COLUMNS):]}))
        return out
