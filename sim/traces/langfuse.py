"""Langfuse: observations from the public API, the web app and exports, and the SDK's spans.

Two kinds of file, told apart by content:

- **observations as JSON**, in every shape Langfuse writes them (the public
  API's observations and traces, list and blob-storage exports, the trace
  view's download, the download route, the web app's tRPC responses: read by
  *Documents*, below). An observation listed twice (nested
  and at the top, or in two files) counts once, its copies merged (a copy's
  missing fields, such as the ``output`` a tRPC copy leaves out, filled from
  the other);
- **the Langfuse SDK's spans** in OTLP JSON (v3 and later SDKs are
  OpenTelemetry-based): ``langfuse.observation.type``,
  ``langfuse.observation.usage_details`` and ``cost_details`` (JSON text),
  ``langfuse.observation.model.name``, ``input``/``output``.

Either way **one run is one trace**; an observation of type ``GENERATION`` is
a model call (in observations as JSON, unless it says it recorded nothing of
one: an event span typed as a generation, :func:`is_event`), ``TOOL`` a tool
call (its input the arguments, its output the result), ``AGENT`` an agent. In
observations as JSON, the agents that are **the run itself**, not a subagent:
an agent at the trace's root, an agent reached from a root by only children (a
framework's wrapper: the OpenAI Agents SDK's ``Agent workflow`` over its
agent, Koog's agent over its run, Google ADK's invocation over its agent), and
any agent with no agent above it; their calls have ``agent`` null. A call
under another, nested agent is that subagent's (``agent`` its id). The run's
``model`` is the most common model of its own calls (of all its calls when it
has none of its own). In the SDK's spans, :mod:`sim.traces.spantree` decides
(the outermost agent that made calls is the run's own; the model the first of
its calls').

**Usage and cost** are read as *Usage and cost*, below, says, with their
provenance. A generation without usage (``usageDetails`` missing or empty)
keeps its place in the run with its token columns ``unknown``: a trace is
never dropped because some (or all) of its generations lack usage.

**Scores**: a trace's success score (``resolved``, ``success`` or
``correct``, :func:`resolved`) is the run's
``resolved``; others are not read.

Documents
---------
Langfuse writes a trace's observations in several documents (JSON values, one
document or one per line); :func:`observations` reads them all, each
observation with the scores its document lists:

- ``GET /api/public/observations`` (v1 and v2) and list exports: an object
  with ``data`` (a list of observations, or of traces with
  ``observations``), a list of observations, or observations one per line;
- ``GET /api/public/traces/{id}``: one trace (``id``) with ``observations``
  and ``scores``;
- the trace view's download (web app, ``downloadLegacyTraceAsJson``):
  ``{"trace": {...}, "observations": [...]}``, the trace object being what
  the web app loaded (it may hold ``observations`` and ``scores`` of its own);
- the download route ``/api/traces/{id}/download`` (``buildTraceExport``):
  ``{"observations": [...], "scores": [...]}``, each observation naming its
  ``traceId``;
- the web app's tRPC responses (``traces.byIdWithObservationsAndScores``,
  ``events.byTraceId``), saved from the browser:
  ``{"result": {"data": {"json": {...}}}}`` (superjson), or a batch list of
  those, around one of the shapes above.

Keys are read in camelCase (``traceId``, ``startTime``...) or snake_case as
exports write them (:func:`value_of`). A session's download (its traces
without their observations) is not a run's.

**Scores**: a trace's score named ``resolved``, ``success`` or ``correct``
(any case), of type ``BOOLEAN`` or a ``NUMERIC`` 0 or 1, not attached to an
observation, says whether the run succeeded (:func:`resolved`; several such
scores must agree); other scores are not read.

Usage and cost
--------------
Langfuse stores a generation's usage as ``usageDetails``: a flat object of
usage types (arbitrary keys) that it prices one by one and, when no
``total`` is given, sums to a total. So its keys are **disjoint**: ``input``
is the uncached prompt and ``output`` the output without the detail keys
Langfuse's integrations split from them and subtract (the server's OpenAI
conversion makes ``input_<key>``/``output_<key>`` of every
``prompt_tokens_details``/``completion_tokens_details`` key; the LangChain
handler ``input_cache_read``, ``input_cache_creation``, ``output_reasoning``
...; its OpenTelemetry ingestion ``input_cached_tokens``,
``input_cache_creation``, ``output_reasoning_tokens``, ``output_audio_tokens``).
Keys are read here as follows (:func:`counts`):

====================================  ========================================
keys                                  read as
====================================  ========================================
``input`` (else ``input_tokens``)     uncached input
``output`` (else ``output_tokens``)   output without reasoning
``input_cached_tokens``,              cache reads, apart from ``input``
``input_cache_read``,
``cache_read_input_tokens``,
``cache_read_tokens``, ``cache_read``,
``input_cached_*``, ``cached_modality_*``
``input_cache_creation*`` (with the   cache writes, apart from ``input``
``_5m``/``_1h`` tiers),
``input_cache_write``,
``cache_creation_input_tokens``,
``cache_write_tokens``,
``cache_creation``
``input_ephemeral_5m_input_tokens``,  cache writes by lifetime (the LangChain
``input_ephemeral_1h_input_tokens``   handler's copy of langchain-anthropic's):
                                      the larger of their sum and
                                      ``input_cache_creation`` (writers fill
                                      one or both; with both the input is
                                      read from ``total``: :func:`_written_twice`)
``output_reasoning_tokens``,          reasoning, apart from ``output``
``output_reasoning``,
``reasoning_tokens``,
``thoughts_token_count``
other ``input_*`` / ``output_*``      parts of the input / output (audio,
(``input_audio_tokens``,              modality, prediction tokens), added
``input_modality_TEXT``...)           to it
``prompt_details.cache_read``,        cache *inside* ``input``: subtracted
``cache_read.input_tokens``           from it (``input_tokens`` derived)
``prompt_details.cache_write``,       cache writes inside ``input``:
``cache_creation.input_tokens``       subtracted
``completion_details.reasoning``,     reasoning *inside* ``output``:
``reasoning.output_tokens``           subtracted (``output_tokens`` derived)
``prompt_details.*``,                 parts already counted in ``input`` /
``completion_details.*`` (audio...)   ``output``: not added
``total``, ``total_tokens``,          not used (a tier's part of
``cache_creation_ephemeral_*``        ``cache_creation_input_tokens``), but
                                      for a Gemini model's thoughts
====================================  ========================================

An OpenAI service tier's details as the LangChain handler stores them
(``input_flex``, ``input_flex_cache_read``, ``output_priority``,
``output_priority_reasoning``) are that side's uncached input and cache reads
(output and reasoning), in place of its ``input`` (``output``), which the
handler reduced by some of them and not others (:func:`_untiered`).

A **Gemini** generation that records no reasoning key but a ``total`` above
its counted columns has the excess read as its thoughts (reasoning, derived:
:func:`gemini_thoughts`), Gemini's documented total being prompt +
candidates + thoughts; no other model's total remainder is read.

The "inside" keys are OpenInference's and the OpenTelemetry GenAI names
(``llm.token_count.prompt_details.cache_read``...) as Langfuse servers before
v3.175.0 (cache) and v4.7.0 (reasoning) stored them, raw beside the prompt
and completion totals; later servers convert them into the disjoint keys
above. A run read so says it in :attr:`~sim.traces.model.RunRecord.conventions`.
An OpenAI-style usage (``prompt_tokens``, ``completion_tokens``, as the
Langfuse SDK's OpenAI integration records it in its spans before the server
converts it) is read with :func:`sim.traces.usage.from_openai`, and the
Responses API's (``input_tokens`` with ``input_tokens_details``,
``output_tokens`` with ``output_tokens_details``) the same way, the cached
tokens inside ``input_tokens`` and the reasoning inside ``output_tokens``.
Values that are not counts (a nested object the server would drop) are
passed over.

**Provenance** (:attr:`~sim.traces.model.CallRecord.provenance`): a column
computed from recorded figures (a count subtracted or parts added) is
``derived``; a generation with no usage (``usageDetails`` missing or empty,
or neither input nor output) has every token column ``unknown`` (0 in the
usage), one with input but no output (or the reverse) the missing side's
columns. The cost (:func:`cost`): ``costDetails.total`` (exact), else the
sum of its parts (derived), else ``totalCost``/``calculatedTotalCost``
(exact), else unknown.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sim.traces import spantree
from sim.traces.assemble import (
    extent,
    nearest,
    order_time,
    owner_before,
    ran_tool,
    run_cost,
    seconds,
    text_fields,
)
from sim.traces.model import (
    DERIVED,
    EXACT,
    UNKNOWN,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    as_dict,
    as_list,
    content_text,
    finite_or_none,
    parse_utc,
)
from sim.traces.otel import Span
from sim.traces.repairs import PROMPT_WITHOUT_CACHE, REASONING_APART, Repair
from sim.traces.skips import NO_CALLS, Skip, Unusable, or_skip
from sim.traces.usage import (
    CACHE_WRITE_TTLS,
    SERVICE_TIERS,
    count,
    from_openai,
    from_responses,
)

# ------------------------------------------------------------ documents
RESOLVED_SCORES = frozenset({"resolved", "success", "correct"})
"""Score names (lower case) read as the run's ``resolved``."""


