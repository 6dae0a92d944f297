"""Assembling a run from its calls: the steps every importer shares.

An importer reads its format's records (messages, observations, steps,
spans) into :class:`~sim.traces.model.CallRecord` objects; what happens
around that is the same for every format and lives here:

- times: :func:`seconds` between two moments (None when either is unknown),
  :func:`extent` of a run from its records' start and end times,
  :func:`order_time` to sort records by (an unknown time last);
- trees of records: :func:`nearest` ancestor of a kind (the agent a call
  belongs to, the tool step a subagent runs under), with a hop limit so that
  a cycle in untrusted parent links ends;
- subagents in a span tree: :class:`AgentTree`, which agent span a call is
  under and which agents are the run's own (the rest are subagents); and
  :func:`twice_seen`, the call spans that repeat a request another call span
  around or inside them counts;
- tool calls: :func:`owner_before`, the last call of the same agent that
  started at or before a tool record, which the tool answers; :func:`ran_tool`,
  a tool record (a span, an observation, a step) with its result;
  :func:`requested_tool`, a tool call as a response requests it (its id as
  text, its arguments as canonical JSON), and :func:`openai_tool` one as an
  OpenAI-style message lists it;
- limits: :func:`limit_or_none`, a recorded limit where 0 means none;
- run fields from its calls: :func:`run_cost` (the exact sum of the calls'
  costs when every call has one, else None: :func:`sim.cost.recorded.calls_cost`)
  and :func:`main_model` (the first model
  of the run's own agent);
- text: :func:`text_fields`, a response's ``text_tokens`` and ``text_sha256``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from sim.cost.recorded import calls_cost
from sim.traces.model import (
    UNKNOWN,
    CallRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    canonical_arguments,
    canonical_json,
    sha256_text,
    tool_result,
)

MAX_HOPS = 1000
"""How many parent links :func:`nearest` follows at most (a deeper or
cyclic tree is read as if the ancestor were not there)."""
EXIT_CHARS = 200
"""The longest exit label an importer keeps (characters): an error's first
line, cut here, so a traceback or a provider's long message does not become
a label of its own in every summary."""


def seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    """Seconds from ``earlier`` to ``later``; None when either is unknown."""
    if later is None or earlier is None:
        return None
    return (later - earlier).total_seconds()


def order_time(moment: datetime | None) -> float:
    """``moment`` as Unix seconds to sort records by; infinity (last) when unknown."""
    return moment.timestamp() if moment is not None else float("inf")


def extent(starts: Iterable[datetime | None], ends: Iterable[datetime | None]
           ) -> tuple[datetime | None, datetime | None]:
    """``(first, last)``: the earliest start, and the latest start or end
    (None when no time is known)."""
    known_starts = [t for t in starts if t is not None]
    known = known_starts + [t for t in ends if t is not None]
    return min(known_starts, default=None), max(known, default=None)


def nearest(parent: Any, parent_of: Callable[[str], Any], marked: Callable[[str], bool],
            known: Callable[[str], bool]) -> str | None:
    """The nearest ancestor, starting at ``parent`` (an id or None), that is
    ``marked``: its id as a string, or None when the chain ends (at None or an
    id not ``known``) or passes :data:`MAX_HOPS` links first."""
    hops = 0
    while parent is not None and known(str(parent)) and hops < MAX_HOPS:
        if marked(str(parent)):
            return str(parent)
        parent, hops = parent_of(str(parent)), hops + 1
    return None


class TreeSpan(Protocol):
    """What :class:`AgentTree` reads of a span (:class:`sim.traces.otel.Span`):
    its id, its parent's id ("" at a root) and its start (Unix nanoseconds,
    or any number that orders the spans)."""

    @property
    def span(self) -> str: ...

    @property
    def parent(self) -> str: ...

    @property
    def start(self) -> int: ...


class AgentTree:
    """The spans of one run by span id, and which of them are agents
    (``is_agent``): the OTel span importers' one reading of subagents."""

    def __init__(self, spans: Sequence[TreeSpan], is_agent: Callable[[Any], bool]) -> None:
        self.by_id = {s.span: s for s in spans}
        self.agents = {s.span for s in spans if is_agent(s)}

    def agent_of(self, span: TreeSpan) -> str | None:
        """The nearest agent span above ``span`` (itself excluded)."""
        return nearest(span.parent or None, lambda i: self.by_id[i].parent or None,
                       self.agents.__contains__, self.by_id.__contains__)

    def depth(self, agent: str) -> int:
        """How many agents are above ``agent``."""
        node, hops = self.by_id[agent], 0
        while (up := self.agent_of(node)) is not None and hops < MAX_HOPS:
            node, hops = self.by_id[up], hops + 1
        return hops

    def outermost(self, callers: list[str | None]) -> set[str]:
        """The agents whose calls are the run's own: the outermost agents and
        the outermost agent that made calls itself (a framework's wrapper
        agent above it, such as a workflow span, is not a subagent boundary);
        ``callers``: the agent of each call. Any other agent is a subagent."""
        found = [a for a in callers if a is not None]
        main = min(found, key=lambda a: (self.depth(a), self.by_id[a].start)) if found else None
        return {a for a in self.agents if self.agent_of(self.by_id[a]) is None} | (
            {main} if main is not None else set())


