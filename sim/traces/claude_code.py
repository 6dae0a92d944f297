"""Claude Code and Claude Agent SDK session transcripts (``~/.claude/projects/*/*.jsonl``).

Claude Code (and the Claude Agent SDK, which runs it) writes one JSON Lines
file per session, ``<project>/<sessionId>.jsonl``: one object per line with a
``type`` (``user``, ``assistant``, ``attachment``, ``system``, ``summary``,
``progress``, ``queue-operation``, ``last-prompt``...), the ``sessionId``, a
``uuid`` and a ``timestamp``. A subagent (the ``Agent`` tool, formerly
``Task``) writes its own lines, marked ``isSidechain`` with an ``agentId``: in
``<sessionId>/subagents/agent-<agentId>.jsonl`` beside an
``agent-<agentId>.meta.json`` (``agentType``, ``toolUseId``) in current
versions, in the session's own file in older ones. A *forked* agent (2.1.x:
the compaction request, prompt suggestions, memory extraction...) writes
``agent-a<label>-<hex>.jsonl`` there too, starting with a copy of the
conversation it was forked from. Recognised by content: JSON Lines whose
objects have a ``type`` and at least one a ``sessionId`` with a transcript
``type``; a ``.meta.json`` and a project's ``sessions-index.json`` are read as
companions.

- **One run per session** (``run_id`` the ``sessionId``): its lines are
  gathered across files (a resumed session appends to its file; a subagent's
  file holds the parent's ``sessionId``) and assembled once all are read;
- **a model call** is an ``assistant`` line's ``message``, one per message id
  (``message.id``, else ``requestId``). Claude Code writes a streamed message
  as several lines, one per content block, sharing that id: they are **one
  call** (their blocks joined in order, each usage count the largest the
  lines give). A message copied into another thread or session (a forked
  agent's transcript starts with the conversation it was forked from; a
  ``--fork-session`` session with its parent's) is a call of the thread that
  wrote it first (by the time of its first line; on a tie, the main agent's),
  once; a line written again in its thread (same ``uuid``) is read once.
  Across sessions a line (its ``uuid``) belongs to the session that wrote it
  in time order: a ``--fork-session`` file opens with a ``queue-operation``
  line stamped at the fork, then the parent's lines copied with their own
  (earlier) timestamps, so a line stamped before an earlier line of its file
  is a copy; on a tie, the file read first. A call whose first line is a copy
  is its owner's, not the copying session's.
  Messages of model ``<synthetic>`` (written by Claude Code itself, no
  request made) are not calls;
- **usage** is Anthropic's, as recorded (provenance exact): ``input_tokens``
  (uncached), ``cache_read_input_tokens``, ``cache_creation_input_tokens``
  and ``output_tokens`` (thinking included: ``reasoning_tokens`` 0);
  ``stop_reason`` as ``finish_reason``; a line's ``costUSD`` (versions before
  2.x) as the call's cost, else the cost is null (unknown). An assistant
  message without usage is kept as a call with every token count 0 and
  unknown (its run is kept);
- **streaming partial counts**: versions 1.x to 2.1.x write each line as
  soon as its content block ends, with the usage of the stream's
  ``message_start`` (``stop_reason`` null, ``output_tokens`` 1 to 25 whatever
  the reply's length); newer ones write the final usage. A message's output
  count is final when one of its lines has a ``stop_reason``, or its lines
  give different counts (the largest is taken); otherwise it is
  **estimated** from the content (:func:`~sim.traces.model.approx_tokens` of
  its text, thinking, and tool calls' names and inputs as canonical JSON,
  together; at least the partial count), its ``output_tokens`` provenance is
  ``estimated``, and the run's ``conventions["output_tokens"]`` says so
  (:data:`ESTIMATED_OUTPUT`). The input and cache counts of ``message_start``
  are final. A subagent's call whose input and cache counts are those of
  its Agent (``Task``) tool result's ``toolUseResult.usage`` (the final
  usage of the subagent's last request) takes that output count, exact;
- a call **starts** when the line before it in its agent's thread was written
  and ends when its last line was (``started_s``, ``latency_s``, seconds);
- **tool calls** are the ``tool_use`` blocks (name, id, input as canonical
  JSON), answered by the ``tool_result`` blocks of later ``user`` lines
  (matched by id; the earliest when a forked agent copied it): the result's
  text, its ``is_error``, and as the tool's duration the time from the line
  that holds the ``tool_use`` block to the result's line (Claude Code starts
  a tool as soon as its block is complete, while the rest of the message may
  still stream). The result is taken as the tool returned it: Claude Code
  appends its reminders, recorded as ``attachment`` lines, to a result when
  it sends it, and those are not counted;
- **subagents**: their calls are calls of the parent's run, in time order,
  with ``agent`` set to the ``agentId`` (``sidechain`` when an older
  transcript gives none). A subagent whose own file is absent (a transcript
  copied without its ``subagents/`` folder; the file of any session read
  counts, as a subagent's lines carry its parent's ``sessionId`` and a
  ``--fork-session`` copies the parent's Agent tool results) is read from
  the session's ``progress`` lines of ``data.type`` ``agent_progress`` (``data.agentId``;
  ``data.normalizedMessages`` and ``data.message``, each message once by its
  ``uuid``); Claude Code writes progress only for a subagent's tool calls
  and results, so its last reply (no tool call) is read from the Agent
  (``Task``) tool result's ``toolUseResult`` (``agentId``, ``content``,
  ``usage``, final as written when the subagent ended, ``resolvedModel``),
  unless a subagent call of the session has its input and cache counts. It
  starts at its thread's last line (unknown without progress lines) and ends
  at the result's line. The run's ``conventions["subagents"]`` says so
  (:data:`SUBAGENTS_FROM_PROGRESS`); when the file is present neither is
  read, nor is a tool result that is a copy of another session's line;
- **compaction**: the compaction request Claude Code 2.1.x runs as a forked
  agent (``agentId`` ``acompact-<hex>``, file
  ``subagents/agent-acompact-<hex>.jsonl``) is a call of ``purpose``
  ``compaction`` with ``agent`` null, not a subagent's; versions that do not
  write it record only the summary it produced, and then there is no call;
- **observations**: a ``user`` line's own text (a new prompt, a compaction
  summary ``isCompactSummary``, an injected note) counts in the
  ``observation_tokens``/``observation_sha256`` of the call before it in its
  thread; meta lines (``isMeta``) do not reach the model as such and are not
  counted;
- run fields: the main agent's most frequent model (when the main agent made
  no call, as when its file is empty: its subagents', noted in
  ``conventions["model"]``), ``cost_usd`` the sum of the calls' costs when
  every call has one, ``started_at`` and ``duration_s`` from the first and
  last timestamps of the ``user`` and ``assistant`` lines the session wrote
  itself (not the copies a fork opens with; all of them when it wrote none);
- **exit and limits**: from the main thread's ``attachment`` lines the
  session wrote itself: ``max_turns_reached`` (``--max-turns``; written when
  the limit stops the run) gives ``exit`` :data:`MAX_TURNS_EXIT` (a
  step-limit stop) and ``step_limit`` its ``maxTurns``; ``budget_usd``
  (``--max-budget-usd``) gives ``cost_limit_usd`` its ``total``. A
  transcript records no task, nor any other exit: those stay null.

An assistant message whose counts are not non-negative integers makes its
session unusable (counted, with the reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import PurePath
from typing import Any, TypeGuard

from sim.traces.assemble import order_time, requested_tool, run_cost, seconds
from sim.traces.model import (
    ESTIMATED,
    EXACT,
    TOKEN_COLUMNS,
    UNKNOWN,
    CallRecord,
    RunRecord,
    Usage,
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
from sim.traces.skips import NO_CALLS, Skip, Unusable
from sim.traces.usage import from_disjoint

SOURCE = "claude-code"
LINE_TYPES = frozenset({"user", "assistant", "attachment", "system", "summary",
                        "queue-operation", "last-prompt", "file-history-snapshot", "mode",
                        "progress", "custom-title", "tag"})
"""The ``type`` values of transcript lines (those that are not messages are passed over)."""
SYNTHETIC_MODEL = "<synthetic>"
SIDECHAIN = "sidechain"
COMPACTION = "compaction"
"""The ``purpose`` of a compaction call."""
COMPACT_AGENT = "acompact-"
"""How the ``agentId`` of Claude Code's compaction fork begins (its file is
``agent-acompact-<hex>.jsonl``)."""
AGENT_PROGRESS = "agent_progress"
ESTIMATED_OUTPUT = ("estimated from content: streaming partial counts (stop_reason null, "
                    "message_start usage)")
"""``conventions["output_tokens"]`` of a run with a call whose output count was estimated."""
SUBAGENTS_FROM_PROGRESS = ("subagent transcript file absent: its calls read from agent_progress "
                           "lines (tool calls and results) and its last reply from the Agent "
                           "tool result; calls in neither are missing")
"""``conventions["subagents"]`` of a run with a subagent read from the main file's lines."""
MAX_TURNS_REACHED = "max_turns_reached"
"""The ``attachment.type`` Claude Code writes when ``--max-turns`` stops the run."""
MAX_TURNS_EXIT = "max_steps"
"""The run's ``exit`` then (a step-limit stop, :mod:`sim.calibration.exits`)."""
BUDGET_USD = "budget_usd"
"""The ``attachment.type`` giving ``--max-budget-usd`` (``total``)."""
MODEL_FROM_SUBAGENTS = "taken from its subagents' calls: the main agent made no call"
MODEL_UNKNOWN = "unknown: no call of the session names a model"
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
    """One model call (one message id in one thread) as its lines are gathered."""

    key: str
    thread: str | None
    order: int
    before: datetime | None
    first: datetime | None
    model: str | None
    compaction: bool = False
    settled: bool = False
    end: datetime | None = None
    stop: str | None = None
    recorded: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    outputs: set[int] = field(default_factory=set)
    blocks: list[dict] = field(default_factory=list)
    tool_lines: dict[str, datetime | None] = field(default_factory=dict)
    cost: float | None = None
    observations: list[str] = field(default_factory=list)
    line: str = ""
    uuid: str | None = None

    def merge(self, message: dict, usage: dict | None, moment: datetime | None,
              cost: float | None) -> None:
        """Take one more line of the call (a response is written as several
        lines, one per content block): usage counts and the cost as their
        largest, content blocks appended (each tool_use block's line time
        kept), the stop reason and end time updated."""
        if usage is not None:
            self.recorded = True
            for name in _USAGE_FIELDS:
                value = usage.get(name)
                old = self.usage.get(name)
                if _is_count(old) and _is_count(value):
                    value = max(old, value)
                self.usage[name] = value if value is not None else old
            if _is_count(usage.get("output_tokens")):
                self.outputs.add(usage["output_tokens"])
        for block in as_list(message.get("content")):
            if not isinstance(block, dict):
                continue
            self.blocks.append(block)
            if block.get("type") == "tool_use":
                self.tool_lines.setdefault(str(block.get("id")), moment)
        if message.get("stop_reason") is not None:
            self.stop = str(message["stop_reason"])
        if moment is not None:
            self.end = moment if self.end is None else max(self.end, moment)
        if cost is not None:
            self.cost = cost if self.cost is None else max(self.cost, cost)

    @property
    def final(self) -> bool:
        """Whether the output count is final: a line gave a stop reason, or
        the lines' counts differ (a count written after ``message_start``), or
        the count is the Agent tool result's (``settled``)."""
        return self.settled or self.stop is not None or len(self.outputs) > 1


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class _Progress:
    """One message of a subagent as an ``agent_progress`` line gives it."""

    agent: str
    entry: dict
    moment: datetime | None
    where: str


