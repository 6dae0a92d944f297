"""Langfuse: observations from the public API and exports, and the SDK's OpenTelemetry spans.

Two shapes, told apart by content:

- **observations as JSON** (what ``GET /api/public/observations`` (v1 and
  v2) and ``GET /api/public/traces/{id}`` return, the UI's and blob-storage
  exports' JSON and JSON Lines): an object with ``data`` (a list of
  observations, or of traces with ``observations``), one trace with
  ``observations``, a list of observations, or observations one per line.
  Keys are read in camelCase (``traceId``, ``startTime``, ``usageDetails``,
  ``costDetails``, ``parentObservationId``...) or snake_case as exports
  write them;
- **the Langfuse SDK's spans** in OTLP JSON (v3 and later SDKs are
  OpenTelemetry-based): ``langfuse.observation.type``,
  ``langfuse.observation.usage_details`` and ``cost_details`` (JSON text),
  ``langfuse.observation.model.name``, ``input``/``output``.

Either way **one run is one trace**; an observation of type ``GENERATION`` is
a model call, ``TOOL`` a tool call (its input the arguments, its output the
result), ``AGENT`` an agent (the outermost is the run's; calls under a nested
one are a subagent's, :mod:`sim.traces.spantree`).

**Usage** (``usageDetails``) is Langfuse's: disjoint keys priced one by one.
``input`` is the uncached prompt and ``output`` the output without the detail
keys split from them (Langfuse's integrations subtract
``input_cached_tokens``, ``output_reasoning_tokens``... from ``input`` and
``output``). Cache reads are ``input_cached_tokens``, ``input_cache_read``,
``cache_read_input_tokens``; cache writes ``input_cache_creation``,
``input_cache_write``, ``cache_creation_input_tokens``; reasoning
``output_reasoning_tokens``/``output_reasoning``; other ``input_*`` and
``output_*`` keys (audio...) count as input and output. An OpenAI-style usage
(``prompt_tokens``, ``completion_tokens``, which Langfuse's server converts
itself) is read with the prompt including its cached tokens. ``total`` is not
used. **Cost** as recorded: ``costDetails.total`` (else the sum of its parts,
else ``totalCost``/``calculatedTotalCost``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sim.traces import spantree
from sim.traces.assemble import (
    extent,
    main_model,
    nearest,
    owner_before,
    run_cost,
    seconds,
    text_fields,
)
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    as_dict,
    as_list,
    canonical_arguments,
    content_text,
    finite_or_none,
    parse_utc,
    tool_result,
)
from sim.traces.otel import Span
from sim.traces.skips import NO_CALLS, NO_USAGE, Skip, Unusable
from sim.traces.usage import count, from_openai

SOURCE = "langfuse"
CALL_TYPES = frozenset({"GENERATION"})
TOOL_TYPE = "TOOL"
AGENT_TYPE = "AGENT"
_READ = ("input_cached_tokens", "input_cache_read", "cache_read_input_tokens", "cache_read")
_WRITE = ("input_cache_creation", "input_cache_write", "cache_creation_input_tokens",
          "cache_creation", "input_cache_creation_tokens")
_REASONING = ("output_reasoning_tokens", "output_reasoning", "reasoning_tokens")
_ATTR = "langfuse.observation."


# ------------------------------------------------------------------ usage
def counts(usage: dict[str, Any], where: str) -> Usage:
    """A Langfuse ``usageDetails`` object in the trace model's convention."""
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return from_openai(usage, where)
    if "input" not in usage and "output" not in usage:
        raise Unusable(NO_USAGE, f"{where}: usage has neither input nor output")
    uncached = count(usage.get("input"), "usage.input", where, default=0)
    output = count(usage.get("output"), "usage.output", where, default=0)
    read = write = reasoning = 0
    for key, value in usage.items():
        if key in ("input", "output", "total"):
            continue
        if key in _READ:
            read += count(value, f"usage.{key}", where)
        elif key in _WRITE:
            write += count(value, f"usage.{key}", where)
        elif key in _REASONING:
            reasoning += count(value, f"usage.{key}", where)
        elif key.startswith("input_"):
            uncached += count(value, f"usage.{key}", where)
        elif key.startswith("output_"):
            output += count(value, f"usage.{key}", where)
    return Usage(input_tokens=uncached, cache_read_tokens=read, cache_write_tokens=write,
                 output_tokens=output, thinking_tokens=reasoning)