def value_of(obs: dict, camel: str, snake: str) -> Any:
    """A field of a Langfuse record by its camelCase name, else its snake_case one."""
    return obs[camel] if camel in obs else obs.get(snake)


def is_observation(value: Any, trace: Any = None) -> bool:
    """Whether ``value`` is an observation (of the trace ``trace`` when it
    names none itself)."""
    return (isinstance(value, dict) and isinstance(value.get("type"), str)
            and (value_of(value, "traceId", "trace_id") is not None or trace is not None)
            and ("startTime" in value or "start_time" in value))


def unwrap(value: Any) -> Any:
    """The data of a tRPC response (``{"result": {"data": {"json": ...}}}``,
    superjson's ``json`` optional); else ``value``."""
    if isinstance(value, dict) and isinstance(value.get("result"), dict) \
            and "data" in value["result"]:
        data = value["result"]["data"]
        return data["json"] if isinstance(data, dict) and "json" in data else data
    return value


@dataclass
class TraceDocument:
    """One trace's observations and scores as a document holds them."""

    id: str | None
    observations: list[dict]
    scores: list[dict]


def trace_document(value: Any) -> TraceDocument | None:
    """``value`` as a trace with observations (the API's trace, the trace
    view's download, the download route's document, a tRPC trace), or None."""
    value = unwrap(value)
    if not isinstance(value, dict) or not isinstance(value.get("observations"), list):
        return None
    inner = as_dict(value.get("trace"))
    trace_id = value.get("id", inner.get("id"))
    items = value["observations"] + as_list(inner.get("observations"))
    observations = [o for o in items if isinstance(o, dict)]
    if any(not isinstance(o, dict | str) for o in items):
        return None
    if trace_id is None:
        if not observations or not all(is_observation(o) for o in observations):
            return None
    elif not all(is_observation(o, trace_id) for o in observations):
        return None
    scores = [s for s in as_list(value.get("scores")) + as_list(inner.get("scores"))
              if isinstance(s, dict)]
    return TraceDocument(None if trace_id is None else str(trace_id), observations, scores)


