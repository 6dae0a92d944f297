"""Langfuse: observations from the public API, the web app and exports, and the SDK's spans.

Two kinds of file, told apart by content:

- **observations as JSON**, in every shape Langfuse writes them (the public
  API's observations and traces, list and blob-storage exports, the trace
  view's download, the download route, the web app's tRPC responses: read by
  :mod:`sim.traces.langfuse_documents`). An observation listed twice (nested
  and at the top, or in two files) counts once, its copies merged (a copy's
  missing fields, such as the ``output`` a tRPC copy leaves out, filled from
  the other);
- **the Langfuse SDK's spans** in OTLP JSON (v3 and later SDKs are
  OpenTelemetry-based): ``langfuse.observation.type``,
  ``langfuse.observation.usage_details`` and ``cost_details`` (JSON text),
  ``langfuse.observation.model.name``, ``input``/``output``.

Either way **one run is one trace**; an observation of type ``GENERATION`` is
a model call, ``TOOL`` a tool call (its input the arguments, its output the
result), ``AGENT`` an agent. In observations as JSON, the agents that are
**the run itself**, not a subagent: an agent at the trace's root, an agent
reached from a root by only children (a framework's wrapper: the OpenAI
Agents SDK's ``Agent workflow`` over its agent, Koog's agent over its run,
Google ADK's invocation over its agent), and any agent with no agent above
it; their calls have ``agent`` null. A call under another, nested agent is
that subagent's (``agent`` its id). The run's ``model`` is the most common
model of its own calls (of all its calls when it has none of its own). In
the SDK's spans, :mod:`sim.traces.spantree` decides (the outermost agent that
made calls is the run's own; the model the first of its calls').

**Usage and cost** are read by :mod:`sim.traces.langfuse_usage`, with their
provenance. A generation without usage (``usageDetails`` missing or empty)
keeps its place in the run with its token columns ``unknown``: a trace is
never dropped because some (or all) of its generations lack usage.

**Scores**: a trace's success score (``resolved``, ``success`` or
``correct``, :func:`sim.traces.langfuse_documents.resolved`) is the run's
``resolved``; others are not read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sim.traces import langfuse_documents as documents
from sim.traces import spantree
from sim.traces.assemble import (
    extent,
    nearest,
    owner_before,
    run_cost,
    seconds,
    text_fields,
)
from sim.traces.langfuse_documents import value_of
from sim.traces.langfuse_usage import Counted, cost, counts, unknown
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    as_dict,
    as_list,
    canonical_arguments,
    content_text,
    parse_utc,
    tool_result,
)
from sim.traces.otel import Span
from sim.traces.repairs import Repair
from sim.traces.skips import NO_CALLS, Skip, Unusable

SOURCE = "langfuse"
CALL_TYPES = frozenset({"GENERATION"})
TOOL_TYPE = "TOOL"
AGENT_TYPE = "AGENT"
_ATTR = "langfuse.observation."


# ------------------------------------------------------------ API / exports
detect = documents.detect
"""Whether a file's JSON values are Langfuse observations or traces
(:func:`sim.traces.langfuse_documents.detect`)."""


@dataclass
class Collector:
    """Langfuse observations (and scores) gathered across files, by trace."""

    traces: dict[str, list[tuple[dict, str]]] = field(
        default_factory=lambda: defaultdict(list))
    scores: dict[str, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, values: list[Any], file: str) -> None:
        for obs, scores in documents.observations(values):
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
            try:
                yield _run(trace, items, list(self.scores.get(trace, {}).values()))
            except Unusable as problem:
                yield Skip(items[0][1], problem.reason, problem.detail, trace)


def _start(obs: dict) -> float:
    moment = parse_utc(value_of(obs, "startTime", "start_time"))
    return moment.timestamp() if moment is not None else float("inf")


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


def _run(trace: str, items: list[tuple[dict, str]], scores: list[dict]) -> RunRecord:
    obs_list = sorted(_merged(items).values(), key=lambda o: (_start(o), str(o.get("id"))))
    tree = _Tree(obs_list)
    times = [_times(o) for o in obs_list]
    first, last = extent((t[0] for t in times), (t[1] for t in times))
    notes: list[Repair] = []
    conventions: dict[str, str] = {}
    calls = _calls([o for o in obs_list if tree.kind[str(o.get("id"))] in CALL_TYPES],
                   [o for o in obs_list if tree.kind[str(o.get("id"))] == TOOL_TYPE],
                   tree.own_agents(), tree.agent_of, first, notes, conventions)
    if not calls:
        raise Unusable(NO_CALLS, f"{len(obs_list)} observations, none a GENERATION")
    verdict, how = documents.resolved(scores)
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
    read = counts(usage, where, notes) if isinstance(usage, dict) and usage else unknown()
    conventions.update(read.conventions)
    start, end = _times(obs)
    cost_usd, how = cost(value_of(obs, "costDetails", "cost_details"),
                         value_of(obs, "totalCost", "total_cost"),
                         value_of(obs, "calculatedTotalCost", "calculated_total_cost"))
    return CallRecord(
        usage=read.usage, model=value_of(obs, "model", "provided_model_name"),
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
    result = obs.get("output")
    if result is not None and not isinstance(result, str):
        result = canonical_arguments(result)
    tokens, sha, _ = tool_result(result)
    start, end = _times(obs)
    return ToolCallRecord(name=obs.get("name", ""), id=str(obs.get("id")),
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
    read = counts(usage, where) if isinstance(usage, dict) and usage else unknown()
    model = a.get(f"{_ATTR}model.name")
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
