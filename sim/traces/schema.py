"""The trace tables' schema: files, columns with their types and meaning, and bounds.

What :mod:`sim.traces.model` describes (its docstring holds the conventions)
as data: the columns of ``runs.parquet`` and ``calls.parquet``
(:data:`RUN_COLUMNS`, :data:`CALL_COLUMNS`, the tool calls' struct
:data:`TOOL_CALL_TYPE`), the Arrow schemas built from them, and the bounds a
value may take (for the writer's repairs and the reader's checks alike). The
names are importable from :mod:`sim.traces.model` too.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

RUNS_FILE = "runs.parquet"
CALLS_FILE = "calls.parquet"
REPORT_FILE = "import.json"

SOURCES: tuple[str, ...] = ("tau2", "mini-swe-agent", "otel-genai", "inspect", "sim",
                            "claude-code", "langfuse", "langsmith", "openinference",
                            "swe-agent", "openhands", "harbor", "openhands-sdk")
"""Values of ``runs.source``: the format a run was imported from."""

PURPOSES: tuple[str, ...] = ("step", "compaction", "verifier", "finalize")
"""What a recorded call was for (``calls.purpose``; null: a step)."""

TOKEN_COLUMNS: tuple[str, ...] = ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                                  "output_tokens", "reasoning_tokens")

USAGE_ATTRIBUTES: dict[str, str] = {
    "input_tokens": "input_tokens", "cache_read_tokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens", "output_tokens": "output_tokens",
    "reasoning_tokens": "thinking_tokens"}
"""Each token column and the attribute of a call's
:class:`~sim.harness.messages.Usage` it holds (the harness's
``thinking_tokens`` are the column ``reasoning_tokens``)."""


# ------------------------------------------------------------ provenance

EXACT = "exact"
DERIVED = "derived"
ESTIMATED = "estimated"
UNKNOWN = "unknown"
PROVENANCES: tuple[str, ...] = (EXACT, DERIVED, ESTIMATED, UNKNOWN)
"""How a call's figure was obtained (``CallRecord.provenance``, the
``provenance`` column of calls.parquet), from the most to the least
trustworthy."""

PROVENANCE_FIELDS: tuple[str, ...] = (*TOKEN_COLUMNS, "cost_usd")
"""The call columns whose provenance is recorded: the five token columns and
the cost."""

PROVENANCE_VALUE = pa.string()
"""The type of one figure's provenance in calls.parquet: a string, one of
:data:`PROVENANCES` (Parquet's dictionary encoding stores it in a few bits;
a struct of Arrow dictionaries cannot be read back in batches)."""

PROVENANCE_TYPE = pa.struct([pa.field(name, PROVENANCE_VALUE, nullable=False)
                             for name in PROVENANCE_FIELDS])
"""The ``provenance`` column: one field per column of :data:`PROVENANCE_FIELDS`."""

UNDETERMINED = "undetermined"
"""How a ``RunRecord.conventions`` note begins when the importer could not tell
the source's convention from the file (``{"cache_read_tokens": "undetermined:
..."}``): ``traces summary`` flags it."""


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
    # the token totals: the sums of the calls' counts; when some calls' count is
    # unknown (null), the source's run total if it records one, else the sum of
    # the known counts (so at least that sum)
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
    "input_tokens": (pa.int64(), True, "uncached prompt tokens; null: unknown "
                                        "(not recorded for this call)"),
    "cache_read_tokens": (pa.int64(), True, "prompt tokens read from cache; null: unknown "
                                             "(not recorded for this call)"),
    "cache_write_tokens": (pa.int64(), True, "prompt tokens written to cache; null: unknown "
                                              "(not recorded for this call)"),
    "output_tokens": (pa.int64(), True, "output tokens without reasoning; null: unknown "
                                         "(not recorded for this call)"),
    "reasoning_tokens": (pa.int64(), True, "reasoning tokens (0: not broken out); null: unknown "
                                            "(not recorded for this call)"),
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
    "purpose": (pa.string(), True, "why the call was made: step, compaction, verifier or "
                                   "finalize (sim's own runs; null for imported runs: a "
                                   "step)"),
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
    "provenance": (PROVENANCE_TYPE, False, "how each of the five token counts and the cost "
                                           "was obtained: exact, derived (computed from "
                                           "recorded figures), estimated (from content "
                                           "length or a partial count) or unknown (the "
                                           "column is null)"),
}

LATER_CALL_COLUMNS: frozenset[str] = frozenset({"text_sha256", "observation_sha256"})
"""Columns of :data:`CALL_COLUMNS` added after trace folders were first
written: a ``calls.parquet`` without them is read with them all null."""

SUBAGENT_CALL_COLUMNS: frozenset[str] = frozenset({"agent"})
"""Added later still, with the importers of sources that have subagents: a
``calls.parquet`` without it is read with it all null, like
:data:`LATER_CALL_COLUMNS`."""

PROVENANCE_CALL_COLUMNS: frozenset[str] = frozenset({"provenance"})
"""Added with provenance (issue 36): a ``calls.parquet`` without it is read
with each figure exact when it holds a value and unknown when it is null
(:func:`sim.traces.provenance.default_column`)."""

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