def documents(values: list[Any]) -> list[Any]:
    """The documents of a file's values: ``data`` lists and lists (a tRPC
    batch) flattened, tRPC responses unwrapped."""
    items: list[Any] = []
    for value in values:
        value = unwrap(value)
        if isinstance(value, dict) and isinstance(value.get("data"), list):
            items.extend(value["data"])
        elif isinstance(value, list):
            items.extend(unwrap(v) for v in value)
        else:
            items.append(value)
    return items


def detect(values: list[Any]) -> bool:
    """Whether a file's JSON ``values`` are Langfuse observations or traces."""
    if len(values) > 1:
        return all(is_observation(v) for v in values)
    items = documents(values)
    return bool(items) and all(is_observation(v) or trace_document(v) is not None for v in items)


def observations(values: list[Any]) -> Iterator[tuple[dict, list[dict]]]:
    """The observations of a file's values, each with the scores its
    document lists (traces flattened; a trace's id fills an observation's
    missing ``traceId``)."""
    for item in documents(values):
        trace = trace_document(item)
        if trace is not None:
            for obs in trace.observations:
                if value_of(obs, "traceId", "trace_id") is None:
                    obs = {**obs, "traceId": trace.id}
                yield obs, trace.scores
        elif is_observation(item):
            yield item, []


def resolved(scores: list[dict]) -> tuple[bool | None, str | None]:
    """The run's ``resolved`` from its trace-level success scores (see the
    module) and how it was read; ``(None, None)`` when none says it clearly
    or they disagree."""
    verdicts: set[bool] = set()
    names: list[str] = []
    for score in scores:
        name = str(score.get("name", ""))
        attached = value_of(score, "observationId", "observation_id") is not None
        if name.lower() not in RESOLVED_SCORES or attached:
            continue
        verdict = _verdict(score)
        if verdict is not None:
            verdicts.add(verdict)
            names.append(name)
    if len(verdicts) != 1:
        return None, None
    return verdicts.pop(), f"from the trace's score {', '.join(sorted(set(names)))}"


def _verdict(score: dict) -> bool | None:
    """A score's clear yes or no: a BOOLEAN's value (or ``stringValue``
    True/False), a NUMERIC of exactly 0 or 1; None otherwise."""
    kind = str(value_of(score, "dataType", "data_type") or "").upper()
    value = finite_or_none(score.get("value"))
    text = str(value_of(score, "stringValue", "string_value") or "").lower()
    if kind == "BOOLEAN":
        if value in (0.0, 1.0):
            return value == 1.0
        return {"true": True, "false": False}.get(text)
    if kind == "NUMERIC" and value in (0.0, 1.0):
        return value == 1.0
    return None


# ------------------------------------------------------- usage and cost
READ_KEYS = frozenset({"input_cached_tokens", "input_cache_read", "cache_read_input_tokens",
                       "cache_read_tokens", "cache_read"})
WRITE_KEYS = frozenset({"input_cache_write", "cache_creation_input_tokens",
                        "cache_write_tokens", "cache_creation"})
