"""Claude Code and Claude Agent SDK session transcripts (``~/.claude/projects/*/*.jsonl``).

Claude Code (and the Claude Agent SDK, which runs it) writes one JSON Lines
file per session, ``<project>/<sessionId>.jsonl``: one object per line with a
``type`` (``user``, ``assistant``, ``attachment``, ``system``, ``summary``,
``queue-operation``, ``last-prompt``...), the ``sessionId``, a ``uuid`` and a
``timestamp``. A subagent (the ``Agent`` tool, formerly ``Task``) writes its
own lines, marked ``isSidechain`` with an ``agentId``: in
``<sessionId>/subagents/agent-<agentId>.jsonl`` beside an
``agent-<agentId>.meta.json`` (``agentType``, ``toolUseId``) in current
versions, in the session's own file in older ones. Recognised by content: JSON
Lines whose objects have a ``type`` and at least one a ``sessionId`` with a
transcript ``type``; a ``.meta.json`` and a project's ``sessions-index.json``
are read as companions.

- **One run per session** (``run_id`` the ``sessionId``): its lines are
  gathered across files (a resumed session appends to its file; a subagent's
  file holds the parent's ``sessionId``) and assembled once all are read. A
  forked session (``--fork-session``) starts with a copy of its parent's
  messages: a message (by id) is a call of the session that has it first;
- **a model call** is an ``assistant`` line's ``message`` with ``usage``.
  Claude Code writes a streamed message as several lines, one per content
  block, sharing ``message.id``: they are **one call** (their blocks joined in
  order, each usage count the largest the lines give). Messages of model
  ``<synthetic>`` (written by Claude Code itself, no request made) are not
  calls. Usage is Anthropic's: ``input_tokens`` (uncached),
  ``cache_read_input_tokens``, ``cache_creation_input_tokens`` and
  ``output_tokens`` (thinking included: ``reasoning_tokens`` 0);
  ``stop_reason`` as ``finish_reason``; a line's ``costUSD`` (older versions)
  as the call's cost;
- a call **starts** when the line before it in its agent's thread was written
  and ends when its last line was (``started_s``, ``latency_s``, seconds);
- **tool calls** are the ``tool_use`` blocks (name, id, input as canonical
  JSON), answered by the ``tool_result`` blocks of later ``user`` lines
  (matched by id): the result's text, its ``is_error``, and the time from the
  call's end to the result as the tool's duration (the result as the tool
  returned it: Claude Code appends its reminders, recorded as ``attachment``
  lines, to a result when it sends it, and those are not counted);
- **subagents**: their calls are calls of the parent's run, in time order,
  with ``agent`` set to the ``agentId`` (``sidechain`` when an older
  transcript gives none);
- **observations**: a ``user`` line's own text (a new prompt, a compaction
  summary ``isCompactSummary``, an injected note) counts in the
  ``observation_tokens``/``observation_sha256`` of the call before it in its
  thread; meta lines (``isMeta``) do not reach the model as such and are not
  counted. Claude Code does not record its compaction request itself (only
  the summary it produced), so it is no call;
- run fields: the main agent's most frequent model, ``cost_usd`` the sum of
  the calls' costs when every call has one, ``started_at`` and ``duration_s``
  from the first and last timestamps. A transcript records no task, exit or
  limits: those stay null.

An assistant message from a model (not ``<synthetic>``) without usage, or
with counts that are not non-negative integers, makes its session unusable
(counted, with the reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sim.traces.assemble import run_cost, seconds
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    as_list,
    canonical_arguments,
    content_text,
    finite_or_none,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.skips import NO_CALLS, NO_USAGE, Skip, Unusable
from sim.traces.usage import from_disjoint

SOURCE = "claude-code"
LINE_TYPES = frozenset({"user", "assistant", "attachment", "system", "summary",
                        "queue-operation", "last-prompt", "file-history-snapshot", "mode",
                        "progress", "custom-title", "tag"})
"""The ``type`` values of transcript lines (those that are not messages are passed over)."""
SYNTHETIC_MODEL = "<synthetic>"
SIDECHAIN = "sidechain"
_USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                 "output_tokens")


def detect(values: list[Any]) -> bool:
    """Whether ``values`` (a file's JSON values) are a Claude Code transcript."""
    if not values or not all(isinstance(v, dict) and isinstance(v.get("type"), str)
                             for v in values):
        return False
    return any(v["type"] in LINE_TYPES and isinstance(v.get("sessionId"), str)
               for v in values)


def detect_meta(doc: Any) -> bool:
    """Whether ``doc`` is a subagent's ``agent-<id>.meta.json`` or a project's
    ``sessions-index.json`` (companions: nothing in them is a call)."""
    if not isinstance(doc, dict):
        return False
    if "agentType" in doc and "toolUseId" in doc and "sessionId" not in doc:
        return True
    entries = doc.get("entries")
    return isinstance(entries, list) and "version" in doc and bool(entries) and all(
        isinstance(e, dict) and "sessionId" in e for e in entries)


@dataclass
class _Call:
    """One model call as its lines are gathered."""

    key: str
    agent: str | None
    order: int
    before: datetime | None
    end: datetime | None
    model: str | None
    stop: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    blocks: list[dict] = field(default_factory=list)
    cost: float | None = None
    observations: list[str] = field(default_factory=list)
    line: str = ""

    def merge(self, message: dict, usage: dict, moment: datetime | None,
              cost: float | None) -> None:
        """Take one more line of the call (a response is written as several
        lines, one per content block): usage counts and the cost as their
        largest, content blocks appended, the stop reason and end time updated."""
        for name in _USAGE_FIELDS:
            value = usage.get(name)
            old = self.usage.get(name)
            if isinstance(old, int) and isinstance(value, int) and not isinstance(value, bool):
                value = max(old, value)
            self.usage[name] = value if value is not None else old
        self.blocks.extend(b for b in as_list(message.get("content")) if isinstance(b, dict))
        if message.get("stop_reason") is not None:
            self.stop = str(message["stop_reason"])
        if moment is not None:
            self.end = moment if self.end is None else max(self.end, moment)
        if cost is not None:
            self.cost = cost if self.cost is None else max(self.cost, cost)


@dataclass
class _Session:
    """What is known of one session so far."""

    file: str
    main_file: bool
    calls: dict[str, _Call] = field(default_factory=dict)
    results: dict[str, tuple[str | None, bool | None, datetime | None]] = \
        field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    problem: Unusable | None = None


@dataclass
class Collector:
    """Gathers transcript lines from every file of an import; :meth:`runs`
    assembles one run per session once all are read."""

    sessions: dict[str, _Session] = field(default_factory=dict)
    _order: int = 0

    def add(self, values: list[Any], file: str) -> None:
        """Read one transcript file's lines (see the module docstring)."""
        previous: dict[tuple[str, str | None], tuple[datetime | None, _Call | None]] = {}
        for number, line in enumerate(values, 1):
            line = as_dict(line)
            session_id = line.get("sessionId")
            if not isinstance(session_id, str) or line.get("type") not in ("user", "assistant"):
                continue
            agent = _agent(line)
            session = self.sessions.get(session_id)
            if session is None:
                session = self.sessions[session_id] = _Session(file, agent is None)
            elif agent is None and not session.main_file:
                session.file, session.main_file = file, True
            moment = parse_utc(line.get("timestamp"))
            if moment is not None:
                session.first = moment if session.first is None else min(session.first, moment)
                session.last = moment if session.last is None else max(session.last, moment)
            thread = (session_id, agent)
            before, last_call = previous.get(thread, (None, None))
            where = f"line {number}"
            if line["type"] == "assistant":
                call = self._assistant(session, line, agent, before, moment, where)
                if call is not None:
                    last_call = call
            else:
                self._user(session, line, last_call, moment)
            previous[thread] = (moment, last_call)

    def _assistant(self, session: _Session, line: dict, agent: str | None,
                   before: datetime | None, moment: datetime | None,
                   where: str) -> _Call | None:
        message = as_dict(line.get("message"))
        model = message.get("model")
        if model == SYNTHETIC_MODEL:
            return None
        usage = message.get("usage")
        key = str(message.get("id") or line.get("requestId") or line.get("uuid") or where)
        if not isinstance(usage, dict):
            if session.problem is None:
                session.problem = Unusable(NO_USAGE, f"{where}: assistant message {key} has "
                                                     "no usage")
            return None
        call = session.calls.get(key)
        if call is None:
            self._order += 1
            call = session.calls[key] = _Call(key, agent, self._order, before, moment,
                                              None if model is None else str(model),
                                              line=where)
        call.merge(message, usage, moment, finite_or_none(line.get("costUSD")))
        return call

    def _user(self, session: _Session, line: dict, last_call: _Call | None,
              moment: datetime | None) -> None:
        content = as_dict(line.get("message")).get("content")
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        for block in as_list(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                error = block.get("is_error")
                session.results[str(block.get("tool_use_id"))] = (
                    content_text(block.get("content")),
                    bool(error) if error is not None else False, moment)
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        if texts and last_call is not None and not line.get("isMeta"):
            last_call.observations.append("".join(texts))

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per session, in the order sessions were first met; a
        message copied into several sessions (a forked session starts with a
        copy of its parent's history) is a call of the first only."""
        owner: dict[str, tuple[float, int, str]] = {}
        for session_id, session in self.sessions.items():
            for key, call in session.calls.items():
                mine = (_sort_time(call), call.order, session_id)
                if key not in owner or mine < owner[key]:
                    owner[key] = mine
        for session_id, session in self.sessions.items():
            copies = [k for k in session.calls if owner[k][2] != session_id]
            for key in copies:
                del session.calls[key]
            try:
                if copies and not session.calls and session.problem is None:
                    raise Unusable(NO_CALLS, f"its {len(copies)} calls are copies of another "
                                             "session's (a fork that made no call)")
                yield _run(session_id, session)
            except Unusable as problem:
                yield Skip(session.file, problem.reason, problem.detail, session_id)


def _agent(line: dict) -> str | None:
    if not line.get("isSidechain"):
        return None
    agent = line.get("agentId")
    return str(agent) if agent else SIDECHAIN


def _run(session_id: str, session: _Session) -> RunRecord:
    if session.problem is not None:
        raise session.problem
    gathered = sorted(session.calls.values(), key=lambda c: (_sort_time(c), c.order))
    if not gathered:
        raise Unusable(NO_CALLS, "no assistant message with usage")
    start = session.first
    calls = [_call(c, session, start) for c in gathered]
    models = Counter(c.model for c, g in zip(calls, gathered, strict=True)
                     if c.model and g.agent is None)
    return RunRecord(
        run_id=session_id, source=SOURCE, file=session.file, calls=calls,
        model=models.most_common(1)[0][0] if models else None, cost_usd=run_cost(calls),
        started_at=start, duration_s=seconds(session.last, session.first))


def _sort_time(call: _Call) -> float:
    moment = call.before or call.end
    return moment.timestamp() if moment is not None else float("inf")


def _call(gathered: _Call, session: _Session, start: datetime | None) -> CallRecord:
    where = f"{gathered.line}: message {gathered.key}"
    u = gathered.usage
    counts = from_disjoint(u.get("input_tokens"), u.get("output_tokens"),
                           cache_read=u.get("cache_read_input_tokens"),
                           cache_write=u.get("cache_creation_input_tokens"), where=where)
    texts = [b["text"] for b in gathered.blocks
             if b.get("type") == "text" and isinstance(b.get("text"), str)]
    tools = []
    for block in gathered.blocks:
        if block.get("type") != "tool_use":
            continue
        ident = block.get("id")
        record = ToolCallRecord(name=str(block.get("name")),
                                id=None if ident is None else str(ident),
                                arguments=canonical_arguments(block.get("input")))
        answer = session.results.get(str(ident))
        if answer is not None:
            text, error, moment = answer
            record.result_tokens, record.result_sha256, record.error = tool_result(
                text, error=error)
            record.duration_s = seconds(moment, gathered.end)
        tools.append(record)
    observations = gathered.observations
    return CallRecord(
        usage=counts, model=gathered.model, cost_usd=gathered.cost, finish_reason=gathered.stop,
        started_s=seconds(gathered.before, start),
        latency_s=seconds(gathered.end, gathered.before),
        text_tokens=sum(approx_tokens(t) for t in texts),
        text_sha256=sha256_text("".join(texts)), tool_calls=tools,
        observation_tokens=sum(approx_tokens(t) for t in observations),
        observation_sha256=joined_sha256(observations), agent=gathered.agent)