@dataclass
class _Reply:
    """A subagent's last reply as its Agent (``Task``) tool result gives it
    (``toolUseResult``: ``agentId``, ``content``, ``usage``, ``resolvedModel``)."""

    outcome: dict
    moment: datetime | None
    where: str
    uuid: str | None = None


@dataclass
class _Session:
    """What is known of one session so far."""

    file: str
    main_file: bool
    calls: dict[tuple[str | None, str], _Call] = field(default_factory=dict)
    results: dict[str, tuple[str | None, bool | None, datetime | None]] = \
        field(default_factory=dict)
    stamps: list[tuple[str | None, datetime]] = field(default_factory=list)
    limits: list[tuple[str | None, str, Any]] = field(default_factory=list)
    progress: list[_Progress] = field(default_factory=list)
    file_agents: set[str] = field(default_factory=set)
    replies: dict[str, _Reply] = field(default_factory=dict)
    lines: set[tuple[str | None, str]] = field(default_factory=set)
    conventions: dict[str, str] = field(default_factory=dict)


_Thread = dict[tuple[str, str | None], tuple[datetime | None, _Call | None]]
"""Per ``(sessionId, agent)`` thread: the time of its last line and its last call."""


@dataclass
class Collector:
    """Gathers transcript lines from every file of an import; :meth:`runs`
    assembles one run per session once all are read."""

    sessions: dict[str, _Session] = field(default_factory=dict)
    _order: int = 0
    _owners: dict[str, tuple[bool, int, str]] = field(default_factory=dict)
    """Per line ``uuid``: which session wrote it first (a line written out of
    time order in its file, after a later one, is a copy: a fork's file
    starts with its parent's lines after its own first line), then by reading
    order, as ``(copy, order, sessionId)``."""

    def add(self, values: list[Any], file: str) -> None:
        """Read one transcript file's lines (see the module docstring)."""
        previous: _Thread = {}
        compact_file = PurePath(file).name.startswith("agent-" + COMPACT_AGENT)
        latest: datetime | None = None
        for number, line in enumerate(values, 1):
            line = as_dict(line)
            session_id = line.get("sessionId")
            kind = line.get("type")
            moment = parse_utc(line.get("timestamp"))
            behind = moment is not None and latest is not None and moment < latest
            if moment is not None:
                latest = moment if latest is None else max(latest, moment)
            if not isinstance(session_id, str):
                continue
            uuid = line.get("uuid")
            if isinstance(uuid, str) and kind in ("user", "assistant", "attachment"):
                self._order += 1
                rank = (behind, self._order, session_id)
                if uuid not in self._owners or rank < self._owners[uuid]:
                    self._owners[uuid] = rank
            if kind == "progress":
                self._progress(session_id, line, file, f"line {number}")
                continue
            if kind == "attachment" and not line.get("isSidechain"):
                self._attachment(session_id, line, file)
                continue
            if kind not in ("user", "assistant"):
                continue
            agent = _agent(line, compact_file)
            session = self._session(session_id, file, agent)
            if agent is not None and agent != SIDECHAIN:
                session.file_agents.add(agent)
            self._line(session, session_id, line, agent, previous, f"line {number}")

    def _attachment(self, session_id: str, line: dict, file: str) -> None:
        """Keep the run's limit or exit an ``attachment`` line records:
        ``max_turns_reached`` (``maxTurns``) and ``budget_usd`` (``total``)."""
        attachment = as_dict(line.get("attachment"))
        kind = attachment.get("type")
        uuid = line.get("uuid")
        uuid = uuid if isinstance(uuid, str) else None
        if kind == MAX_TURNS_REACHED:
            session = self._session(session_id, file, None)
            session.limits.append((uuid, "exit", MAX_TURNS_EXIT))
            turns = attachment.get("maxTurns")
            if _is_count(turns) and turns > 0:
                session.limits.append((uuid, "step_limit", turns))
        elif kind == BUDGET_USD:
            total = finite_or_none(attachment.get("total"))
            if total is not None and total >= 0:
                session = self._session(session_id, file, None)
                session.limits.append((uuid, "cost_limit_usd", total))

    def _session(self, session_id: str, file: str, agent: str | None) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = _Session(file, agent is None)
        elif agent is None and not session.main_file:
            session.file, session.main_file = file, True
        return session

    def _progress(self, session_id: str, line: dict, file: str, where: str) -> None:
        """Keep the subagent messages of an ``agent_progress`` line (read in
        :meth:`runs` for a subagent whose own file is absent)."""
        data = as_dict(line.get("data"))
        agent = data.get("agentId")
        if data.get("type") != AGENT_PROGRESS or not isinstance(agent, str) or not agent:
            return
        session = self._session(session_id, file, None)
        moment = parse_utc(line.get("timestamp"))
        for entry in [*as_list(data.get("normalizedMessages")), data.get("message")]:
            if isinstance(entry, dict):
                session.progress.append(_Progress(agent, entry, moment, where))

    def _line(self, session: _Session, session_id: str, line: dict, agent: str | None,
              previous: _Thread, where: str) -> None:
        """Read one ``user`` or ``assistant`` line of ``agent``'s thread, once
        (a line of the same ``uuid`` written again in the thread is a copy)."""
        uuid = line.get("uuid")
        if isinstance(uuid, str):
            if (agent, uuid) in session.lines:
                return
            session.lines.add((agent, uuid))
        moment = parse_utc(line.get("timestamp"))
        if moment is not None:
            session.stamps.append((uuid if isinstance(uuid, str) else None, moment))
        thread = (session_id, agent)
        before, last_call = previous.get(thread, (None, None))
        if line.get("type") == "assistant":
            call = self._assistant(session, line, agent, before, moment, where)
            if call is not None:
                last_call = call
        elif line.get("type") == "user":
            self._user(session, line, last_call, moment, where)
        else:
            return
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
        call = session.calls.get((agent, key))
        if call is None:
            self._order += 1
            call = session.calls[(agent, key)] = _Call(
                key, agent, self._order, before, moment, None if model is None else str(model),
                compaction=agent is not None and agent.startswith(COMPACT_AGENT), line=where,
                uuid=line.get("uuid") if isinstance(line.get("uuid"), str) else None)
        call.merge(message, usage if isinstance(usage, dict) else None, moment,
                   finite_or_none(line.get("costUSD")))
        return call

    def _user(self, session: _Session, line: dict, last_call: _Call | None,
              moment: datetime | None, where: str) -> None:
        outcome = as_dict(line.get("toolUseResult"))
        agent = outcome.get("agentId")
        if isinstance(agent, str) and agent and isinstance(outcome.get("usage"), dict):
            uuid = line.get("uuid")
            session.replies.setdefault(agent, _Reply(outcome, moment, where,
                                                     uuid if isinstance(uuid, str) else None))
        content = as_dict(line.get("message")).get("content")
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        for block in as_list(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                ident = str(block.get("tool_use_id"))
                known = session.results.get(ident)
                if known is not None and (moment is None or known[2] is None
                                          or known[2] <= moment):
                    continue  # a copy (a forked agent's transcript): the first is kept
                error = block.get("is_error")
                session.results[ident] = (content_text(block.get("content")),
                                          bool(error) if error is not None else False, moment)
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        if texts and last_call is not None and not line.get("isMeta"):
            last_call.observations.append("".join(texts))

    def _owns(self, session_id: str, uuid: str | None) -> bool:
        """Whether the session wrote the line of this ``uuid`` first (not a copy
        of another session's line: a ``--fork-session`` file starts with its
        parent's lines)."""
        owner = self._owners.get(uuid) if uuid is not None else None
        return owner is None or owner[2] == session_id

    def _read_progress(self, session_id: str, session: _Session, filed: set[str]) -> None:
        """Read what the session's own lines say of its subagents without a
        file of their own (in any session: ``filed``): their progress lines'
        messages, each once (by its ``uuid``), then each one's last reply from
        its Agent tool result, unless that result's line is a copy of another
        session's. Where a subagent's file is present, its Agent tool result
        settles the output count of the call it gives the usage of."""
        previous: _Thread = {}
        seen: set[tuple[str, str]] = set()
        for item in session.progress:
            if item.agent in filed:
                continue
            entry = item.entry
            ident = (item.agent, str(entry.get("uuid") or (
                entry.get("type"), as_dict(entry.get("message")).get("id"),
                entry.get("timestamp"))))
            if ident in seen:
                continue
            seen.add(ident)
            line = {**entry, "sessionId": session_id, "isSidechain": True,
                    "agentId": item.agent}
            if parse_utc(line.get("timestamp")) is None:
                line["timestamp"] = item.moment
            self._line(session, session_id, line, item.agent, previous,
                       f"{item.where} (agent_progress)")
            if line.get("type") == "assistant":
                session.conventions["subagents"] = SUBAGENTS_FROM_PROGRESS
        session.progress.clear()
        for agent, reply in session.replies.items():
            if not self._owns(session_id, reply.uuid):
                continue
            if agent in filed:
                _settle(session, agent, as_dict(reply.outcome.get("usage")))
            elif self._last_reply(session, (session_id, agent), reply, previous):
                session.conventions["subagents"] = SUBAGENTS_FROM_PROGRESS

    def _last_reply(self, session: _Session, thread: tuple[str, str], reply: _Reply,
                    previous: _Thread) -> bool:
        """Add a subagent's last reply, read from its Agent tool result (a reply
        without a tool call has no progress line), unless a subagent's call of
        the session is that request (the same input and cache counts: a
        sidechain of the older layout, or a last reply with a tool call). Its counts are
        final (the result is written when the subagent ends); it started at the
        thread's last line, ended at the result's."""
        usage = as_dict(reply.outcome.get("usage"))
        before, last_call = previous.get(thread, (None, None))
        if any(c.thread is not None and all(c.usage.get(name) == usage.get(name)
                                            for name in _USAGE_FIELDS[:3])
               for c in session.calls.values()):
            return False
        model = reply.outcome.get("resolvedModel")
        if not isinstance(model, str):
            model = last_call.model if last_call is not None else None
        agent = thread[1]
        self._order += 1
        key = f"{agent}:last reply"
        call = session.calls[(agent, key)] = _Call(key, agent, self._order, before,
                                                   reply.moment, model, settled=True,
                                                   line=f"{reply.where} (Agent tool result)")
        call.merge({"content": reply.outcome.get("content")}, usage, reply.moment, None)
        return True

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per session, in the order sessions were first met; a
        message copied into several threads or sessions (a forked agent's or
        session's transcript starts with a copy of its parent's) is a call of
        the first only."""
        kept: dict[str, dict[str, _Call]] = {}
        filed = {a for s in self.sessions.values() for a in s.file_agents}
        for session_id, session in self.sessions.items():
            self._read_progress(session_id, session, filed)
            mine: dict[str, _Call] = {}
            for call in session.calls.values():
                other = mine.get(call.key)
                if other is None or _rank(call) < _rank(other):
                    mine[call.key] = call
            kept[session_id] = mine
        owner: dict[str, tuple[bool, float, int, str]] = {}
        for session_id, calls in kept.items():
            for key, call in calls.items():
                rank = (not self._owns(session_id, call.uuid), _sort_time(call), call.order,
                        session_id)
                if key not in owner or rank < owner[key]:
                    owner[key] = rank
        for session_id, session in self.sessions.items():
            calls = kept[session_id]
            copies = [k for k in calls if owner[k][3] != session_id]
            for key in copies:
                del calls[key]
            try:
                if copies and not calls:
                    raise Unusable(NO_CALLS, f"its {len(copies)} calls are copies of another "
                                             "session's (a fork that made no call)")
                yield self._run(session_id, session, list(calls.values()))
            except Unusable as problem:
                yield Skip(session.file, problem.reason, problem.detail, session_id)


    def _run(self, session_id: str, session: _Session, kept: list[_Call]) -> RunRecord:
        """The session's run: its times from the lines it wrote itself (not
        the copies a fork starts with; all of them when it wrote none), its
        limits and exit from its own attachment lines."""
        own = [m for u, m in session.stamps if self._owns(session_id, u)]
        times = own or [m for _, m in session.stamps]
        first, last = (min(times), max(times)) if times else (None, None)
        limits = {name: value for uuid, name, value in session.limits
                  if self._owns(session_id, uuid)}
        return replace(_run(session_id, session, kept, first, last), **limits)


def _settle(session: _Session, agent: str, usage: dict) -> None:
    """Give the subagent's call of the Agent tool result's input and cache
    counts that result's output count (final: written when the subagent
    ended), unless its own lines already give a final one."""
    output = usage.get("output_tokens")
    if not _is_count(output):
        return
    for call in session.calls.values():
        if call.thread == agent and not call.final and call.recorded and all(
                call.usage.get(name) == usage.get(name) for name in _USAGE_FIELDS[:3]):
            call.usage["output_tokens"] = output
            call.settled = True


def _agent(line: dict, compact_file: bool) -> str | None:
    if not line.get("isSidechain"):
        return None
    agent = line.get("agentId")
    if agent:
        return str(agent)
    return COMPACT_AGENT if compact_file else SIDECHAIN


def _rank(call: _Call) -> tuple[float, bool, int]:
    """Which of a message's copies in several threads is the call: the first
    written, the main agent's on a tie."""
    return order_time(call.first or call.end), call.thread is not None, call.order