REASONING_KEYS = frozenset({"output_reasoning_tokens", "output_reasoning", "reasoning_tokens",
                            "thoughts_token_count", "thoughtsTokenCount"})
READ_INSIDE = frozenset({"prompt_details.cache_read", "cache_read.input_tokens"})
WRITE_INSIDE = frozenset({"prompt_details.cache_write", "cache_creation.input_tokens"})
REASONING_INSIDE = frozenset({"completion_details.reasoning", "reasoning.output_tokens"})
_UNUSED = frozenset({"total", "total_tokens", "input", "output", "input_tokens",
                     "output_tokens"})
_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
            "reasoning_tokens")
INSIDE_CONVENTION = ("{key} counted inside {side} (a Langfuse server before {version} "
                     "stored OpenInference/GenAI keys raw): subtracted")


@dataclass
class Counted:
    """One generation's usage in the trace model's convention, with the
    provenance of each token column that is not exact and the conventions
    read (``{what: how}``)."""

    usage: Usage
    provenance: dict[str, str] = field(default_factory=dict)
    conventions: dict[str, str] = field(default_factory=dict)


def unknown() -> Counted:
    """A generation without usage: zeros, every token column unknown."""
    return Counted(Usage(), dict.fromkeys(_COLUMNS, UNKNOWN))


@dataclass
class _Parts:
    """The detail keys of a ``usageDetails``, summed by kind (with how many
    nonzero keys made each sum)."""

    sums: dict[str, int] = field(default_factory=dict)
    keys: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, key: str, value: int) -> None:
        self.sums[kind] = self.sums.get(kind, 0) + value
        if value:
            self.keys.setdefault(kind, []).append(key)

    def get(self, kind: str) -> int:
        return self.sums.get(kind, 0)

    def several(self, kind: str) -> bool:
        return len(self.keys.get(kind, [])) > 1


WRITE_TTL_KEYS = frozenset(f"input_{key}" for key in CACHE_WRITE_TTLS)
"""langchain-anthropic's cache writes by lifetime, as Langfuse's LangChain
handler stores them (``input_`` + the ``input_token_details`` key)."""


def _key_kind(key: str) -> str | None:
    """What a ``usageDetails`` key counts (see the module), None for unused."""
    if key in _UNUSED:
        return None
    if key in WRITE_TTL_KEYS:
        return "write_ttl"
    if key in READ_KEYS or key.startswith(("input_cached_", "cached_modality_")):
        return "read"
    if key in WRITE_KEYS or key.startswith(("input_cache_creation", "input_cache_write")):
        return "write"
    if key in REASONING_KEYS:
        return "reasoning"
    if key in READ_INSIDE:
        return "read_inside"
    if key in WRITE_INSIDE:
        return "write_inside"
    if key in REASONING_INSIDE:
        return "reasoning_inside"
    if key.startswith("input_"):
        return "input"
    if key.startswith("output_"):
        return "output"
    return None


def counts(usage: Any, where: str, notes: list[Repair] | None = None,
           model: Any = None) -> Counted:
    """A Langfuse ``usageDetails`` object (or an OpenAI-style usage) read into
    the trace model's convention (see the module); ``notes`` receives the
    repairs of an impossible relation (a cache inside the input above it).
    ``model`` (the generation's) tells a Gemini total's remainder as its
    thoughts (:func:`gemini_thoughts`)."""
    usage = _untiered(as_dict(usage))
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return _openai(usage, where, notes)
    if isinstance(usage.get("input_tokens_details"), dict) or \
            isinstance(usage.get("output_tokens_details"), dict):
        return Counted(*from_responses(usage, where, notes=notes))  # as Langfuse converts it
    inside = _side(usage, "input", "input_tokens", where)
    outside = _side(usage, "output", "output_tokens", where)
    if inside is None and outside is None:
        return unknown()
    parts = _Parts()
    for key, value in usage.items():
        kind = _key_kind(str(key))
        if kind is not None and not isinstance(value, dict | list) and value is not None:
            parts.add(kind, str(key), count(value, f"usageDetails.{key}", where))
    out = Counted(Usage())
    uncached = _subtract(out, inside, parts, ("read_inside", "write_inside"), "input_tokens",
                         "v3.175.0", notes, PROMPT_WITHOUT_CACHE)
    output = _subtract(out, outside, parts, ("reasoning_inside",), "output_tokens",
                       "v4.7.0", notes, REASONING_APART)
    for column, value, kind in (("input_tokens", uncached, "input"),
                                ("output_tokens", output, "output")):
        if value is None:
            out.provenance[column] = UNKNOWN
        elif parts.get(kind):
            out.provenance[column] = DERIVED
    for column, kinds in (("cache_read_tokens", ("read", "read_inside")),
                          ("cache_write_tokens", ("write", "write_ttl", "write_inside")),
                          ("reasoning_tokens", ("reasoning", "reasoning_inside"))):
        if sum(len(parts.keys.get(k, [])) for k in kinds) > 1:
            out.provenance[column] = DERIVED
    if output is None and not (parts.get("reasoning") or parts.get("reasoning_inside")):
        out.provenance["reasoning_tokens"] = UNKNOWN
    written = max(parts.get("write"), parts.get("write_ttl"))
    if uncached is not None and parts.get("write") and parts.get("write_ttl"):
        uncached = _written_twice(usage, uncached, written, parts, output, where)
        out.provenance["input_tokens"] = DERIVED
    out.usage = Usage(
        input_tokens=0 if uncached is None else uncached + parts.get("input"),
        cache_read_tokens=parts.get("read") + parts.get("read_inside"),
        cache_write_tokens=written + parts.get("write_inside"),
        output_tokens=0 if output is None else output + parts.get("output"),
        thinking_tokens=parts.get("reasoning") + parts.get("reasoning_inside"))
    if output is not None and uncached is not None:
        gemini_thoughts(out, usage, model, where)
    return out


