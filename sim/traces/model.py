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

**Provenance.** Every call records how each of its five token counts and its
cost was obtained (``provenance``: exact, derived, estimated or unknown;
:mod:`sim.traces.provenance`). A count the source does not record for a call
is null in ``calls.parquet`` (``Usage`` holds 0), never a made-up 0; the run's
column is then the source's run total (``RunRecord.totals``) or the sum of the
known counts. ``import.json`` counts the provenance per source and figure and
warns when a figure downstream commands rely on is estimated or unknown for
more than 1% of a source's calls. Folders written before the column existed
read with each figure exact when it holds a value, unknown when null.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sim.cost.recorded import calls_cost
from sim.harness.messages import Usage, estimate_tokens
from sim.traces.reading import load_tables, read_traces
from sim.traces.schema import (
    CALL_COLUMNS,
    CALLS_FILE,
    CALLS_SCHEMA,
    DERIVED,
    EARLIEST,
    ESTIMATED,
    EXACT,
    LATER_CALL_COLUMNS,
    LATEST,
    LIMIT_COLUMNS,
    MAX_COUNT,
    MAX_LIMIT,
    MAX_SECONDS,
    MAX_TOTAL,
    MAX_USD,
    MONEY_COLUMNS,
    OBSERVATION_JOIN,
    PROVENANCE_CALL_COLUMNS,
    PROVENANCE_FIELDS,
    PROVENANCE_TYPE,
    PROVENANCES,
    PURPOSES,
    REPORT_FILE,
    RUN_COLUMNS,
    RUNS_FILE,
    RUNS_SCHEMA,
    SECONDS_COLUMNS,
    SIZE_COLUMNS,
    SOURCES,
    SUBAGENT_CALL_COLUMNS,
    TOKEN_COLUMNS,
    TOOL_CALL_FIELDS,
    TOOL_CALL_TYPE,
    UNDETERMINED,
    UNKNOWN,
    USAGE_ATTRIBUTES,
)

__all__ = [
    "CALLS_FILE", "CALLS_SCHEMA", "CALL_COLUMNS", "CallRecord", "DERIVED", "EARLIEST",
    "ESTIMATED", "EXACT", "PROVENANCES", "PROVENANCE_CALL_COLUMNS", "PROVENANCE_FIELDS",
    "PROVENANCE_TYPE", "UNDETERMINED", "UNKNOWN",
    "LATER_CALL_COLUMNS", "LATEST", "LIMIT_COLUMNS", "MAX_COUNT", "MAX_LIMIT", "MAX_SECONDS",
    "MAX_TOTAL", "MAX_USD", "MONEY_COLUMNS", "OBSERVATION_JOIN", "PURPOSES", "REPORT_FILE",
    "RUNS_FILE",
    "RUNS_SCHEMA", "RUN_COLUMNS", "RunRecord", "SECONDS_COLUMNS", "SIZE_COLUMNS", "SOURCES",
    "SUBAGENT_CALL_COLUMNS", "TOKEN_COLUMNS", "TOOL_CALL_FIELDS", "TOOL_CALL_TYPE",
    "USAGE_ATTRIBUTES", "ToolCallRecord", "Usage", "approx_tokens", "as_dict", "as_list",
    "canonical_arguments",
    "bounded_int", "canonical_json", "content_text", "finite_or_none", "is_trace_folder",
    "joined_sha256",
    "load_tables", "parse_utc", "read_traces", "sha256_text", "tool_result", "utc_from_unix",
]

# -------------------------------------------------------------- records

@dataclass(slots=True)
class ToolCallRecord:
    """One tool call a response made, and what came back (see :data:`TOOL_CALL_FIELDS`):
    ``arguments`` as canonical JSON (None: unrecorded), ``result_tokens``
    (None: no result recorded), ``result_sha256`` of the result text, the
    ``error`` flag (None: unknown), ``duration_s`` in seconds."""

    name: str
    id: str | None = None
    arguments: str | None = None
    result_tokens: int | None = None
    result_sha256: str | None = None
    error: bool | None = None
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
class CallRecord:
    """One model call (see :data:`CALL_COLUMNS`; ``run_id`` and ``call`` are
    given by the run): the one call record from an importer to a replay,
    frozen (a field set once: an importer that learns a figure later builds
    the call again with :func:`dataclasses.replace`; its ``tool_calls`` list
    is filled in while the run is read, and the writer's repairs replace a
    call in its run's list by the repaired copy).
    Importers build it, the writer writes it, and the one reader of recorded
    runs (:mod:`sim.drivers.replay.reading`) builds it again from
    ``calls.parquet`` for replay, calibration and tune (there ``started_s``,
    ``provenance`` and a tool call's ``id`` are left at their defaults: no
    reader of recorded runs needs them). ``usage`` is the harness's own
    per-call type, :class:`sim.harness.messages.Usage`, built by keyword (its
    ``thinking_tokens`` are the column ``reasoning_tokens``; its
    ``prompt_tokens`` the whole prompt), so a call's usage has one shape from
    an importer to the harness. ``purpose`` is ``step`` or null for a loop
    step (what imported runs' calls are), else ``compaction``, ``verifier``
    or ``finalize`` (the tool-free call of ``harness.visibility.on_limit:
    finalize``): :data:`PURPOSES`, :attr:`is_step`. ``agent``: the subagent
    that made the call (None or empty: the run's own agent)."""

    usage: Usage
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
    provenance: dict[str, str] = field(default_factory=dict)
    """How each figure of the call was obtained, by column of
    :data:`PROVENANCE_FIELDS`: :data:`EXACT` (as the source records it),
    :data:`DERIVED` (computed from recorded figures: prompt minus cache,
    completion minus reasoning), :data:`ESTIMATED` (from the content's length,
    or a partial count) or :data:`UNKNOWN` (not recorded: the writer writes
    null for a token column). A column not listed is exact when it holds a
    value and unknown when it is null (``cost_usd``)."""

    @property
    def is_step(self) -> bool:
        """Whether the call was a loop step (``purpose`` step or null)."""
        return self.purpose is None or self.purpose == "step"