def _run(session_id: str, session: _Session, kept: list[_Call], first: datetime | None,
         last: datetime | None) -> RunRecord:
    # a call known only by its end (no line before it in its thread) began before it
    gathered = sorted(kept, key=lambda c: (_sort_time(c), c.before is not None, c.order))
    if not gathered:
        raise Unusable(NO_CALLS, "no assistant message")
    start = first
    calls = [_call(c, session, start) for c in gathered]
    conventions = dict(session.conventions)
    if any(c.provenance.get("output_tokens") == ESTIMATED for c in calls):
        conventions["output_tokens"] = ESTIMATED_OUTPUT
    models = Counter(c.model for c, g in zip(calls, gathered, strict=True)
                     if c.model and g.thread is None)
    if not models:
        models = Counter(c.model for c in calls if c.model)
        conventions["model"] = MODEL_FROM_SUBAGENTS if models else MODEL_UNKNOWN
    return RunRecord(
        run_id=session_id, source=SOURCE, file=session.file, calls=calls,
        model=models.most_common(1)[0][0] if models else None, cost_usd=run_cost(calls),
        started_at=start, duration_s=seconds(last, first),
        conventions=conventions)


def _sort_time(call: _Call) -> float:
    return order_time(call.before or call.end)


def _content_tokens(blocks: list[dict]) -> int:
    """:func:`approx_tokens` of a response's text, thinking, and tool calls'
    names and inputs (canonical JSON), together: its output estimated from
    its content."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            parts.append(block["thinking"])
        elif kind == "tool_use":
            parts.append(str(block.get("name") or ""))
            parts.append(canonical_arguments(block.get("input")) or "")
    return approx_tokens("".join(parts))


def _usage(gathered: _Call, where: str) -> tuple[Usage, dict[str, str]]:
    """The call's usage and each token column's provenance (and the cost's)."""
    provenance = dict.fromkeys(TOKEN_COLUMNS, EXACT)
    provenance["cost_usd"] = EXACT if gathered.cost is not None else UNKNOWN
    if not gathered.recorded:
        return Usage(), {**provenance, **dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)}
    u = gathered.usage
    counts = from_disjoint(u.get("input_tokens"), u.get("output_tokens"),
                           cache_read=u.get("cache_read_input_tokens"),
                           cache_write=u.get("cache_creation_input_tokens"), where=where)
    if not gathered.final:
        counts = replace(counts, output_tokens=max(counts.output_tokens,
                                                   _content_tokens(gathered.blocks)))
        provenance["output_tokens"] = ESTIMATED
    return counts, provenance