def _written_twice(usage: dict, uncached: int, written: int, parts: _Parts,
                   output: int | None, where: str) -> int:
    """The uncached input (without its ``input_*`` parts) of a generation
    whose cache writes are recorded twice, as ``input_cache_creation`` and
    by lifetime (langchain-anthropic before 1.0 filled both): the LangChain
    handler took both from ``input``, stopping at 0. So the uncached input
    is the recorded ``total`` less every other count when there is one,
    else ``input`` with one copy of the writes given back (exact unless it
    stopped at 0)."""
    total = usage.get("total")
    if total is not None and output is not None:
        rest = (count(total, "usageDetails.total", where) - output - parts.get("output")
                - parts.get("reasoning") - parts.get("reasoning_inside") - parts.get("read")
                - written - parts.get("input"))
        if rest >= 0:
            return rest
    return uncached + parts.get("write") + parts.get("write_ttl") - written


def _untiered(usage: dict) -> dict:
    """``usage`` with an OpenAI service tier's details, as Langfuse's
    LangChain handler stores LangChain's (``input_flex`` the tier's uncached
    input, ``input_flex_cache_read`` its reads; ``output_priority`` its
    output without reasoning, ``output_priority_reasoning`` the reasoning),
    read as the plain keys of that side: ``input`` / ``input_cache_read``,
    ``output`` / ``output_reasoning``. The handler subtracts a ``flex`` key
    from ``input`` but not a ``priority`` one (and its older versions both),
    so the side's own ``input``/``output`` and its other parts (audio, inside
    the tier's figure) are not read. Other usage is returned as it is."""
    for tier in SERVICE_TIERS:
        sides = [(side, detail) for side, detail in (("input", "cache_read"),
                                                     ("output", "reasoning"))
                 if usage.get(f"{side}_{tier}") is not None]
        if sides:
            plain = dict(usage)
            for side, detail in sides:
                plain = {k: v for k, v in plain.items()
                         if not (k == side or k.startswith(f"{side}_"))}
                plain[side] = usage[f"{side}_{tier}"]
                plain[f"{side}_{detail}"] = usage.get(f"{side}_{tier}_{detail}", 0)
            return plain
    return usage


GEMINI_TOTAL = ("Gemini's total_token_count is prompt (cached content inside) + candidates + "
                "thoughts: the {n} tokens of usageDetails.total beyond its other keys read as "
                "thoughts (the writer left thoughts_token_count out)")


def gemini_thoughts(out: Counted, usage: dict, model: Any, where: str) -> None:
    """A Gemini generation's thoughts that only its ``total`` holds, as
    reasoning (derived; the convention noted in ``out``).

    Gemini's ``usage_metadata`` counts thoughts apart from the candidates
    (``thoughts_token_count``) and its ``total_token_count`` is the prompt
    (``cached_content_token_count`` included in it) plus candidates plus
    thoughts, plus ``tool_use_prompt_token_count`` when Gemini's own tools
    (Search grounding, code execution) ran. A writer that records the prompt,
    candidates and total but not the thoughts (OpenInference's vertexai
    instrumentation 0.1.x, whose counts Langfuse stores as ``input``,
    ``output`` and ``total``) leaves them only in the total: when the model's
    name says Gemini, no reasoning is recorded, and ``total`` exceeds every
    counted column, the excess is read as reasoning. For any other model a
    total's remainder is not read (it may be cache or other usage the keys
    do not name)."""
    if "gemini" not in str(model or "").lower() or any(
            _key_kind(str(key)) in ("reasoning", "reasoning_inside")
            and value is not None and not isinstance(value, dict | list)
            for key, value in usage.items()):
        return  # a reasoning key recorded (0 too) is the thoughts' count
    name = "total" if "total" in usage else "total_tokens"
    try:
        total = count(usage.get(name), f"usageDetails.{name}", where, default=0)
    except Unusable:
        return  # a total that is not a count is not used, as before
    u = out.usage
    excess = total - (u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
                      + u.output_tokens)
    if excess <= 0:
        return
    out.usage = Usage(input_tokens=u.input_tokens, cache_read_tokens=u.cache_read_tokens,
                      cache_write_tokens=u.cache_write_tokens, output_tokens=u.output_tokens,
                      thinking_tokens=excess)
    out.provenance["reasoning_tokens"] = DERIVED
    out.conventions["reasoning_tokens"] = GEMINI_TOTAL.format(n=excess)


