"""OpenHands V1 conversations (the ``software-agent-sdk``, ``openhands-sdk``).

Checked against the SDK's own writer (github:OpenHands/software-agent-sdk at
611629e6, ``openhands-sdk/openhands/sdk``: ``conversation/persistence_const.py``,
``conversation/event_store.py``, ``conversation/state.py``,
``conversation/conversation_stats.py``, ``event/*``, ``agent/agent.py``,
``llm/utils/metrics.py`` and ``llm/utils/telemetry.py``) and against
conversations it wrote (``tests/fixtures/real/openhands_sdk``). Every event
is a JSON object with ``kind`` (its class name), ``id``, ``timestamp`` (local
time without a zone: taken as UTC, as OpenHands' older format) and ``source``
(``agent``, ``user``, ``environment``, ``hook``): :func:`is_event`. OpenHands'
older (V0) events have no ``kind`` and name their ``action`` / ``observation``
by a string (:mod:`sim.traces.openhands`), the SDK's by an object, so neither
importer claims the other's files. Two shapes are recognised by content:

- a **conversation folder** (``LocalConversation``'s persistence):
  ``base_state.json`` (the ``ConversationState``: ``id``, ``agent``,
  ``execution_status``, ``max_iterations``, ``stats``) beside
  ``events/event-NNNNN-ID.json``, one event per file (the empty
  ``events/.eventlog.lock`` is not JSON and is ignored). Both are gathered by
  conversation folder (:class:`Collector`); each folder is one run,
  ``run_id`` the state's ``id`` (else the folder's name), its events in the
  order of the index in their file names. A state without events is skipped
  (no per-call trajectory);
- an **event list**: JSON Lines of events (the agent server's and OpenHands
  Cloud's exports), or one JSON list of them; one file is one run, ``run_id``
  the conversation ``id`` a ``full_state`` update carries, else the file.

**Model calls: one per LLM response**, as the SDK itself reads its events
back (``LLMConvertibleEvent.events_to_messages``): consecutive
``ActionEvent`` s with one ``llm_response_id`` are one response's parallel
tool calls (the SDK emits a response's actions before running them); an
agent's ``MessageEvent`` is a response without a tool call; a
``Condensation`` is the condenser's response (``purpose`` ``compaction``).
A response's tool calls are its actions' ``tool_call`` (name, id, arguments
as the model sent them); its text the first action's ``thought`` (the
message's ``llm_message.content``, the condensation's ``summary``).

**Usage** is the SDK's per-response ``TokenUsage`` in the state's
``stats.usage_to_metrics[usage id].token_usages``, matched by ``response_id``
in order (each entry to one call): an id need not be unique (Ollama's OpenAI
endpoint names a response ``chatcmpl-<0..998>``, some proxies send one id for
all), so the k-th response the events name with an id takes the k-th entry
recorded with it (the agent's usage id first; for a condensation, another's):
``prompt_tokens`` include the cache and
``completion_tokens`` the reasoning, as LiteLLM counts them
(:func:`sim.traces.usage.from_total_prompt`; the subtracted columns are
``derived``; an ACP agent that counts the cache apart is read so, run by run:
:func:`~sim.traces.usage.read_apart`). An entry no event names (a response the
SDK answered with a user message, such as a malformed tool call) is a call of
its own, placed after the call its usage id recorded before it (unless an
event's response has no id: the entry may be its). A response without an entry
(the telemetry records none for an all-zero usage; a restored conversation may
have lost them) has every count ``unknown``, and the run's totals are then the
``accumulated_token_usage`` summed over usage ids (:attr:`RunRecord.totals`;
a folded sub-agent's usage id aside: below).
Per call, ``latency_s`` is the ``response_latencies`` entry of its response id,
taken in order alike (else the time from the event before it, state updates and streamed tokens
aside: :data:`QUIET`); ``cost_usd`` the ``costs`` entry of its usage's index
when that usage id holds as many costs as token usages and latencies (the SDK
records a latency for every response but a cost without a response id, and
only a positive one: only then is the i-th cost the i-th usage's); ``model``
its usage's ``model`` (else the agent's ``llm.model``).

**Tool results** answer an action by ``tool_call_id``: an
``ObservationEvent`` (its ``observation.content`` text; an error when
``is_error`` is true, or when its ``exit_code`` / ``metadata.exit_code`` is an
integer other than 0 and -1, as for OpenHands' V0 commands), an
``AgentErrorEvent`` (the scaffold's ``error``: an error) or a
``UserRejectObservation`` (its ``rejection_reason``: an error); the duration
from the action to the result. A user's (or the environment's)
``MessageEvent`` after a call is that call's ``observation_tokens``.

**Run fields.** ``exit``: the final ``execution_status`` (the state's, else
the last ``execution_status`` update in the events): ``finished``, ``stuck``,
``paused``...; when it is ``error`` (or unknown), the ``code`` of the last
``ConversationErrorEvent`` (``MaxIterationsReached``, ``MaxBudgetReached``, an
exception's class name: :mod:`sim.calibration.exits` puts them on its scale).
``cost_usd``: the calls' costs (:func:`~sim.traces.assemble.run_cost`) when
every call has one, else the ``accumulated_cost`` summed over the
conversation's own usage ids (the SDK's recorded total; None when no usage id
recorded a cost: the SDK records none for a response it cannot price, so a
total of 0 is no price), plus its sub-agents' (below);
``step_limit`` the state's ``max_iterations``; ``cost_limit_usd`` the agent
usage's ``max_budget_per_task``, else the ``max_budget_per_run`` a
``MaxBudgetReached`` error names in its ``detail`` (:data:`BUDGET_DETAIL`: the
SDK keeps the run's budget nowhere else); the start and duration from the first and
last event timestamps; ``model`` the agent's ``llm.model`` (else its usage's
``model_name``). In an event list the stats and state are those of the last
``stats`` (or ``full_state``) update: the agent server sends snapshots
(``accumulated_token_usage`` without per-response lists), so its calls' usage
is unknown and the run holds the recorded totals.

**Sub-agents.** The ``task`` and ``delegate`` tools run a sub-agent as a
conversation of its own, persisted in ``<conversation>/subagents/<id>/``, and
copy its combined metrics into the parent's stats under the usage id
``task:<task id>`` / ``delegate:<agent id>`` (:data:`DELEGATED`). Such a
folder beside its parent's is no run of its own: its calls are the parent
run's, in time order, with ``agent`` the task or agent id (the delegated usage
id whose token usages' response ids are the sub-agent's, in order; else the
delegated usage ids no sub-agent matched, in order; else its conversation
id), and its cost and token totals are added to the parent's,
whose own are read from its other usage ids, so nothing is counted twice. A
delegated usage id with no such folder (an event list; a folder copied
without ``subagents/``) counts in the run's ``cost_usd`` and, when some call's
usage is unknown, in its token totals; its calls are not rows.

Not read: branches (an event's ``parent_id``; ``leaf_event_id`` names the
active branch): the events are taken in their log's order, every branch
included.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from sim.traces.assemble import number_or_none, requested_tool, run_cost, seconds, text_fields
from sim.traces.model import (
    TOKEN_COLUMNS,
    UNKNOWN,
    USAGE_ATTRIBUTES,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    approx_tokens,
    as_dict,
    as_list,
    content_text,
    joined_sha256,
    parse_utc,
    tool_result,
)
from sim.traces.openhands import failed_exit_code
from sim.traces.repairs import Repair
from sim.traces.skips import NO_TRAJECTORY, Skip, or_skip
from sim.traces.usage import derived, from_total_prompt, read_apart, unknown_usage

SOURCE = "openhands-sdk"
EVENT_KINDS = frozenset({
    "ActionEvent", "ObservationEvent", "MessageEvent", "AgentErrorEvent",
    "UserRejectObservation", "SystemPromptEvent", "SystemPromptUpdateEvent",
    "ConversationStateUpdateEvent", "ConversationErrorEvent", "Condensation",
    "CondensationRequest", "CondensationSummaryEvent", "PauseEvent", "InterruptEvent",
    "TokenEvent", "LLMCompletionLogEvent", "HookExecutionEvent", "ACPToolCallEvent",
    "StreamingDeltaEvent", "ServerErrorEvent"})
"""The ``kind`` of the SDK's events (``openhands.sdk.event``'s classes and the
agent server's); another kind ending in ``Event`` is taken as one too."""
SOURCES = frozenset({"agent", "user", "environment", "hook"})
"""An event's ``source`` (the SDK's ``SourceType``)."""
STATE_FILE = "base_state.json"
"""The file name of a conversation's state (the SDK's ``BASE_STATE``)."""
EVENTS_FOLDER = "events"
"""The folder of a conversation's event files (the SDK's ``EVENTS_DIR``)."""
EVENT_NAME = re.compile(r"^event-(?P<idx>\d{5,})-(?P<event_id>[0-9a-fA-F\-]{8,})\.json$")
"""An event file's name (the SDK's ``EVENT_NAME_RE``): its index orders the events."""
SUBAGENTS_FOLDER = "subagents"
"""Where a conversation's sub-agents (the ``task`` and ``delegate`` tools')
persist their own conversations: ``<conversation>/subagents/<id>/``."""
DELEGATED = ("task:", "delegate:")
"""How the usage ids begin under which the ``task`` and ``delegate`` tools
copy a sub-agent's combined metrics into its parent's stats
(``task:<task id>``, ``delegate:<agent id>``)."""
AGENT_USAGE = "default"
"""The agent LLM's usage id when the state does not name it (the SDK's default)."""
BUDGET_CODE = "MaxBudgetReached"
"""The ``code`` of the ``ConversationErrorEvent`` that ends a run at its
``max_budget_per_run``."""
BUDGET_DETAIL = re.compile(r"maximum budget limit \(\$(?P<usd>\d+(?:\.\d+)?)\)")
"""Where that event's ``detail`` names the budget (``LocalConversation``:
``"Agent reached maximum budget limit ($0.0150); accumulated cost
$0.0200."``, the budget to 4 decimals)."""
RESULTS = frozenset({"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})
"""The events that answer a tool call (``ObservationBaseEvent``'s kinds)."""

__all__ = ["AGENT_USAGE", "BUDGET_CODE", "BUDGET_DETAIL", "DELEGATED", "EVENTS_FOLDER",
           "EVENT_KINDS", "EVENT_NAME", "SOURCE", "SOURCES", "STATE_FILE", "SUBAGENTS_FOLDER",
           "Collector", "detect", "is_event", "runs"]


def is_event(value: Any) -> bool:
    """Whether ``value`` is one SDK event: a ``kind`` of :data:`EVENT_KINDS`
    (or another ``...Event``), a text ``id``, a ``timestamp`` and a
    ``source`` of :data:`SOURCES`."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    return isinstance(kind, str) and (kind in EVENT_KINDS or kind.endswith("Event")) \
        and isinstance(value.get("id"), str) and "timestamp" in value \
        and isinstance(value.get("source"), str) and value["source"] in SOURCES


def is_state(value: Any) -> bool:
    """Whether ``value`` is a conversation's ``base_state.json``."""
    return isinstance(value, dict) and "execution_status" in value and \
        isinstance(value.get("agent"), dict) and "id" in value and "stats" in value


def detect(values: list[Any]) -> str | None:
    """What a file's JSON ``values`` are: ``"event"`` (one event of a
    conversation folder), ``"state"`` (its ``base_state.json``), ``"events"``
    (JSON Lines of events, or one JSON list of them: a run), or None."""
    if len(values) == 1 and is_state(values[0]):
        return "state"
    if len(values) == 1 and is_event(values[0]):
        return "event"
    items = values[0] if len(values) == 1 and isinstance(values[0], list) else values
    if items and all(is_event(v) for v in items):
        return "events"
    return None


def runs(values: list[Any], file: str) -> Iterator[RunRecord | Skip]:
    """The run of an event list :func:`detect` recognised."""
    items = values[0] if len(values) == 1 and isinstance(values[0], list) else values
    yield or_skip(partial(read_apart, partial(_run, None, file, None, items, None, set())),
                  file)


class Collector:
    """The files of conversation folders (``base_state.json`` and
    ``events/event-NNNNN-ID.json``), gathered by conversation folder; each
    folder is one run (see the module)."""

    def __init__(self) -> None:
        self.events: dict[Path, dict[str, tuple[tuple[int, str], dict]]] = {}
        self.states: dict[Path, tuple[dict, str]] = {}
        self.files: dict[Path, str] = {}

    @property
    def sessions(self) -> set[Path]:
        """The conversation folders gathered."""
        return set(self.events) | set(self.states)

    def add(self, value: dict, path: Path, file: str) -> None:
        """Take the event or state read from the file at ``path`` (named ``file``)."""
        if is_state(value):
            self.states.setdefault(path.parent, (value, file))
            return
        in_events = path.parent.name == EVENTS_FOLDER
        folder = path.parent.parent if in_events else path.parent
        self.files.setdefault(folder, str(Path(file).parent.parent if in_events
                                          else Path(file).parent))
        match = EVENT_NAME.match(path.name)
        order = (int(match["idx"]) if match else -1, str(value.get("timestamp", "")))
        self.events.setdefault(folder, {}).setdefault(str(value.get("id")), (order, value))

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per conversation folder, in folder order; a sub-agent's
        folder (``<conversation>/subagents/<id>/``) is folded into its
        parent's run (see the module)."""
        owners = {folder: folder.parent.parent for folder in self.sessions
                  if folder.parent.name == SUBAGENTS_FOLDER
                  and folder.parent.parent in self.sessions}
        for folder in sorted(self.sessions):
            if folder not in owners:
                yield from self._runs(folder, owners)

    def _runs(self, folder: Path, owners: dict[Path, Path]) -> Iterator[RunRecord | Skip]:
        """The run of the conversation in ``folder`` with its sub-agents'
        calls folded in, after the Skip of any sub-agent that cannot be read."""
        state, state_file = self.states.get(folder, (None, None))
        held = self.events.get(folder, {})
        events = [event for _, event in sorted(held.values(), key=lambda kv: kv[0])]
        file = state_file or self.files.get(folder, str(folder))
        run_id = str(state["id"]) if state is not None and _named(state.get("id")) \
            else folder.name
        subs: list[tuple[str | None, RunRecord]] = []
        mine = sorted(sub for sub, owner in owners.items() if owner == folder)
        names = _delegated_names(state, [self.states.get(sub, ({}, None))[0] for sub in mine])
        for sub, name in zip(mine, names, strict=True):
            for record in self._runs(sub, owners):
                if isinstance(record, Skip):
                    yield record
                else:
                    subs.append((name, record))
        if not events:
            yield Skip(file, NO_TRAJECTORY, f"a conversation state without its "
                                            f"{EVENTS_FOLDER}/ folder", run_id)
            return
        folded = {name for name, _ in subs if name is not None}
        yield or_skip(partial(_folded, partial(read_apart, partial(
            _run, state, file, run_id, events, state_file, folded)), subs), file, run_id)


def _named(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and str(value) != ""


def _response_ids(metrics: Any) -> list[str]:
    """The response ids of a ``usage_to_metrics``' token usages, usage id by
    usage id (the order ``get_combined_metrics`` merges them in)."""
    return [str(as_dict(entry).get("response_id")) for metric in as_dict(metrics).values()
            for entry in as_list(as_dict(metric).get("token_usages"))]


def _delegated_names(parent: dict | None, subs: list[dict]) -> list[str | None]:
    """For each sub-agent's state, the usage id under which its parent's stats
    hold its combined metrics (the one whose token usages' response ids are
    the sub-agent's, in order), each taken once; the sub-agents no usage id
    matches then take the usage ids left, in order (the ids' and the folders'
    names both follow the order the sub-agents were made), so that a folded
    sub-agent's record in its parent is never counted beside its own; None
    when no usage id is left."""
    held = {str(k): _response_ids({k: v}) for k, v in as_dict(as_dict(as_dict(parent).get(
        "stats")).get("usage_to_metrics")).items() if str(k).startswith(DELEGATED)}
    names: list[str | None] = []
    for sub in subs:
        ids = _response_ids(as_dict(as_dict(sub).get("stats")).get("usage_to_metrics"))
        name = next((k for k, v in held.items() if v == ids and ids), None)
        if name is not None:
            del held[name]
        names.append(name)
    left = iter(sorted(held))
    return [name if name is not None else next(left, None) for name in names]


def _folded(read: Callable[[], RunRecord], subs: list[tuple[str | None, RunRecord]]
            ) -> RunRecord:
    """The run ``read()`` with its sub-agents' runs folded in: their calls in
    time order among its own, ``agent`` the sub-agent's name (its usage id
    less the ``task:`` / ``delegate:`` prefix, else its run id), their costs
    and token totals added to its own."""
    run = read()
    if not subs:
        return run
    parts = [(run, None), *((record, run.started_at) for _, record in subs)]
    streams = []
    for (record, _), (name, _) in zip(parts, [(None, None), *subs], strict=True):
        offset = seconds(record.started_at, run.started_at) or 0.0
        agent = None if record is run else (name.split(":", 1)[1] if name else record.run_id)
        keyed: list[tuple[float, CallRecord]] = []
        key = offset
        for call in record.calls:  # a call without a start keeps the one before it
            start = None if call.started_s is None else offset + call.started_s
            key = key if start is None else start
            keyed.append((key, replace(call, started_s=start, agent=call.agent or agent)))
        streams.append(keyed)
    calls = [call for _, call in heapq.merge(*streams, key=lambda kc: kc[0])]
    ends = [r.started_at + timedelta(seconds=r.duration_s) for r, _ in parts
            if r.started_at is not None and r.duration_s is not None]
    starts = [r.started_at for r, _ in parts if r.started_at is not None]
    costs = [r.cost_usd for r, _ in parts if r.cost_usd is not None]
    totals = None
    if any(c.provenance.get("input_tokens") == UNKNOWN for c in calls):
        totals = dict.fromkeys(TOKEN_COLUMNS, 0)
        for record, _ in parts:
            for column, attribute in USAGE_ATTRIBUTES.items():
                totals[column] += record.totals[column] if record.totals is not None else \
                    sum(getattr(c.usage, attribute) for c in record.calls)
    first = min(starts) if starts else None
    return replace(run, calls=calls, cost_usd=sum(costs) if costs else None, totals=totals,
                   started_at=first, duration_s=seconds(max(ends), first) if ends else
                   run.duration_s, repairs=run.repairs + [
                       note for record, _ in parts[1:] for note in record.repairs])


@dataclass
class _Tool:
    """A tool call of a response, and its result once one answers it."""

    name: Any
    id: str | None
    arguments: Any
    asked: datetime | None
    result: tuple[int | None, str | None, bool | None] = (None, None, None)
    duration_s: float | None = None


@dataclass
class _Call:
    """One LLM response while its events are read."""

    response: str | None
    purpose: str | None
    text: str | None
    started_s: float | None
    waited_s: float | None
    tools: list[_Tool] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)  # the messages after it


def _run(state: dict | None, file: str, run_id: str | None, events: list,
         state_file: str | None, folded: set[str], apart: tuple[bool, bool]) -> RunRecord:
    """A conversation's run from its state (None for an event list) and events;
    ``folded`` the usage ids of the sub-agents whose own conversations are
    folded into it (their records are theirs, not counted here)."""
    reader = _Events()
    for event in events:
        if isinstance(event, dict):
            reader.read(event)
    whole = state if state is not None else reader.full_state
    where = f"{state_file}: stats" if state_file else "the last stats update"
    stats = as_dict(whole.get("stats")) if state is not None else reader.stats
    metrics = {str(k): as_dict(v) for k, v in as_dict(stats.get("usage_to_metrics")).items()}
    agent_llm = as_dict(as_dict(whole.get("agent")).get("llm"))
    usage_id = agent_llm["usage_id"] if isinstance(agent_llm.get("usage_id"), str) \
        else AGENT_USAGE
    model = agent_llm.get("model", as_dict(metrics.get(usage_id)).get("model_name"))
    model = model if isinstance(model, str) and model else None
    notes: list[Repair] = []
    own = {k: v for k, v in metrics.items() if not k.startswith(DELEGATED)}
    counted = {k: v for k, v in metrics.items() if k not in folded}
    usages = _Usages(own, where, notes, apart, usage_id)
    calls = usages.calls(reader.calls, model)
    status = whole.get("execution_status", reader.status)
    exit_label = None if status is None else str(status)
    if exit_label in (None, "error") and reader.error_code is not None:
        exit_label = reader.error_code
    moments = [m for m in reader.moments if m is not None]
    first, last = (min(moments), max(moments)) if moments else (None, None)
    if run_id is None:
        run_id = str(whole["id"]) if _named(whole.get("id")) else file
    limit = number_or_none(as_dict(metrics.get(usage_id)).get("max_budget_per_task"))
    cost = run_cost(calls)
    cost = cost if cost is not None else _recorded_cost(own)
    delegated = _recorded_cost({k: v for k, v in counted.items() if k not in own})
    if delegated is not None:
        cost = (cost or 0.0) + delegated
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls, model=model or next(
            (c.model for c in calls if c.model), None),
        cost_usd=cost,
        exit=exit_label, started_at=first, duration_s=seconds(last, first),
        step_limit=number_or_none(whole.get("max_iterations")),  # type: ignore[arg-type]
        cost_limit_usd=limit if limit is not None else reader.budget,
        repairs=notes, totals=usages.totals(calls, counted))


def _recorded_cost(metrics: dict[str, dict]) -> float | None:
    """The ``accumulated_cost`` summed over usage ids; None when no usage id
    recorded a cost (the SDK adds only positive costs, and none when it
    cannot price a response: a total of 0 says unpriced as well as free)."""
    recorded = [number_or_none(m.get("accumulated_cost")) for m in metrics.values()]
    known = [c for c in recorded if c is not None]
    if not any(known) and not any(as_list(m.get("costs")) for m in metrics.values()):
        return None
    return sum(known)


QUIET = frozenset({"ConversationStateUpdateEvent", "TokenEvent", "StreamingDeltaEvent",
                   "LLMCompletionLogEvent"})
"""Events that report on a step rather than take one (state and stats
updates, streamed tokens, completion logs): a call's start and fallback
latency are measured from the event before it that is none of these."""


class _Events:
    """A conversation's events read in order into responses (see the module)."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_tool_id: dict[str, _Tool] = {}
        self.moments: list[datetime | None] = []
        self.previous: datetime | None = None
        self.status: Any = None
        self.error_code: str | None = None
        self.budget: float | None = None  # the run's budget a MaxBudgetReached names
        self.stats: dict = {}
        self.full_state: dict = {}
        self.open: str | None = None  # the response of the actions just read

    def read(self, event: dict) -> None:
        """Take one event."""
        moment = parse_utc(event.get("timestamp"))
        self.moments.append(moment)
        kind = event["kind"] if isinstance(event.get("kind"), str) else None
        source = event.get("source")
        if kind == "ActionEvent":
            self._action(event, moment)
        elif kind == "MessageEvent" and source == "agent":
            self._response(event, None, moment, content_text(
                as_dict(event.get("llm_message")).get("content")))
        elif kind == "MessageEvent" and self.calls:
            self.calls[-1].texts.append(content_text(
                as_dict(event.get("llm_message")).get("content")))
        elif kind == "Condensation" and _named(event.get("llm_response_id")):
            self._response(event, "compaction", moment, content_text(event.get("summary")))
        elif kind in RESULTS:
            self._result(event, str(kind), moment)
        elif kind == "ConversationStateUpdateEvent":
            self._update(event)
        elif kind == "ConversationErrorEvent" and isinstance(event.get("code"), str):
            self.error_code = event["code"]
            found = BUDGET_DETAIL.search(event["detail"]) \
                if isinstance(event.get("detail"), str) else None
            if event["code"] == BUDGET_CODE and found:
                self.budget = float(found["usd"])
        if kind != "ActionEvent" and kind in RESULTS | {"MessageEvent", "Condensation",
                                                       "SystemPromptEvent",
                                                       "CondensationSummaryEvent"}:
            self.open = None  # an event the model reads ends a response's actions
        if kind not in QUIET:
            self.previous = moment or self.previous

    def _start(self) -> datetime | None:
        return next((m for m in self.moments if m is not None), None)

    def _response(self, event: dict, purpose: str | None, moment: datetime | None,
                  text: str | None) -> _Call:
        rid = event.get("llm_response_id")
        call = _Call(str(rid) if _named(rid) else None, purpose, text,
                     seconds(self.previous, self._start()), seconds(moment, self.previous))
        self.calls.append(call)
        return call

    def _action(self, event: dict, moment: datetime | None) -> None:
        rid = event.get("llm_response_id")
        rid = str(rid) if _named(rid) else None
        if rid is not None and rid == self.open and self.calls:
            call = self.calls[-1]  # a parallel tool call of the same response
        else:
            call = self._response(event, None, moment, content_text(event.get("thought")))
        self.open = rid
        request = as_dict(event.get("tool_call"))
        name = request.get("name", event.get("tool_name"))
        tool_id = request.get("id", event.get("tool_call_id"))
        tool = _Tool(name, None if tool_id is None else str(tool_id),
                     request.get("arguments"), moment)
        call.tools.append(tool)
        if tool.id is not None:
            self.by_tool_id[tool.id] = tool

    def _result(self, event: dict, kind: str, moment: datetime | None) -> None:
        tool_id = event.get("tool_call_id")
        tool = self.by_tool_id.pop(str(tool_id), None) if _named(tool_id) else None
        if tool is None:
            return
        if kind == "ObservationEvent":
            observation = as_dict(event.get("observation"))
            text = content_text(observation.get("content"))
            error = _failed(observation)
        else:
            value = event.get("error" if kind == "AgentErrorEvent" else "rejection_reason")
            text, error = (value if isinstance(value, str) else None), True
        tool.result = tool_result(text, error=error)
        tool.duration_s = seconds(moment, tool.asked)

    def _update(self, event: dict) -> None:
        key, value = event.get("key"), event.get("value")
        if key == "execution_status":
            self.status = value
        elif key == "stats" and isinstance(value, dict):
            self.stats = value
        elif key == "full_state" and isinstance(value, dict):
            self.full_state = value
            self.stats = as_dict(value.get("stats")) or self.stats
            self.status = value.get("execution_status", self.status)


def _failed(observation: dict) -> bool:
    """Whether an observation is an error: ``is_error``, else a command's exit
    code other than 0 and -1 (unknown)."""
    if observation.get("is_error") is True:
        return True
    code = observation.get("exit_code")
    if code is None:
        code = as_dict(observation.get("metadata")).get("exit_code")
    return failed_exit_code(code)


class _Usages:
    """The per-response records of a conversation's ``usage_to_metrics``."""

    def __init__(self, metrics: dict[str, dict], where: str, notes: list[Repair],
                 apart: tuple[bool, bool], agent: str = AGENT_USAGE) -> None:
        self.metrics, self.where, self.notes, self.apart = metrics, where, notes, apart
        self.agent = agent  # the agent LLM's usage id
        # per response id, its usage entries (usage id, index) and its latencies
        # (usage id, seconds), each in the order the SDK recorded them
        self.by_response: dict[str, list[tuple[str, int]]] = {}
        self.latencies: dict[str, list[tuple[str, float | None]]] = {}
        for usage_id, metric in metrics.items():
            for index, entry in enumerate(as_list(metric.get("token_usages"))):
                rid = as_dict(entry).get("response_id")
                if _named(rid):
                    self.by_response.setdefault(str(rid), []).append((usage_id, index))
            for entry in as_list(metric.get("response_latencies")):
                rid = as_dict(entry).get("response_id")
                if _named(rid):
                    self.latencies.setdefault(str(rid), []).append(
                        (usage_id, number_or_none(entry.get("latency"))))

    def _take(self, held: list, usage_id: str | None, purpose: str | None) -> Any:
        """Take (remove and return) from ``held`` (one response id's entries,
        in recorded order) the first of usage id ``usage_id`` (when given),
        else the first of the agent's usage id (of another for a condenser's
        response), else the first; None when ``held`` is empty."""
        if usage_id is not None:
            fits = [k for k, item in enumerate(held) if item[0] == usage_id]
        else:
            compaction = purpose == "compaction"
            fits = [k for k, item in enumerate(held) if (item[0] == self.agent) != compaction]
        return held.pop(fits[0] if fits else 0) if held else None

    def calls(self, read: list[_Call], model: str | None) -> list[CallRecord]:
        """The calls of the responses ``read`` from the events, each with its
        recorded usage, and the usage entries no event names as calls of
        their own, in their place (see the module)."""
        entries = {rid: list(held) for rid, held in self.by_response.items()}
        latencies = {rid: list(held) for rid, held in self.latencies.items()}
        taken: dict[tuple[str, int], int] = {}  # (usage id, index) -> position in read
        waits: dict[int, float | None] = {}  # position in read -> recorded latency
        for position, call in enumerate(read):
            if call.response is None:
                continue
            found = self._take(entries.get(call.response, []), None, call.purpose)
            if found is not None:
                taken[found] = position
            latency = self._take(latencies.get(call.response, []),
                                 None if found is None else found[0], call.purpose)
            if latency is not None:
                waits[position] = latency[1]
        after: dict[int, list[tuple[str, int]]] = {}  # position -> entries placed after it
        blind = any(call.response is None for call in read)  # it may be any unnamed entry
        for usage_id, metric in ({} if blind else self.metrics).items():
            usages = as_list(metric.get("token_usages"))
            if not any((usage_id, i) in taken for i in range(len(usages))):
                continue  # no event names this LLM's responses: not the run's calls
            anchor = -1
            for index in range(len(usages)):
                if (usage_id, index) in taken:
                    anchor = taken[(usage_id, index)]
                else:
                    after.setdefault(anchor, []).append((usage_id, index))
        by_position = {position: key for key, position in taken.items()}

        def own(key: tuple[str, int]) -> CallRecord:  # an entry no event names
            rid = as_dict(as_list(self.metrics[key[0]].get("token_usages"))[key[1]]
                          ).get("response_id")
            latency = self._take(latencies.get(str(rid), []), key[0], None) \
                if _named(rid) else None
            return self._call(None, key, model, None if latency is None else latency[1])

        out = [own(key) for key in after.get(-1, [])]
        for position, call in enumerate(read):
            out.append(self._call(call, by_position.get(position), model, waits.get(position)))
            out.extend(own(key) for key in after.get(position, []))
        return out

    def _call(self, call: _Call | None, found: tuple[str, int] | None,
              model: str | None, latency: float | None) -> CallRecord:
        """One call: a response read from the events (None: a usage entry no
        event names), with its usage entry ``found`` (usage id, index) and its
        recorded ``latency``."""
        cost = None
        if found is None:
            usage, provenance = unknown_usage()
        else:
            usage_id, index = found
            metric = self.metrics[usage_id]
            entries = as_list(metric.get("token_usages"))
            entry = as_dict(entries[index])
            usage, provenance = self._usage(
                entry, f"{self.where}.usage_to_metrics.{usage_id}.token_usages[{index}]")
            costs = as_list(metric.get("costs"))
            if len(costs) == len(entries) == len(as_list(metric.get("response_latencies"))):
                cost = number_or_none(as_dict(costs[index]).get("cost"))
            if isinstance(entry.get("model"), str) and entry["model"]:
                model = entry["model"]
        if call is None:
            return CallRecord(usage=usage, model=model, cost_usd=cost, latency_s=latency,
                              provenance=provenance)
        tools = [ToolCallRecord(
            name=t.name, id=t.id, arguments=requested_tool(t.name, t.id, t.arguments).arguments,
            result_tokens=t.result[0], result_sha256=t.result[1], error=t.result[2],
            duration_s=t.duration_s) for t in call.tools]
        return CallRecord(
            usage=usage, model=model, cost_usd=cost, started_s=call.started_s,
            latency_s=latency if latency is not None else call.waited_s,
            tool_calls=tools, purpose=call.purpose, provenance=provenance,
            observation_tokens=sum(approx_tokens(t) for t in call.texts),
            observation_sha256=joined_sha256(call.texts), **text_fields(call.text))

    def _usage(self, entry: dict, where: str) -> tuple[Usage, dict[str, str]]:
        """A ``TokenUsage`` (prompt including the cache, completion including
        reasoning) and its provenance."""
        prompt, output = entry.get("prompt_tokens", 0), entry.get("completion_tokens", 0)
        usage = from_total_prompt(prompt, output, cache_read=entry.get("cache_read_tokens"),
                                  cache_write=entry.get("cache_write_tokens"),
                                  reasoning=entry.get("reasoning_tokens"), where=where,
                                  notes=self.notes, cache_apart=self.apart[0],
                                  reasoning_apart=self.apart[1])
        return usage, derived(usage, prompt, output, where)

    def totals(self, calls: list[CallRecord], metrics: dict[str, dict]) -> dict[str, int] | None:
        """The conversation's recorded token totals (``accumulated_token_usage``
        summed over the usage ids of ``metrics``), when some call's usage is
        unknown."""
        if not any(c.provenance.get("input_tokens") == UNKNOWN for c in calls):
            return None
        sums = dict.fromkeys(TOKEN_COLUMNS, 0)
        found = False
        for usage_id, metric in metrics.items():
            entry = as_dict(metric.get("accumulated_token_usage"))
            if not entry:
                continue
            usage, _ = self._usage(entry, f"{self.where}.usage_to_metrics.{usage_id}"
                                          ".accumulated_token_usage")
            found = True
            sums["input_tokens"] += usage.input_tokens
            sums["cache_read_tokens"] += usage.cache_read_tokens
            sums["cache_write_tokens"] += usage.cache_write_tokens
            sums["output_tokens"] += usage.output_tokens
            sums["reasoning_tokens"] += usage.thinking_tokens
        return sums if found else None