def _call(gathered: _Call, session: _Session, start: datetime | None) -> CallRecord:
    where = f"{gathered.line}: message {gathered.key}"
    counts, provenance = _usage(gathered, where)
    texts = [b["text"] for b in gathered.blocks
             if b.get("type") == "text" and isinstance(b.get("text"), str)]
    tools = []
    for block in gathered.blocks:
        if block.get("type") != "tool_use":
            continue
        ident = block.get("id")
        record = requested_tool(block.get("name", ""), ident, block.get("input"))
        answer = session.results.get(str(ident))
        if answer is not None:
            text, error, moment = answer
            record.result_tokens, record.result_sha256, record.error = tool_result(
                text, error=error)
            record.duration_s = seconds(moment, gathered.tool_lines.get(str(ident)))
        tools.append(record)
    observations = gathered.observations
    return CallRecord(
        usage=counts, model=gathered.model, cost_usd=gathered.cost, finish_reason=gathered.stop,
        started_s=seconds(gathered.before, start),
        latency_s=seconds(gathered.end, gathered.before),
        text_tokens=sum(approx_tokens(t) for t in texts),
        text_sha256=sha256_text("".join(texts)), tool_calls=tools,
        observation_tokens=sum(approx_tokens(t) for t in observations),
        observation_sha256=joined_sha256(observations),
        purpose=COMPACTION if gathered.compaction else None,
        agent=None if gathered.compaction else gathered.thread, provenance=provenance)