def _side(usage: dict, key: str, synonym: str, where: str) -> int | None:
    """The recorded count of one side (``input`` or ``output``), else its
    synonym's; None when neither is recorded."""
    name = key if usage.get(key) is not None else synonym
    value = usage.get(name)
    return None if value is None else count(value, f"usageDetails.{name}", where)


def _subtract(out: Counted, total: int | None, parts: _Parts, kinds: tuple[str, ...],
              column: str, version: str, notes: list[Repair] | None, reason: str) -> int | None:
    """One side's ``total`` without the counts recorded inside it (``kinds``),
    derived and its convention noted; kept whole (a repair noted) when they
    exceed it; None when the side is not recorded."""
    if total is None:
        return None
    inner = sum(parts.get(k) for k in kinds)
    if not inner:
        return total
    keys = ", ".join(k for kind in kinds for k in parts.keys.get(kind, []))
    side = "input" if column == "input_tokens" else "output"
    if inner > total:
        if notes is not None:
            notes.append((f"calls.{column}", reason))
        return total
    out.provenance[column] = DERIVED
    out.conventions[column] = INSIDE_CONVENTION.format(key=keys, side=side, version=version)
    return total - inner


def _openai(usage: dict, where: str, notes: list[Repair] | None) -> Counted:
    """An OpenAI-style usage: the cache subtracted from ``prompt_tokens`` and
    the reasoning from ``completion_tokens``."""
    return Counted(*from_openai(usage, where, notes=notes))


def cost(recorded: Any, *fallbacks: Any) -> tuple[float | None, str]:
    """The recorded cost in USD and its provenance: ``costDetails.total``
    (exact), else its parts summed (derived), else the first finite fallback
    (``totalCost``...: exact), else ``(None, unknown)``. A fallback of 0
    beside an empty ``costDetails`` (the sum Langfuse shows for no cost) is
    no cost recorded."""
    details = as_dict(recorded)
    total = finite_or_none(details.get("total"))
    if total is not None:
        return total, EXACT
    parts = [finite_or_none(v) for v in details.values()]
    if parts and None not in parts:
        return float(sum(p for p in parts if p is not None)), DERIVED
    for value in fallbacks:
        number = finite_or_none(value)
        if number is not None and not (number == 0 and recorded == {}):
            return number, EXACT
    return None, UNKNOWN


# ------------------------------------------------------------ runs
SOURCE = "langfuse"
CALL_TYPES = frozenset({"GENERATION"})
TOOL_TYPE = "TOOL"
AGENT_TYPE = "AGENT"
_ATTR = "langfuse.observation."


# ------------------------------------------------------------ API / exports
@dataclass
class Collector:
    """Langfuse observations (and scores) gathered across files, by trace."""

    traces: dict[str, list[tuple[dict, str]]] = field(
        default_factory=lambda: defaultdict(list))
    scores: dict[str, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, values: list[Any], file: str) -> None:
        for obs, scores in observations(values):
            trace = str(value_of(obs, "traceId", "trace_id"))
            self.traces[trace].append((obs, file))
            for score in scores:
                owner = str(value_of(score, "traceId", "trace_id") or trace)
                self.scores[owner].setdefault(str(score.get("id")), score)

    def runs(self) -> Iterator[RunRecord | Skip]:
        order = sorted(self.traces, key=lambda t: (min(_start(o) for o, _ in self.traces[t]),
                                                   t))
        for trace in order:
            items = self.traces[trace]
            yield or_skip(partial(_run, trace, items, list(self.scores.get(trace, {}).values())),
                          items[0][1], trace, deep=False)


def _start(obs: dict) -> float:
    return order_time(parse_utc(value_of(obs, "startTime", "start_time")))


def _parent(obs: dict) -> Any:
    return value_of(obs, "parentObservationId", "parent_observation_id")


def _times(obs: dict) -> tuple[datetime | None, datetime | None]:
    return (parse_utc(value_of(obs, "startTime", "start_time")),
            parse_utc(value_of(obs, "endTime", "end_time")))


def _merged(items: list[tuple[dict, str]]) -> dict[str, dict]:
    """The observations by id, each listed once: the first copy, its missing
    (or null) fields filled from later copies."""
    seen: dict[str, dict] = {}
    for obs, _ in items:
        key = str(obs.get("id"))
        if key not in seen:
            seen[key] = dict(obs)
            continue
        first = seen[key]
        for name, value in obs.items():
            if first.get(name) is None and value is not None:
                first[name] = value
    return seen