NESTED_CALLS = ("a model-call span inside another is one request instrumented twice (as by "
                "OpenInference's openai and openai-agents instrumentors together): counted "
                "once, from the span that records its usage")
"""The run convention (``RunRecord.conventions["calls"]``) of a run read with
:func:`twice_seen`."""


def twice_seen(calls: Sequence[TreeSpan], provenances: Sequence[Mapping[str, str]],
               tree: AgentTree) -> set[int]:
    """The indices of ``calls`` (a run's model-call spans, in the spans of
    ``tree``) that are a request already counted. A model-call span with
    model-call spans below it is the same request seen by two
    instrumentations (an agent framework's span around its client
    library's); the inner spans are kept (the client's split the cache and
    reasoning) and the outer one is not, unless only it records usage (its
    provenance, of ``provenances``, one per call, does not say both its
    input and output are unknown): then the inner ones are not."""
    records_usage = [any(p.get(c) != UNKNOWN for c in ("input_tokens", "output_tokens"))
                     for p in provenances]
    index = {span.span: i for i, span in enumerate(calls)}
    below: dict[int, list[int]] = {}
    for i, span in enumerate(calls):
        above = nearest(span.parent or None, lambda s: tree.by_id[s].parent or None,
                        index.__contains__, tree.by_id.__contains__)
        if above is not None:
            below.setdefault(index[above], []).append(i)
    dropped: set[int] = set()
    for outer, inner in below.items():
        if records_usage[outer] and not any(records_usage[i] for i in inner):
            dropped.update(inner)
        else:
            dropped.add(outer)
    return dropped


def owner_before(calls: Sequence[CallRecord], indices: Iterable[int],
                 offset: float | None) -> int | None:
    """The last of ``indices`` (calls of one agent, in start order) whose call
    started at or before ``offset`` seconds (an unknown start counts as 0;
    an unknown ``offset`` accepts any); None when there is none."""
    found = None
    for i in indices:
        if offset is None or (calls[i].started_s or 0.0) <= offset:
            found = i
    return found


def ran_tool(name: str, id: str | None, arguments: Any, result: Any, *, error: bool,
             duration_s: float | None) -> ToolCallRecord:
    """A tool call recorded with what came back: ``arguments`` as canonical
    JSON (:func:`~sim.traces.model.canonical_arguments`), ``result`` (text, or
    a value written as canonical JSON; None for none recorded) sized and
    hashed (:func:`~sim.traces.model.tool_result`), ``duration_s`` in seconds."""
    if result is not None and not isinstance(result, str):
        result = canonical_json(result)
    tokens, sha, _ = tool_result(result)
    return ToolCallRecord(name=name, id=id, arguments=canonical_arguments(arguments),
                          result_tokens=tokens, result_sha256=sha, error=error,
                          duration_s=duration_s)


def requested_tool(name: Any, id: Any, arguments: Any) -> ToolCallRecord:
    """A tool call as a response requests it, not yet answered: ``id`` as
    text (None for none), ``arguments`` as canonical JSON
    (:func:`~sim.traces.model.canonical_arguments`); ``name`` as recorded (the
    writer repairs one that is not a name)."""
    return ToolCallRecord(name=name, id=None if id is None else str(id),
                          arguments=canonical_arguments(arguments))


def openai_tool(item: dict) -> ToolCallRecord:
    """A tool call as an OpenAI-style assistant message lists it
    (``{"id", "function": {"name", "arguments"}}``)."""
    function = as_dict(item.get("function"))
    return requested_tool(function.get("name", ""), item.get("id"), function.get("arguments"))


def run_cost(calls: Sequence[CallRecord]) -> float | None:
    """The run's cost in USD from its calls' recorded costs
    (:func:`sim.cost.recorded.calls_cost`: their exact sum when every call
    has one, else None)."""
    return calls_cost(c.cost_usd for c in calls)


def main_model(calls: Sequence[CallRecord]) -> str | None:
    """The first model of the run's own agent's calls (``agent`` null)."""
    return next((c.model for c in calls if c.model and c.agent is None), None)


def text_fields(text: str | None, *, missing_is_empty: bool = False) -> dict[str, Any]:
    """``text_tokens`` and ``text_sha256`` of a response's text: its
    :func:`~sim.traces.model.approx_tokens` and hash; for no text both null
    (a source that records no content), or 0 tokens with ``missing_is_empty``
    (a source whose missing content means an empty one)."""
    tokens = approx_tokens(text) if text is not None or missing_is_empty else None
    return {"text_tokens": tokens, "text_sha256": sha256_text(text)}


def exit_label(text: Any) -> str | None:
    """A recorded error or stop reason as a run's ``exit``: its first line
    that is not blank, stripped and cut to :data:`EXIT_CHARS` characters;
    None for no text (None, empty, whitespace only)."""
    if text is None:
        return None
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line[:EXIT_CHARS] or None


def number_or_none(value: Any) -> int | float | None:
    """A number as recorded (the writer nulls and counts an impossible one), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def limit_or_none(value: Any) -> Any:
    """A recorded limit (steps, USD) as recorded; 0 (the agents' "no limit")
    and missing are None (the writer nulls and counts an impossible one)."""
    number = number_or_none(value)
    return None if number is None or number == 0 else number
