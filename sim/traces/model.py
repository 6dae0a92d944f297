"""The trace model: real (or simulated) agent runs as two Parquet tables in a folder.

A **trace folder** holds ``runs.parquet`` (one row per run), ``calls.parquet``
(one row per model call, with the tool calls its response made nested in a
list column) and ``import.json`` (what was imported and what was skipped, and
why). Every importer yields :class:`RunRecord` objects (plain dataclasses, one
per run, with its :class:`CallRecord` list); :mod:`sim.traces.writer` turns
them into the two tables; :func:`read_traces` reads a folder back and checks it.

Units: tokens are integer counts, money is USD, times are seconds; ``started_at``
is a UTC timestamp (a source's timestamps without a zone are taken as UTC).

**Token convention** (the one :class:`sim.harness.messages.Usage` and
``results.parquet`` use): ``input_tokens`` are the *uncached* prompt tokens,
``cache_read_tokens`` the prompt tokens read from a prompt cache,
``cache_write_tokens`` those written to it, so a call's prompt is
``input + cache_read + cache_write``; ``output_tokens`` *exclude*
``reasoning_tokens``. Importers convert: OpenAI-style ``prompt_tokens`` and
OpenTelemetry's ``gen_ai.usage.input_tokens`` include the cache counts (they
are subtracted), and OpenAI's ``completion_tokens`` include the reasoning
tokens (subtracted too); a source that does not break reasoning out has
``reasoning_tokens`` 0 and counts it in ``output_tokens``.

**Sizes a source does not record** (a tool result's tokens, a response's text
tokens, an observation's tokens) are counted with one approximation,
:func:`approx_tokens`: ``ceil(characters / 4)``, the harness's own estimate.

**Tool-call arguments** are stored as canonical JSON
(``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``,
:func:`canonical_json`), so two calls with the same arguments have the same
string; arguments recorded as a string that is not valid JSON are kept verbatim.

**Columns** are listed, with their types, nullability and meaning, in
:data:`RUN_COLUMNS`, :data:`CALL_COLUMNS` and :data:`TOOL_CALL_FIELDS`. Beyond
the columns calibration and replay build on, runs have ``message_limit``
(tau2's ``max_steps`` counts messages, not calls) and calls ``purpose`` (sim's
own step, compaction and verifier calls). Fields a source cannot know are null
(a tool call's result fields when no result is recorded, ``text_tokens`` when
no content is), never a made-up 0.

**Text hashes.** Besides sizes, a call records what its text was, so a replay
can tell an agent repeating itself from one saying something new: like a tool
call's ``result_sha256``, ``text_sha256`` is :func:`sha256_text` of the
response's text content (the text ``text_tokens`` measures) and
``observation_sha256`` that of the non-tool messages counted in
``observation_tokens``, their texts joined in order with
:data:`OBSERVATION_JOIN` (:func:`joined_sha256`); both are null when the
source records no such text. Folders written before these two columns existed
read with them null (:data:`LATER_CALL_COLUMNS`).

**Subagents.** One run is one agent session (or trace). The calls a subagent
made for it (Claude Code's ``Agent``/``Task`` tool, a child run or
observation) are rows of the parent's run, in time order, with ``agent`` naming
the subagent; the run's own calls have ``agent`` null. Folders written before
the column existed read with it null.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from sim.bad_input import InputError
from sim.harness.messages import estimate_tokens

RUNS_FILE = "runs.parquet"
CALLS_FILE = "calls.parquet"
REPORT_FILE = "import.json"

SOURCES: tuple[str, ...] = ("tau2", "mini-swe-agent", "otel-genai", "inspect", "sim",
                            "claude-code", "langfuse", "langsmith", "openinference")
"""Values of ``runs.source``: the format a run was imported from."""

TOKEN_COLUMNS: tuple[str, ...] = ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                                  "output_tokens", "reasoning_tokens")


# ---------------------------------------------------------------- bounds
# What a value may be, for the writer's repairs (:mod:`sim.traces.repairs`) and
# the reader's checks (:func:`load_tables`) alike: one definition.

MAX_COUNT = 2**53
"""The largest token count (or size in tokens) of one call or run: a larger
one is a corrupt record."""

MAX_TOTAL = 2**60
"""The largest total of one token column over a whole trace folder, so that
sums of the five columns can never wrap around an int64 (5 * 2**60 < 2**63)."""

MAX_SECONDS = 366 * 86_400.0
"""The longest time in seconds a run, call or tool may take (a year)."""

MAX_USD = 1e6
"""The largest cost in USD of one run or call (or cost limit)."""

MAX_LIMIT = 10**9
"""The largest harness limit (steps, errors, messages) a run may record."""

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
"""``started_at`` lies in ``[EARLIEST, LATEST)``; a start outside (year 1,
year 9999) is a broken clock."""

SECONDS_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("duration_s",), "calls": ("started_s", "latency_s"),
    "tool_calls": ("duration_s",)}
MONEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("cost_usd", "cost_limit_usd"), "calls": ("cost_usd",), "tool_calls": ()}
SIZE_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": (), "calls": ("text_tokens", "observation_tokens"), "tool_calls": ("result_tokens",)}
LIMIT_COLUMNS: tuple[str, ...] = ("step_limit", "error_limit", "message_limit")
"""Columns bounded as above: seconds in ``[0, MAX_SECONDS]``, money in ``[0,
MAX_USD]`` (a cost limit above 0), sizes in ``[0, MAX_COUNT]``, limits in
``[1, MAX_LIMIT]``; null is always allowed."""


# --------------------------------------------------------------- schema

TOOL_CALL_TYPE = pa.struct([
    pa.field("id", pa.string()),
    pa.field("name", pa.string()),
    pa.field("arguments", pa.string()),
    pa.field("result_tokens", pa.int64()),
    pa.field("result_sha256", pa.string()),
    pa.field("error", pa.bool_()),
    pa.field("duration_s", pa.float64()),
])

RUN_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    # name: (type, nullable, meaning)
    "run_id": (pa.string(), False, "unique in the folder"),
    "source": (pa.string(), False, "format imported from: one of SOURCES"),
    "file": (pa.string(), False, "the file (or folder) the run was read from"),
    "task_id": (pa.string(), True, "the task the run attempted"),
    "model": (pa.string(), True, "the agent's model"),
    "steps": (pa.int64(), False, "model calls (rows of calls.parquet for the run)"),
    "input_tokens": (pa.int64(), False, "uncached prompt tokens, summed over calls"),
    "cache_read_tokens": (pa.int64(), False, "prompt tokens read from cache, summed"),
    "cache_write_tokens": (pa.int64(), False, "prompt tokens written to cache, summed"),
    "output_tokens": (pa.int64(), False, "output tokens (without reasoning), summed"),
    "reasoning_tokens": (pa.int64(), False, "reasoning tokens, summed (0: not broken out)"),
    "cost_usd": (pa.float64(), True, "the run's cost as the source records it"),
    "exit": (pa.string(), True, "the source's own termination label, verbatim"),
    "resolved": (pa.bool_(), True, "whether the task was solved, where the source says"),
    "started_at": (pa.timestamp("us", tz="UTC"), True, "when the run started (UTC)"),
    "duration_s": (pa.float64(), True, "wall-clock duration of the run"),
    "step_limit": (pa.int64(), True, "the harness's limit on model calls"),
    "cost_limit_usd": (pa.float64(), True, "the harness's cost limit"),
    "error_limit": (pa.int64(), True, "the harness's limit on errors"),
    "message_limit": (pa.int64(), True, "the harness's limit on conversation messages "
                                        "(all roles; tau2's max_steps)"),
}

CALL_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    "run_id": (pa.string(), False, "the run (runs.run_id)"),
    "call": (pa.int64(), False, "0-based index of the call in its run"),
    "model": (pa.string(), True, "the model that answered"),
    "input_tokens": (pa.int64(), False, "uncached prompt tokens"),
    "cache_read_tokens": (pa.int64(), False, "prompt tokens read from cache"),
    "cache_write_tokens": (pa.int64(), False, "prompt tokens written to cache"),
    "output_tokens": (pa.int64(), False, "output tokens without reasoning"),
    "reasoning_tokens": (pa.int64(), False, "reasoning tokens (0: not broken out)"),
    "cost_usd": (pa.float64(), True, "the call's cost as recorded"),
    "finish_reason": (pa.string(), True, "the provider's stop/finish reason, verbatim"),
    "started_s": (pa.float64(), True, "seconds from the run's start to the request"),
    "latency_s": (pa.float64(), True, "seconds from the request to the response"),
    "text_tokens": (pa.int64(), True, "size of the response's text content (approx_tokens; "
                                      "null when the source records no content)"),
    "tool_calls": (pa.list_(TOOL_CALL_TYPE), False, "the response's tool calls, in order"),
    "observation_tokens": (pa.int64(), True, "tokens of non-tool messages (a user's reply, "
                                             "an injected note) that entered the conversation "
                                             "after this call and before the next"),
    "purpose": (pa.string(), True, "why the call was made: step, compaction or verifier "
                                   "(sim's own runs; null for imported runs: a step)"),
    "text_sha256": (pa.string(), True, "SHA-256 (hex, sha256_text) of the response's text "
                                       "content, the text text_tokens measures (null when "
                                       "the source records no content)"),
    "observation_sha256": (pa.string(), True, "SHA-256 (hex, joined_sha256) of the texts "
                                              "of the messages observation_tokens counts, in "
                                              "order (null when there are none or their text "
                                              "is not recorded)"),
    "agent": (pa.string(), True, "the subagent that made the call, by its id in the source "
                                 "(a subagent's calls belong to their parent's run); null: "
                                 "the run's own agent"),
}

LATER_CALL_COLUMNS: frozenset[str] = frozenset({"text_sha256", "observation_sha256"})
"""Columns of :data:`CALL_COLUMNS` added after trace folders were first
written: a ``calls.parquet`` without them is read with them all null."""

SUBAGENT_CALL_COLUMNS: frozenset[str] = frozenset({"agent"})
"""Added later still, with the importers of sources that have subagents: a
``calls.parquet`` without it is read with it all null, like
:data:`LATER_CALL_COLUMNS`."""

OBSERVATION_JOIN = "\n"
"""What ``observation_sha256`` puts between the texts of two messages that
entered after the same call (a source's messages are hashed in order)."""

TOOL_CALL_FIELDS: dict[str, str] = {
    "id": "the call's id in the source (null when none)",
    "name": "the tool's name",
    "arguments": "canonical JSON of the arguments (raw string if not JSON; null if unrecorded)",
    "result_tokens": "size of the result the tool returned, in tokens (recorded or "
                     "approx_tokens of its text; null when no result is recorded)",
    "result_sha256": "SHA-256 (hex) of the result text (null when no text is recorded)",
    "error": "the result was flagged as an error (null when no result is recorded)",
    "duration_s": "seconds the tool ran (null when unknown)",
}


def _schema(columns: dict[str, tuple[pa.DataType, bool, str]]) -> pa.Schema:
    return pa.schema([pa.field(name, kind, nullable=nullable)
                      for name, (kind, nullable, _) in columns.items()])


RUNS_SCHEMA = _schema(RUN_COLUMNS)
CALLS_SCHEMA = _schema(CALL_COLUMNS)


# -------------------------------------------------------------- records

@dataclass(slots=True)
class ToolCallRecord:
    """One tool call a response made, and what came back (see :data:`TOOL_CALL_FIELDS`)."""

    name: str
    id: str | None = None
    arguments: str | None = None
    result_tokens: int | None = None
    result_sha256: str | None = None
    error: bool | None = None
    duration_s: float | None = None


@dataclass(slots=True)
class CallRecord:
    """One model call (see :data:`CALL_COLUMNS`; ``run_id`` and ``call`` are
    given by the run). Token counts follow the module's convention."""

    input_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    model: str | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    started_s: float | None = None
    latency_s: float | None = None
    text_tokens: int | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    observation_tokens: int | None = None
    purpose: str | None = None
    text_sha256: str | None = None
    observation_sha256: str | None = None
    agent: str | None = None

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens of the call: input + cache read + cache write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(slots=True)
class RunRecord:
    """One run as an importer yields it. The run's ``steps`` and token sums are
    computed from ``calls`` by the writer, so they always agree."""

    run_id: str
    source: str
    file: str
    calls: list[CallRecord]
    task_id: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    exit: str | None = None
    resolved: bool | None = None
    started_at: datetime | None = None
    duration_s: float | None = None
    step_limit: int | None = None
    cost_limit_usd: float | None = None
    error_limit: int | None = None
    message_limit: int | None = None
    repairs: list[tuple[str, str]] = field(default_factory=list)
    """Values the importer repaired or nulled while reading the run, as
    ``(dotted field, reason)`` (:mod:`sim.traces.repairs`); not written."""


# -------------------------------------------------- sizes and canonical forms

def approx_tokens(text: str | None) -> int:
    """The one tokenizer approximation of the trace model: ``ceil(len(text) / 4)``
    tokens for ``len(text)`` characters (0 for empty or missing text). It is
    :func:`sim.harness.messages.estimate_tokens`, so simulated and imported
    sizes are counted alike. Used only for sizes a source does not record.

    >>> approx_tokens("four"), approx_tokens("fives"), approx_tokens("")
    (1, 2, 0)
    """
    return estimate_tokens(text) if text else 0


def canonical_json(obj: Any) -> str:
    """``obj`` as canonical JSON: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_arguments(arguments: Any) -> str | None:
    """Tool-call arguments as canonical JSON. A string is parsed first (the
    OpenAI wire form) and kept verbatim if it is not valid JSON; None stays None."""
    if arguments is None:
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return canonical_json(arguments)


def sha256_text(text: str | None) -> str | None:
    """SHA-256 (hex) of ``text`` encoded as UTF-8 (a lone surrogate, which
    UTF-8 cannot encode, is hashed as its code unit); None for None."""
    if text is None:
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def joined_sha256(texts: Sequence[str | None]) -> str | None:
    """SHA-256 (hex) of the recorded ``texts`` (None entries left out) joined
    with :data:`OBSERVATION_JOIN`, in order; None when none is recorded. What
    ``observation_sha256`` holds for the messages after a call."""
    recorded = [t for t in texts if t is not None]
    return sha256_text(OBSERVATION_JOIN.join(recorded)) if recorded else None


def tool_result(text: str | None, *, tokens: int | None = None, error: bool | None = None
                ) -> tuple[int | None, str | None, bool | None]:
    """``(result_tokens, result_sha256, error)`` of a tool result: its recorded
    size or :func:`approx_tokens` of its text, the text's hash, the error flag."""
    if tokens is None and text is not None:
        tokens = approx_tokens(text)
    return tokens, sha256_text(text), error


# --------------------------------------------------------------- reading

def read_traces(directory: str | os.PathLike[str]) -> tuple[Any, Any]:
    """``(runs, calls)`` pandas DataFrames of a trace folder, checked.

    Checks (:func:`load_tables`), each failure an :class:`~sim.bad_input.InputError`
    naming the file and the column or run. Columns come back with pandas'
    nullable dtypes (``Int64``, ``Float64``, ``boolean``, ``string``; the
    timestamp as ``datetime64[us, UTC]``), ``tool_calls`` as lists of dicts;
    columns other than the model's are kept, after them.
    """
    runs, calls = load_tables(directory)
    tools = calls.column("tool_calls").to_pylist()  # plain dicts with ints kept as ints
    calls_frame = calls.drop_columns(["tool_calls"]).to_pandas(types_mapper=_pandas_type)
    calls_frame.insert(calls.schema.get_field_index("tool_calls"), "tool_calls",
                       _object_series(tools, calls_frame.index))
    return runs.to_pandas(types_mapper=_pandas_type), calls_frame


def _object_series(values: list, index: Any) -> Any:
    """A pandas object Series of ``values`` (lists stay lists)."""
    import pandas as pd

    return pd.Series(values, index=index, dtype=object)


def load_tables(directory: str | os.PathLike[str]) -> tuple[pa.Table, pa.Table]:
    """``(runs, calls)`` Arrow tables of a trace folder, checked: both files
    exist and are Parquet; every column of :data:`RUN_COLUMNS` /
    :data:`CALL_COLUMNS` is present with its type (those of
    :data:`LATER_CALL_COLUMNS` may be absent, as in a folder written before
    them: they are added, all null); required columns have no
    nulls; ``run_id`` is unique in runs; counts are non-negative; every call
    belongs to a run; each run's calls are numbered ``0..steps-1``; each
    run's token columns are the sums of its calls'; and every value is
    possible (the bounds above: token counts at most :data:`MAX_COUNT`, a
    column's total over the folder at most :data:`MAX_TOTAL`, so no sum wraps
    around; finite times and costs in range, limits at least 1, a start in
    ``[EARLIEST, LATEST)``)."""
    import pyarrow.parquet as pq

    folder = Path(directory)
    if not folder.is_dir():
        raise InputError("not a trace folder (no such directory)", source=str(folder))
    tables = []
    for name, schema, later in ((RUNS_FILE, RUNS_SCHEMA, frozenset()),
                                (CALLS_FILE, CALLS_SCHEMA,
                                 LATER_CALL_COLUMNS | SUBAGENT_CALL_COLUMNS)):
        path = folder / name
        if not path.is_file():
            raise InputError(f"missing {name}: not a trace folder", source=str(folder))
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as error:
            raise InputError(f"not a readable Parquet file ({error})", source=str(path)) from None
        tables.append(_check_table(table, schema, path, later))
    runs, calls = tables
    _check_values(runs, calls, folder)
    _check_consistency(runs, calls, folder)
    return runs, calls


def _check_values(runs: pa.Table, calls: pa.Table, folder: Path) -> None:
    """Every value of the model's columns within its bounds, or an InputError
    naming the file, the column (dotted for a tool call's field) and the run."""
    import pyarrow.compute as pc

    def refuse(table: pa.Table, path: str, column: str, mask: Any, what: str,
               run_ids: Any = None) -> None:
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            return
        index = pc.index(mask, True).as_py()
        ids = table.column("run_id") if run_ids is None else run_ids
        raise InputError(f"{what} in run {ids[index].as_py()!r}: "
                         f"{_shown(table, column, index, run_ids)}", source=path, path=column)

    runs_path, calls_path = str(folder / RUNS_FILE), str(folder / CALLS_FILE)
    for table, path in ((runs, runs_path), (calls, calls_path)):
        for name in TOKEN_COLUMNS:
            values = table.column(name)
            refuse(table, path, name, pc.less(values, 0), "negative token count")
            refuse(table, path, name, pc.greater(values, MAX_COUNT),
                   f"token count above {MAX_COUNT:,}")
    for name in TOKEN_COLUMNS:  # exact: float64 sums of values below 2**53 cannot wrap
        total = pc.sum(pc.cast(calls.column(name), pa.float64())).as_py() or 0.0
        if total > MAX_TOTAL:
            raise InputError(f"the calls' total of {total:.3g} tokens is above {MAX_TOTAL:,} "
                             "(sums would wrap around)", source=calls_path, path=name)
    tools = pc.list_flatten(calls.column("tool_calls"))
    tool_runs = pc.take(calls.column("run_id"), pc.list_parent_indices(
        calls.column("tool_calls")))
    tables = {"runs": (runs, runs_path, None, ""), "calls": (calls, calls_path, None, ""),
              "tool_calls": (pa.Table.from_arrays(
                  [pc.struct_field(tools, [i]) for i in range(tools.type.num_fields)],
                  names=[f.name for f in tools.type]), calls_path, tool_runs, "tool_calls.")}
    for kind, (table, path, ids, prefix) in tables.items():
        for columns, high, what in ((SECONDS_COLUMNS, MAX_SECONDS, "seconds"),
                                    (MONEY_COLUMNS, MAX_USD, "USD"),
                                    (SIZE_COLUMNS, MAX_COUNT, "tokens")):
            for name in columns[kind]:
                values = table.column(name)
                if pa.types.is_floating(values.type):
                    refuse(table, path, prefix + name, pc.invert(pc.is_finite(values)),
                           "not a finite number", ids)
                low = 1e-300 if name == "cost_limit_usd" else 0
                refuse(table, path, prefix + name, pc.or_(pc.less(values, low),
                                                          pc.greater(values, high)),
                       f"{what} outside [{low:g}, {high:g}]", ids)
    for name in LIMIT_COLUMNS:
        values = runs.column(name)
        refuse(runs, runs_path, name, pc.or_(pc.less(values, 1), pc.greater(values, MAX_LIMIT)),
               f"limit outside [1, {MAX_LIMIT:,}]")
    started = runs.column("started_at")
    refuse(runs, runs_path, "started_at", pc.or_(
        pc.less(started, pa.scalar(EARLIEST, started.type)),
        pc.greater_equal(started, pa.scalar(LATEST, started.type))),
        f"start outside [{EARLIEST:%Y-%m-%d}, {LATEST:%Y-%m-%d})")


def _shown(table: pa.Table, column: str, index: int, ids: Any) -> str:
    name = column.split(".")[-1]
    return f"{name} is {table.column(name)[index].as_py()!r}"


def _pandas_type(kind: pa.DataType) -> Any:
    import pandas as pd

    mapping = {pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(),
               pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype()}
    return mapping.get(kind)


def _check_table(table: pa.Table, schema: pa.Schema, path: Path,
                 later: frozenset[str] = frozenset()) -> pa.Table:
    """The table with the model's columns first (extras after), or an InputError;
    a missing column named in ``later`` is added, all null."""
    names = set(table.schema.names)
    for spec in schema:
        if spec.name not in names:
            if spec.name in later:  # a folder written before the column existed
                table = table.append_column(spec, pa.nulls(table.num_rows, spec.type))
                continue
            raise InputError("missing column", source=str(path), path=spec.name)
        actual = table.schema.field(spec.name).type
        if actual != spec.type:
            if pa.types.is_null(actual) and spec.nullable:  # an all-null column
                table = table.set_column(table.schema.get_field_index(spec.name), spec.name,
                                         table.column(spec.name).cast(spec.type))
                continue
            raise InputError(f"column has type {actual}, expected {spec.type}",
                             source=str(path), path=spec.name)
        if not spec.nullable and table.column(spec.name).null_count:
            raise InputError("required column has null values", source=str(path),
                             path=spec.name)
    order = list(schema.names) + [n for n in table.schema.names if n not in schema.names]
    return table.select(order)


def _check_consistency(runs: pa.Table, calls: pa.Table, folder: Path) -> None:
    import numpy as np

    runs_path, calls_path = str(folder / RUNS_FILE), str(folder / CALLS_FILE)
    run_ids = runs.column("run_id").to_pylist()
    index: dict[str, int] = {}
    for i, run in enumerate(run_ids):
        if run in index:
            raise InputError(f"run_id {run!r} appears more than once", source=runs_path,
                             path="run_id")
        index[run] = i
    call_runs = calls.column("run_id").to_pylist()
    codes = np.empty(len(call_runs), dtype=np.int64)
    for i, run in enumerate(call_runs):
        code = index.get(run)
        if code is None:
            raise InputError(f"call of unknown run {run!r}", source=calls_path, path="run_id")
        codes[i] = code

    def column(table: pa.Table, name: str) -> np.ndarray:
        return table.column(name).to_numpy().astype(np.int64, copy=False)

    for table, path, ids, extra in ((runs, runs_path, run_ids, "steps"),
                                    (calls, calls_path, call_runs, "call")):
        for name in (*TOKEN_COLUMNS, extra):
            negative = np.flatnonzero(column(table, name) < 0)
            if negative.size:
                raise InputError(f"negative value in run {ids[negative[0]]!r}", source=path,
                                 path=name)
    steps = column(runs, "steps")
    counts = np.bincount(codes, minlength=len(run_ids))
    wrong = np.flatnonzero(counts != steps)
    if wrong.size:
        i = wrong[0]
        raise InputError(f"run {run_ids[i]!r} has steps {steps[i]} but {counts[i]} calls",
                         source=runs_path, path="steps")
    number = column(calls, "call")
    order = np.lexsort((number, codes))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(run_ids) else counts
    expected = np.arange(len(order)) - starts[codes[order]]
    broken = np.flatnonzero(number[order] != expected)
    if broken.size:
        run = run_ids[codes[order][broken[0]]]
        raise InputError(f"calls of run {run!r} are not numbered 0..steps-1",
                         source=calls_path, path="call")
    for name in TOKEN_COLUMNS:
        sums = np.zeros(len(run_ids), dtype=np.int64)
        np.add.at(sums, codes, column(calls, name))
        wrong = np.flatnonzero(sums != column(runs, name))
        if wrong.size:
            raise InputError(f"run {run_ids[wrong[0]]!r}: the total is not the sum of its "
                             "calls", source=runs_path, path=name)


def is_trace_folder(path: Path) -> bool:
    """Whether ``path`` is a folder holding both trace tables."""
    return (path / RUNS_FILE).is_file() and (path / CALLS_FILE).is_file()


def finite_or_none(value: Any) -> float | None:
    """``value`` as a finite float, or None (missing, not a number, NaN or infinite)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def as_dict(value: Any) -> dict:
    """``value`` if it is a JSON object, else an empty one (sources are untrusted)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    """``value`` if it is a JSON list, else an empty one."""
    return value if isinstance(value, list) else []


def utc_from_unix(seconds: float | None) -> datetime | None:
    """A Unix time in seconds as a UTC datetime, or None when missing or out of range."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def parse_utc(value: Any) -> datetime | None:
    """An ISO 8601 string (or a datetime) as a UTC datetime, a naive time taken
    as UTC; None when missing or not a time."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def content_text(content: Any) -> str | None:
    """The text of a chat message's content: a string, the text parts of a list
    of parts (``{"type": "text", "text": ...}``), None for no content."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)