def cost(details: Any, *fallbacks: Any) -> float | None:
    """The recorded cost: ``costDetails.total``, else its parts summed, else
    the first finite fallback."""
    details = as_dict(details)
    total = finite_or_none(details.get("total"))
    if total is not None:
        return total
    parts = [finite_or_none(v) for v in details.values()]
    if parts and None not in parts:
        return float(sum(p for p in parts if p is not None))
    for value in fallbacks:
        number = finite_or_none(value)
        if number is not None:
            return number
    return None


# ------------------------------------------------------------ API / exports
def _get(obs: dict, camel: str, snake: str) -> Any:
    return obs[camel] if camel in obs else obs.get(snake)


def _is_observation(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("type"), str)
            and ("traceId" in value or "trace_id" in value)
            and ("startTime" in value or "start_time" in value))


def _is_trace(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("observations"), list) \
        and "id" in value


def detect(values: list[Any]) -> bool:
    """Whether a file's JSON ``values`` are Langfuse observations or traces."""
    if len(values) > 1:
        return all(_is_observation(v) for v in values)
    doc = values[0] if values else None
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        items = doc["data"]
        return bool(items) and all(_is_observation(v) or _is_trace(v) for v in items)
    if isinstance(doc, list):
        return bool(doc) and all(_is_observation(v) or _is_trace(v) for v in doc)
    return _is_trace(doc) or _is_observation(doc)


def observations(values: list[Any]) -> Iterator[dict]:
    """The observation objects of a file's values (traces' lists flattened);
    a trace's own name and time fill an observation's missing ``traceName``."""
    items: list[Any] = []
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("data"), list):
            items.extend(value["data"])
        elif isinstance(value, list):
            items.extend(value)
        else:
            items.append(value)
    for item in items:
        if _is_trace(item):
            for obs in item["observations"]:
                if isinstance(obs, dict):
                    obs = dict(obs)
                    obs.setdefault("traceId", item["id"])
                    yield obs
        elif _is_observation(item):
            yield item


@dataclass
class Collector:
    """Langfuse observations (API JSON) gathered across files, by trace."""

    traces: dict[str, list[tuple[dict, str]]] = field(
        default_factory=lambda: defaultdict(list))

    def add(self, values: list[Any], file: str) -> None:
        for obs in observations(values):
            trace = _get(obs, "traceId", "trace_id")
            self.traces[str(trace)].append((obs, file))

    def runs(self) -> Iterator[RunRecord | Skip]:
        order = sorted(self.traces, key=lambda t: (min(_start(o) for o, _ in self.traces[t]),
                                                   t))
        for trace in order:
            items = self.traces[trace]
            try:
                yield _run(trace, items)
            except Unusable as problem:
                yield Skip(items[0][1], problem.reason, problem.detail, trace)


def _start(obs: dict) -> float:
    moment = parse_utc(_get(obs, "startTime", "start_time"))
    return moment.timestamp() if moment is not None else float("inf")


def _parent(obs: dict) -> Any:
    return _get(obs, "parentObservationId", "parent_observation_id")


def _times(obs: dict) -> tuple[datetime | None, datetime | None]:
    return (parse_utc(_get(obs, "startTime", "start_time")),
            parse_utc(_get(obs, "endTime", "end_time")))


