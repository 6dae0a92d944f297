"""Runs from span trees whose attributes follow a vendor's conventions, not the GenAI ones.

Langfuse's SDK (``langfuse.observation.*``), OpenInference (Arize Phoenix:
``openinference.span.kind``, ``llm.token_count.*``) and older
OpenLLMetry/Traceloop (``gen_ai.usage.prompt_tokens``...) write OpenTelemetry
spans in OTLP JSON like the GenAI conventions do (:mod:`sim.traces.otel`), but
name the same facts differently. Each of those formats is a :class:`Dialect`:
it says which spans are model calls (with their token counts, model, cost and
finish reason), which are tool calls and which are agents. This module does
the rest, the same way for all of them:

- **one run per trace** (``run_id`` the trace id), or per session where the
  dialect reads one (the traces of a session are one run, ``run_id`` the
  session id), spans gathered across files
  (parsed by :class:`sim.traces.otel.Collector`) and assembled once all are read;
- the calls in start order, with the tool calls their responses requested
  (when the dialect reads them); a **tool span** belongs to the last call that
  started before it in the same agent, where it answers the requested call of
  the same id (else the first unanswered one of the same name) or is added;
- **subagents**: the run's own agent is the outermost agent span that made
  calls itself (a wrapper agent above it, such as a framework's workflow
  span, is not a subagent boundary); a call under another, nested agent span
  is marked with that span's id in ``agent`` (a subagent's calls stay in the
  parent's run);
- **one request, one call**: a model-call span with model-call spans below
  it is the same request seen by two instrumentations (an agent framework's
  and its client library's: OpenInference's openai-agents and openai, a
  LangChain and an OpenAI instrumentor); the inner spans are the calls and
  the outer one is dropped, unless only it records usage (noted in the run's
  conventions, ``calls``);
- the run's ``cost_usd`` is the sum of its calls' recorded costs when every
  call has one (else null); ``exit`` the ``error.type`` (else the status
  message) of the root span when it failed; times from the spans.

A trace with a call span whose usage the dialect cannot read
(:class:`~sim.traces.skips.Unusable`) is skipped with the dialect's reason
(a dialect that keeps calls without usage marks them ``unknown`` in their
provenance instead); one without call spans as ``no model calls``.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sim.traces.assemble import (
    NESTED_CALLS,
    AgentTree,
    main_model,
    ran_tool,
    requested_tool,
    run_cost,
    text_fields,
    twice_seen,
)
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    bounded_int,
    utc_from_unix,
)
from sim.traces.otel import Collector, Span
from sim.traces.skips import NO_CALLS, Skip, Unusable, or_skip


@dataclass(frozen=True)
class ToolFacts:
    """What a dialect reads from a tool span."""

    name: str
    id: str | None = None
    arguments: Any = None
    result: Any = None


@dataclass(frozen=True)
class CallFacts:
    """What a dialect reads from a model-call span (tokens in the trace
    model's convention, cost in USD as recorded; ``provenance`` the call's,
    :attr:`~sim.traces.model.CallRecord.provenance`)."""

    usage: Usage
    model: str | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    text: str | None = None
    tools: list[ToolFacts] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Dialect:
    """One vendor's span conventions.

    ``call(span)`` returns :class:`CallFacts` for a model-call span, None for
    other spans, and raises :class:`~sim.traces.skips.Unusable` for a call span
    whose usage cannot be read; ``tool(span)`` returns :class:`ToolFacts` for a
    tool span; ``is_agent(span)`` says whether the span is an agent;
    ``session(span)`` the session a span declares (traces of one session are
    one run, named after it), None for none."""

    source: str
    claims: Callable[[dict[str, Any]], bool]
    call: Callable[[Span], CallFacts | None]
    tool: Callable[[Span], ToolFacts | None]
    is_agent: Callable[[Span], bool]
    session: Callable[[Span], str | None] = lambda span: None


def mixed(primary: Dialect, others: tuple[Dialect, ...]) -> Dialect:
    """``primary`` reading each span in the dialect that claims it: its own
    if it does, else the first of ``others`` that does (else its own). A
    trace may mix them: the Langfuse SDK exports the spans of every
    instrumentor on its tracer provider, OpenInference's LLM spans under a
    Langfuse observation among them (Langfuse's own OpenAI Agents SDK
    setup). Runs keep ``primary``'s source; files are still given to the
    first dialect one of their spans belongs to."""
    order = (primary, *(d for d in others if d is not primary))

    def of(span: Span) -> Dialect:
        return next((d for d in order if d.claims(span.attributes)), primary)

    return Dialect(source=primary.source, claims=primary.claims,
                   call=lambda span: of(span).call(span),
                   tool=lambda span: of(span).tool(span),
                   is_agent=lambda span: of(span).is_agent(span),
                   session=lambda span: of(span).session(span))


@dataclass
class Gatherer:
    """Spans of one dialect, gathered across an import's files."""

    dialect: Dialect
    spans: Collector = field(default_factory=Collector)

    def add(self, doc: dict, file: str) -> int:
        return self.spans.add(doc, file)

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per session (else per trace), ordered by start time then id."""
        sessions: dict[str, str] = {}
        for span in self.spans.spans:
            session = self.dialect.session(span)
            if session is not None:
                sessions.setdefault(span.trace, session)
        traces: dict[str, list[Span]] = defaultdict(list)
        for span in self.spans.spans:
            traces[sessions.get(span.trace, span.trace)].append(span)
        order = sorted(traces, key=lambda t: (min(s.start for s in traces[t]), t))
        for trace in order:
            spans = sorted(traces[trace], key=lambda s: (s.start, s.end, s.span))
            yield or_skip(partial(_run, self.dialect, trace, spans), spans[0].file, trace,
                          deep=False)


def claims_any(doc: Any, test: Callable[[dict[str, Any]], bool]) -> bool:
    """Whether some span of the OTLP JSON ``doc`` has attributes ``test`` accepts."""
    probe = Collector()
    probe.add(doc, "")
    return any(test(s.attributes) for s in probe.spans)


def _run(dialect: Dialect, trace: str, spans: list[Span]) -> RunRecord:
    tree = AgentTree(spans, dialect.is_agent)
    chats = [(s, f) for s in spans if (f := dialect.call(s)) is not None]
    if not chats:
        raise Unusable(NO_CALLS, f"{len(spans)} spans, none a model call")
    twice = twice_seen([s for s, _ in chats], [f.provenance for _, f in chats], tree)
    chats = [chat for i, chat in enumerate(chats) if i not in twice]
    agents = [tree.agent_of(s) for s, _ in chats]
    outermost = tree.outermost(agents)
    start = spans[0].start
    end = max(s.end for s in spans)
    calls = [_call(facts, span, start, None if agent in outermost else agent)
             for (span, facts), agent in zip(chats, agents, strict=True)]
    _attach_tools(dialect, tree, spans, [s for s, _ in chats], agents, calls)
    roots = [s for s in spans if not s.parent or s.parent not in tree.by_id]
    exit_label = roots[0].attributes.get("error.type") or "error" \
        if roots and roots[0].error else None
    return RunRecord(
        run_id=trace, source=dialect.source, file=spans[0].file, calls=calls,
        model=main_model(calls), cost_usd=run_cost(calls),
        exit=None if exit_label is None else str(exit_label),
        started_at=utc_from_unix(start / 1e9) if start else None,
        duration_s=(end - start) / 1e9 if start and end >= start else None,
        conventions={"calls": NESTED_CALLS} if twice else {})


def _attach_tools(dialect: Dialect, tree: AgentTree, spans: list[Span], chats: list[Span],
                  agents: list[str | None], calls: list[CallRecord]) -> None:
    """Each tool span answers the last call of its agent that started before it."""
    owners: dict[str | None, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for number, (span, agent) in enumerate(zip(chats, agents, strict=True)):
        owners[agent][0].append(span.start)
        owners[agent][1].append(number)
    for span in spans:
        facts = dialect.tool(span)
        if facts is None:
            continue
        starts, index = owners.get(tree.agent_of(span), ([], []))
        position = bisect_right(starts, span.start) - 1
        if position >= 0:
            _answer(calls[index[position]].tool_calls, _tool(facts, span))


def _call(facts: CallFacts, span: Span, start: int, agent: str | None) -> CallRecord:
    """A call span's record (times from the run's ``start``, in Unix ns)."""
    return CallRecord(
        usage=facts.usage, model=facts.model, cost_usd=facts.cost_usd,
        finish_reason=facts.finish_reason, started_s=(span.start - start) / 1e9,
        latency_s=(span.end - span.start) / 1e9, **text_fields(facts.text), agent=agent,
        provenance=dict(facts.provenance),
        tool_calls=[requested_tool(t.name, t.id, t.arguments) for t in facts.tools])


def _answer(requested: list[ToolCallRecord], ran: ToolCallRecord) -> None:
    """Fill the requested tool call ``ran`` answers (same id, else the first
    unanswered one of the same name) with its result; else add ``ran``."""
    open_calls = [t for t in requested if t.result_sha256 is None and t.duration_s is None]
    match = next((t for t in open_calls if ran.id is not None and t.id == ran.id), None) \
        or next((t for t in open_calls if t.name == ran.name), None)
    if match is None:
        requested.append(ran)
        return
    match.result_tokens, match.result_sha256 = ran.result_tokens, ran.result_sha256
    match.error, match.duration_s = ran.error, ran.duration_s
    if match.arguments is None:
        match.arguments = ran.arguments


def _tool(facts: ToolFacts, span: Span) -> ToolCallRecord:
    return ran_tool(facts.name, facts.id, facts.arguments, facts.result, error=span.error,
                    duration_s=(span.end - span.start) / 1e9)


def json_value(value: Any) -> Any:
    """``value`` parsed when it is a JSON string (attributes hold JSON as text);
    else as is."""
    if isinstance(value, str):
        try:
            return json.loads(value, parse_int=bounded_int)
        except (ValueError, RecursionError):
            return value
    return value