@dataclass(slots=True)
class RunRecord:
    """One run, the one run record from an importer to a replay: importers
    yield it, the writer writes it (the run's ``steps`` and token sums are
    computed from ``calls`` by the writer, so they always agree), and the one
    reader of recorded runs (:mod:`sim.drivers.replay.reading`) builds it
    again from the two tables for replay, calibration and tune, with its
    calls in order (there ``file`` is "" and the fields after ``resolved``
    are left at their defaults: no reader of recorded runs needs them).
    ``exit`` is the source's label verbatim, ``resolved`` None when the
    source does not say, ``cost_usd`` the run's recorded cost (USD; None:
    unrecorded)."""

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
    totals: dict[str, int] | None = None
    """The run's token totals as the source records them (by token column),
    for a source whose calls do not all record usage (SWE-agent's run-level
    ``model_stats``, a trace with some generations without usage): the run
    row's column is this total rather than the sum of its calls' known
    counts. None: the run's totals are the sums of its calls'."""
    conventions: dict[str, str] = field(default_factory=dict)
    """How the importer read this run where a source's convention varies, as
    ``{what: how}`` (``{"input_tokens": "excludes cache (inspect_ai >=
    0.3.184)"}``, ``{"output_tokens": "estimated from content: streaming
    partial counts"}``); counted per source in ``import.json``; not written
    to the tables."""

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return sum(len(c.tool_calls) for c in self.calls)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens summed over the recorded calls."""
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def recorded_cost_usd(self) -> float | None:
        """The run's recorded cost (USD), else its calls' recorded costs
        (:func:`sim.cost.recorded.calls_cost`: their exact sum when every
        call has one), else None."""
        if self.cost_usd is not None:
            return self.cost_usd
        return calls_cost(c.cost_usd for c in self.calls)


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
    """``obj`` as canonical JSON: sorted keys, no spaces, UTF-8 kept as is.
    A flat object of strings (a simulated tool call's arguments) is written
    directly, with json's own string encoder: the same text, several times
    faster than :func:`json.dumps`."""
    if type(obj) is dict:
        if len(obj) == 1:
            ((key, value),) = obj.items()
            if type(key) is str and type(value) is str:
                return "{" + _string(key) + ":" + _string(value) + "}"
        elif all(type(k) is str and type(v) is str for k, v in obj.items()):
            pairs = sorted(obj.items())
            return "{" + ",".join(f"{_string(k)}:{_string(v)}" for k, v in pairs) + "}"
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_string = json.encoder.encode_basestring  # json.dumps' own, for ensure_ascii=False


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


LONGEST_INT = 300
"""Digits of the longest JSON integer read as an integer; a longer one is read
as a float (``inf`` past 1.8e308): every figure a trace holds is bounded far
below, and an integer no float can hold made the arithmetic on it raise
(a timestamp of 400 digits, a cost of 10^400)."""


def bounded_int(text: str) -> int | float:
    """A JSON integer's text as Python reads it (``json``'s ``parse_int``):
    an int, or a float when longer than :data:`LONGEST_INT` digits."""
    return int(text) if len(text) <= LONGEST_INT else float(text)


def parse_utc(value: Any) -> datetime | None:
    """An ISO 8601 string (or a datetime) as a UTC datetime, a naive time taken
    as UTC; None when missing, not a time, or not one in UTC (a time zone's
    offset taking it before the year 1 or past 9999)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        return None


def content_text(content: Any) -> str | None:
    """The text of a chat message's content: a string, the text parts of a list
    of parts (``{"type": "text", "text": ...}``), None for no content."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)