class _Tree:
    """One trace's observations by id, with their kinds and agents."""

    def __init__(self, obs_list: list[dict]) -> None:
        self.by_id = {str(o.get("id")): o for o in obs_list}
        self.kind = {k: str(o.get("type", "")).upper() for k, o in self.by_id.items()}
        self.children: dict[str | None, list[str]] = defaultdict(list)
        for key, obs in self.by_id.items():
            self.children[self._parent_id(obs)].append(key)

    def _parent_id(self, obs: dict) -> str | None:
        parent = _parent(obs)
        return str(parent) if parent is not None and str(parent) in self.by_id else None

    def agent_of(self, obs: dict) -> str | None:
        """The nearest agent above ``obs`` (itself excluded)."""
        return nearest(_parent(obs), lambda i: _parent(self.by_id[i]),
                       lambda i: self.kind[i] == AGENT_TYPE, self.by_id.__contains__)

    def own_agents(self) -> set[str]:
        """The agents that are the run itself: those with no agent above, and
        those on a root's chain of only children (wrappers)."""
        own = {a for a, t in self.kind.items()
               if t == AGENT_TYPE and self.agent_of(self.by_id[a]) is None}
        for root in self.children[None]:
            node: str | None = root
            hops = 0
            while node is not None and hops < len(self.by_id):
                if self.kind[node] == AGENT_TYPE:
                    own.add(node)
                below = self.children.get(node, [])
                node, hops = (below[0] if len(below) == 1 else None), hops + 1
        return own


NULL_TEXTS = frozenset({"None", "null"})
"""Texts that stand for no value: ``str(None)`` as Python instrumentations
write a null input or output (BeeAI's OpenInference instrumentation), and
JSON's null as text."""


def recorded(value: Any) -> bool:
    """Whether an observation's field holds something: not null, empty, or a
    null's text (:data:`NULL_TEXTS`)."""
    if value is None or value == "" or value == {} or value == []:
        return False
    return not (isinstance(value, str) and value.strip() in NULL_TEXTS)


def is_event(obs: dict) -> bool:
    """Whether an observation typed ``GENERATION`` says it recorded nothing of
    a model call: no usage, no cost, and ``input`` and ``output`` both
    present and without value (:func:`recorded`).

    Frameworks that trace each event of a chat call as a span typed by its
    emitter type them all as generations (BeeAI's ``backend.<provider>.chat``
    emitter, through OpenInference: ``start`` holds the request, usage and
    cost; ``success`` and ``finish`` hold nothing of the call, their input and
    output ``None``); only the one holding something is the call. A real call
    whose usage went unrecorded still has its prompt or its answer, so it
    stays a call (its usage unknown); so does a copy that leaves ``input``
    and ``output`` out (the web app's tRPC responses), which says nothing of
    them."""
    usage = value_of(obs, "usageDetails", "usage_details")
    if (isinstance(usage, dict) and usage) or _cost(obs)[0] is not None:
        return False
    return all(key in obs and not recorded(obs[key]) for key in ("input", "output"))


def _cost(obs: dict) -> tuple[float | None, str]:
    """An observation's recorded cost and its provenance (:func:`cost`)."""
    return cost(value_of(obs, "costDetails", "cost_details"),
                value_of(obs, "totalCost", "total_cost"),
                value_of(obs, "calculatedTotalCost", "calculated_total_cost"))


def _run(trace: str, items: list[tuple[dict, str]], scores: list[dict]) -> RunRecord:
    obs_list = sorted(_merged(items).values(), key=lambda o: (_start(o), str(o.get("id"))))
    tree = _Tree(obs_list)
    times = [_times(o) for o in obs_list]
    first, last = extent((t[0] for t in times), (t[1] for t in times))
    notes: list[Repair] = []
    conventions: dict[str, str] = {}
    calls = _calls([o for o in obs_list
                    if tree.kind[str(o.get("id"))] in CALL_TYPES and not is_event(o)],
                   [o for o in obs_list if tree.kind[str(o.get("id"))] == TOOL_TYPE],
                   tree.own_agents(), tree.agent_of, first, notes, conventions)
    if not calls:
        raise Unusable(NO_CALLS, f"{len(obs_list)} observations, none a GENERATION that "
                       "records a call")
    verdict, how = resolved(scores)
    if how is not None:
        conventions["resolved"] = how
    return RunRecord(
        run_id=trace, source=SOURCE, file=items[0][1], calls=calls, model=run_model(calls),
        cost_usd=run_cost(calls), exit=_exit(obs_list), resolved=verdict, started_at=first,
        duration_s=(last - first).total_seconds() if first and last else None,
        repairs=notes, conventions=conventions)