def _run(trace: str, items: list[tuple[dict, str]]) -> RunRecord:
    seen: dict[str, dict] = {}
    for obs, _ in items:  # one observation listed twice (two exports) counts once
        seen.setdefault(str(obs.get("id")), obs)
    obs_list = sorted(seen.values(), key=lambda o: (_start(o), str(o.get("id"))))
    by_id = {str(o.get("id")): o for o in obs_list}
    kind = {k: str(o.get("type", "")).upper() for k, o in by_id.items()}

    def agent_of(obs: dict) -> str | None:
        return nearest(_parent(obs), lambda i: _parent(by_id[i]),
                       lambda i: kind[i] == AGENT_TYPE, by_id.__contains__)

    times = [_times(o) for o in obs_list]
    first, last = extent((t[0] for t in times), (t[1] for t in times))
    calls = _calls([o for o in obs_list if kind[str(o.get("id"))] in CALL_TYPES],
                   [o for o in obs_list if kind[str(o.get("id"))] == TOOL_TYPE],
                   {a for a, t in kind.items() if t == AGENT_TYPE and agent_of(by_id[a]) is None},
                   agent_of, first)
    if not calls:
        raise Unusable(NO_CALLS, f"{len(obs_list)} observations, none a GENERATION")
    return RunRecord(
        run_id=trace, source=SOURCE, file=items[0][1], calls=calls, model=main_model(calls),
        cost_usd=run_cost(calls), exit=_exit(obs_list), started_at=first,
        duration_s=(last - first).total_seconds() if first and last else None)


def _calls(generations: list[dict], tools: list[dict], outermost: set[str],
           agent_of: Callable[[dict], str | None], first: datetime | None) -> list[CallRecord]:
    """The generations as calls (a nested agent's marked), each with the tool
    observations that answered it: the last call of the same agent that
    started at or before the tool."""
    calls: list[CallRecord] = []
    owners: dict[str | None, list[int]] = defaultdict(list)
    for obs in generations:
        agent = agent_of(obs)
        calls.append(_call(obs, first, None if agent in outermost else agent))
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
    return str(_get(root, "statusMessage", "status_message") or "error")


def _call(obs: dict, first: datetime | None, agent: str | None) -> CallRecord:
    where = f"observation {obs.get('id')}"
    usage = _get(obs, "usageDetails", "usage_details")
    if not isinstance(usage, dict) or not usage:
        raise Unusable(NO_USAGE, f"{where}: no usageDetails")
    start, end = _times(obs)
    return CallRecord(
        usage=counts(usage, where), model=_get(obs, "model", "provided_model_name"),
        cost_usd=cost(_get(obs, "costDetails", "cost_details"),
                      _get(obs, "totalCost", "total_cost"),
                      _get(obs, "calculatedTotalCost", "calculated_total_cost")),
        started_s=seconds(start, first), latency_s=seconds(end, start),
        **text_fields(_text(obs.get("output"))), agent=agent)


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
    result = obs.get("output")
    if result is not None and not isinstance(result, str):
        result = canonical_arguments(result)
    tokens, sha, _ = tool_result(result)
    start, end = _times(obs)
    return ToolCallRecord(name=str(obs.get("name")), id=str(obs.get("id")),
                          arguments=canonical_arguments(obs.get("input")),
                          result_tokens=tokens, result_sha256=sha,
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
    if not isinstance(usage, dict) or not usage:
        raise Unusable(NO_USAGE, f"{where}: no {_ATTR}usage_details")
    model = a.get(f"{_ATTR}model.name")
    return spantree.CallFacts(
        counts(usage, where), model=None if model is None else str(model),
        cost_usd=cost(spantree.json_value(a.get(f"{_ATTR}cost_details"))),
        text=_text(spantree.json_value(a.get(f"{_ATTR}output"))))


def _span_tool(span: Span) -> spantree.ToolFacts | None:
    if _kind(span) != TOOL_TYPE:
        return None
    a = span.attributes
    return spantree.ToolFacts(name=span.name, id=span.span,
                              arguments=a.get(f"{_ATTR}input"),
                              result=a.get(f"{_ATTR}output"))


DIALECT = spantree.Dialect(source=SOURCE, claims=_claims, call=_span_call, tool=_span_tool,
                           is_agent=lambda span: _kind(span) == AGENT_TYPE)