def run_model(calls: list[CallRecord]) -> str | None:
    """The most common model of the run's own calls (``agent`` null), of all
    its calls when it has none of its own (the first seen breaks a tie)."""
    named = [c for c in calls if isinstance(c.model, str) and c.model]
    models = [c.model for c in named if c.agent is None] or [c.model for c in named]
    return Counter(models).most_common(1)[0][0] if models else None


def _calls(generations: list[dict], tools: list[dict], own: set[str],
           agent_of: Callable[[dict], str | None], first: datetime | None,
           notes: list[Repair], conventions: dict[str, str]) -> list[CallRecord]:
    """The generations as calls (a nested agent's marked), each with the tool
    observations that answered it: the last call of the same agent that
    started at or before the tool."""
    calls: list[CallRecord] = []
    owners: dict[str | None, list[int]] = defaultdict(list)
    for obs in generations:
        agent = agent_of(obs)
        calls.append(_call(obs, first, None if agent in own else agent, notes, conventions))
        owners[agent].append(len(calls) - 1)
    for obs in tools:
        owner = owner_before(calls, owners.get(agent_of(obs), []),
                             seconds(_times(obs)[0], first))
        if owner is not None:
            calls[owner].tool_calls.append(_tool(obs))
    return calls


def _exit(obs_list: list[dict]) -> str | None:
    """The root observation's status message (or ``error``) when it failed."""
    root = next((o for o in obs_list if _parent(o) is None), None)
    if root is None or str(root.get("level", "")).upper() != "ERROR":
        return None
    return str(value_of(root, "statusMessage", "status_message") or "error")


def _call(obs: dict, first: datetime | None, agent: str | None, notes: list[Repair],
          conventions: dict[str, str]) -> CallRecord:
    where = f"observation {obs.get('id')}"
    usage = value_of(obs, "usageDetails", "usage_details")
    model = value_of(obs, "model", "provided_model_name")
    read = counts(usage, where, notes, model) if isinstance(usage, dict) and usage \
        else unknown()
    conventions.update(read.conventions)
    start, end = _times(obs)
    cost_usd, how = _cost(obs)
    return CallRecord(
        usage=read.usage, model=model,
        cost_usd=cost_usd,
        started_s=seconds(start, first), latency_s=seconds(end, start),
        **text_fields(_text(obs.get("output"))), agent=agent,
        provenance=_provenance(read, how))


def _provenance(read: Counted, cost_how: str) -> dict[str, str]:
    """A call's provenance: its usage's, and its cost's."""
    return {**read.provenance, "cost_usd": cost_how}


def _text(output: Any) -> str | None:
    """The text of a generation's output: a string, a message's content, or
    the first choice's message (as OpenAI returns it); None otherwise."""
    if isinstance(output, str):
        return output
    output = as_dict(output)
    if "content" in output:
        return content_text(output.get("content"))
    choices = as_list(output.get("choices"))
    if choices:
        return content_text(as_dict(as_dict(choices[0]).get("message")).get("content"))
    return None


def _tool(obs: dict) -> ToolCallRecord:
    start, end = _times(obs)
    return ran_tool(obs.get("name", ""), str(obs.get("id")), obs.get("input"), obs.get("output"),
                    error=str(obs.get("level", "")).upper() == "ERROR",
                    duration_s=seconds(end, start))


# ---------------------------------------------------------------- SDK spans
def _claims(attributes: dict[str, Any]) -> bool:
    return f"{_ATTR}type" in attributes


def _kind(span: Span) -> str:
    return str(span.attributes.get(f"{_ATTR}type", "")).upper()


def _span_call(span: Span) -> spantree.CallFacts | None:
    if _kind(span) not in CALL_TYPES:
        return None
    a = span.attributes
    where = f"span {span.span} ({span.name})"
    usage = spantree.json_value(a.get(f"{_ATTR}usage_details"))
    model = a.get(f"{_ATTR}model.name")
    read = counts(usage, where, model=model) if isinstance(usage, dict) and usage \
        else unknown()
    cost_usd, how = cost(spantree.json_value(a.get(f"{_ATTR}cost_details")))
    return spantree.CallFacts(
        read.usage, model=None if model is None else str(model), cost_usd=cost_usd,
        text=_text(spantree.json_value(a.get(f"{_ATTR}output"))),
        provenance=_provenance(read, how))


def _span_tool(span: Span) -> spantree.ToolFacts | None:
    if _kind(span) != TOOL_TYPE:
        return None
    a = span.attributes
    return spantree.ToolFacts(name=span.name, id=span.span,
                              arguments=a.get(f"{_ATTR}input"),
                              result=a.get(f"{_ATTR}output"))


DIALECT = spantree.Dialect(source=SOURCE, claims=_claims, call=_span_call, tool=_span_tool,
                           is_agent=lambda span: _kind(span) == AGENT_TYPE)
