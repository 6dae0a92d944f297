"""OpenHands event streams: saved trajectories and evaluation ``output.jsonl``.

Two shapes are recognised by content (checked against OpenHands' own
serialisation, ``openhands/events/serialization/event.py`` ``event_to_dict``,
``openhands/llm/metrics.py`` and ``evaluation/benchmarks/swe_bench``):

- a **trajectory** (``save_trajectory_path``, the GUI's export): a JSON list of
  events, each a dict with ``source`` (``agent``, ``user``, ``environment``)
  and ``action`` or ``observation``; the older evaluation history, a list of
  ``[action, observation]`` pairs, is read as the same events in order. One
  file is one run, named by its file.
- a session's **event store** (``sessions/SID/events/N.json``, one event per
  file; :class:`Collector`): one run per session, ``run_id`` its SID; the
  store's ``event_cache/`` pages (the same events again), its
  ``metadata.json`` and ``log_completions``' files are companions. (A store
  inside a Harbor trial is the run of the trial's ATIF trajectory:
  :func:`sim.traces.harbor.converted`.)
- an **evaluation output** (``output.jsonl``, and eval_infer's
  ``output.swebench_eval.jsonl``): one JSON line per instance with
  ``instance_id``, ``history`` (the event list), ``metrics``
  (``Metrics.get()``: ``accumulated_cost``, ``costs``, ``response_latencies``,
  ``token_usages``, ``accumulated_token_usage``), ``metadata``
  (``llm_config.model``, ``max_iterations``), ``test_result`` (with
  ``report.resolved`` once evaluated) and ``error``. One line is one run,
  ``run_id`` and ``task_id`` its ``instance_id``. eval_infer copies every line
  into ``output.swebench_eval.jsonl`` with its verdict: a line whose run was
  already imported with the same calls (:func:`rewritten`) gives that run its
  verdict and the file is a companion, not a duplicate.

**Model calls.** An agent action carrying ``tool_call_metadata`` holds the
LiteLLM ``model_response`` it came from; parallel tool calls give one action
each, sharing one response id: **one call per response**, whose tool calls are
the response's own ``tool_calls`` (name, id, arguments). A response's actions
follow one another, only their observations between, so an action joins the
call of the action before it when their response ids are equal, and an id met
again later is a new response (ids need not be unique: Ollama's OpenAI
endpoint names a response ``chatcmpl-<0..998>``, some proxies send one id for
all). Its usage is the
response's OpenAI-style ``usage`` (:func:`sim.traces.usage.from_openai`:
``prompt_tokens`` include the cache, read from
``prompt_tokens_details.cached_tokens`` or ``cache_read_input_tokens``,
written from ``cache_creation_input_tokens``; ``completion_tokens`` include
``completion_tokens_details.reasoning_tokens``), so the uncached input and the
output without reasoning are ``derived`` where a cache or reasoning count was
subtracted. An agent action without that metadata (a ``message`` that answers
without calling a tool; any action of a non-function-calling agent) is a model
call whose usage the event stream does not record: its token columns are
``unknown``, unless the evaluation output's ``token_usages`` has an entry for
it (matched by ``response_id`` in order: the k-th call with an id takes the
k-th entry with it; the entries no action names, in order, go to
the calls without a response when there are exactly as many and no condenser
ran, whose calls are in ``token_usages`` too; OpenHands'
``TokenUsage.prompt_tokens`` is LiteLLM's ``prompt_tokens``, the cache
included, so the input is derived there too). Agent actions that are not model
replies (:data:`NOT_CALLS`: the system prompt, state changes, condensation,
recall) are not calls. But a condenser's model calls are: its entries follow
the agent's in ``token_usages`` (``get_metrics`` combines the agent LLM's
metrics with the condenser LLM's) and no action names them, so once a
condenser ran and every call has a response id, the entries no call took are
calls of ``purpose`` ``compaction`` (usage, cost, latency as above; text the
summary), the k-th at the k-th ``condensation`` action (any more at the last;
at the end when there is none). When some call's usage is unknown, the run's totals are
the ``accumulated_token_usage`` the source records (the output's ``metrics``,
else the last event's ``llm_metrics``), in :attr:`RunRecord.totals`.

Per call: ``latency_s`` from ``response_latencies`` (by response id, in
order alike), else
from the event before the action to the action; ``cost_usd`` from ``costs``
only when there are as many costs as token usages (OpenHands records one of
each per completion, without an id on the cost); the finish reason of the
response's first choice. A non-function-calling action is one tool call named
by its action type, with its ``args`` (less the ``thought``) as arguments.

**Observations** answer tool calls by ``tool_call_metadata.tool_call_id``, else
by ``cause`` (the action's event ``id``): the result is the observation's
``content``; an error when the observation is ``error``, when its ``success``
is false, or when its command's ``extras.metadata.exit_code`` is neither 0 nor
-1 (unknown); the tool's duration from its action to its observation. A
user's ``message`` after a call, and an ``error`` observation answering no
tool, are the call's ``observation_tokens``. The calls between a
``delegate`` action and its ``delegate`` observation are the delegated
agent's (the history holds its events too): ``agent`` is its name (the
action's ``args.agent``).

Run fields: ``cost_usd`` the ``accumulated_cost``; ``exit`` the last
``agent_state_changed`` state (``finished``, ``error``, ``stopped``...)
verbatim (for ``error``, the ``extras.reason`` the controller records with it
when it has one: :data:`ERROR_STATE`), else the output line's ``error`` (an
error or reason as :func:`~sim.traces.assemble.exit_label`: its first line, at
most 200 characters), else
the state the controller sets when the last action of the run's own agent (not
a delegate's) is ``finish`` or ``reject`` (``finished``, ``rejected``;
:data:`ENDING_ACTIONS`): an evaluation output's ``history`` and a saved
trajectory are the agent's history, from which OpenHands leaves the state
changes out, so without this every run that finished would have no exit;
``resolved`` from ``test_result.report.resolved`` (or a top-level
``report.resolved`` / ``resolved``); ``step_limit`` the metadata's
``max_iterations``; ``cost_limit_usd`` the metrics' ``max_budget_per_task``;
the start and duration from the first and last event timestamps (OpenHands
writes local times without a zone: taken as UTC). """

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from sim.traces.assemble import exit_label, number_or_none, openai_tool, seconds
from sim.traces.model import (
    TOKEN_COLUMNS,
    UNKNOWN,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    approx_tokens,
    as_dict,
    as_list,
    canonical_json,
    content_text,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.repairs import Repair
from sim.traces.skips import NO_TRAJECTORY, Skip, Unusable, or_skip
from sim.traces.usage import derived, from_openai, from_total_prompt, read_apart

SOURCE = "openhands"
NOT_CALLS = frozenset({"system", "change_agent_state", "condensation",
                       "condensation_request", "recall", "null"})
"""Agent actions that are not a model's reply (OpenHands' ``ActionType``)."""
ENDING_ACTIONS = {"finish": "finished", "reject": "rejected"}
"""The agent actions on which OpenHands' controller ends a run, and the
``AgentState`` it sets (``AgentFinishAction``, ``AgentRejectAction``)."""
ERROR_STATE = "error"
"""The ``AgentState`` OpenHands' controller sets when a run stops on an
exception; the state change then carries ``extras.reason`` (its
``last_error``: ``RuntimeError: Agent reached maximum iteration...`` for the
iteration limit, ``...maximum budget...`` for the budget, an LLM fault's
status otherwise), which is the run's exit in its place."""
CACHE_FOLDER = "event_cache"
"""Where a session's store keeps pages of its events (``START-END.json``)."""

__all__ = ["CACHE_FOLDER", "ENDING_ACTIONS", "ERROR_STATE", "NOT_CALLS", "SOURCE", "Collector",
           "detect", "failed_exit_code", "rewritten", "runs", "take_verdict"]


def detect(values: list[Any], path: Path | None = None) -> str | None:
    """What the JSON ``values`` of a file at ``path`` are: ``"events"`` (one
    JSON list of events or ``[action, observation]`` pairs), ``"output"``
    (evaluation output lines), ``"event"`` (one event of a session's store),
    ``"cache-page"`` (an event list in the store's ``event_cache/``),
    ``"metadata"`` (a session's ``metadata.json``, or a completion that
    ``log_completions`` wrote: the same call as an event's), or None."""
    if len(values) == 1 and isinstance(values[0], list) and values[0]:
        events = _flatten(values[0])
        if events is not None and all(_is_event(e) for e in events):
            in_cache = path is not None and path.parent.name == CACHE_FOLDER
            return "cache-page" if in_cache else "events"
        return None
    if len(values) == 1 and _is_event(values[0]) and "id" in values[0]:
        return "event"
    if len(values) == 1 and isinstance(values[0], dict) and (
            {"conversation_id", "selected_repository"} <= values[0].keys()
            or {"messages", "response", "kwargs", "timestamp", "cost"} <= values[0].keys()):
        return "metadata"
    if values and all(isinstance(v, dict) and "instance_id" in v and "history" in v
                      and ("metrics" in v or "test_result" in v) for v in values):
        return "output"
    return None


def _is_event(item: Any) -> bool:
    """Whether ``item`` is an OpenHands (V0) event: an ``action`` or
    ``observation`` that names the type (the V1 SDK's events carry an object
    there, and a ``kind``: :mod:`sim.traces.openhands_sdk`)."""
    return isinstance(item, dict) and ("action" in item or "observation" in item) \
        and item.get("source") in ("agent", "user", "environment") and "kind" not in item \
        and not isinstance(item.get("action"), dict) \
        and not isinstance(item.get("observation"), dict)


def _flatten(items: list) -> list | None:
    """The events of a history: as they are, or the ``[action, observation]``
    pairs of the older format flattened in order; None when neither."""
    if all(isinstance(i, dict) for i in items):
        return items
    if all(isinstance(i, list) and len(i) == 2 and all(isinstance(e, dict) for e in i)
           for i in items):
        return [e for pair in items for e in pair if e]
    return None


def runs(values: list[Any], file: str) -> Iterator[RunRecord | Skip]:
    """The runs of a file :func:`detect` recognised."""
    if detect(values) == "events":
        yield read_apart(partial(_run, file, file, None, _flatten(values[0]) or [], {}))
        return
    for index, line in enumerate(values):
        run_id = str(line.get("instance_id", f"line {index + 1}"))
        yield or_skip(partial(_line_run, run_id, file, line), file, run_id)


class Collector:
    """The events of sessions' stores (``sessions/SID/events/N.json``: one
    event per file, as OpenHands' ``EventStream`` writes them), gathered by
    folder; each session is one run, ``run_id`` its ``SID``, its events in
    ``id`` order (an id met twice counts once)."""

    def __init__(self) -> None:
        self.sessions: dict[Path, dict[Any, dict]] = {}
        self.files: dict[Path, str] = {}

    def add(self, event: dict, path: Path, file: str) -> None:
        """Take the event read from the file at ``path``."""
        folder = path.parent
        self.sessions.setdefault(folder, {}).setdefault(_key(event.get("id")), event)
        self.files.setdefault(folder, str(Path(file).parent))

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per session, in folder order."""
        for folder in sorted(self.sessions):
            events = [self.sessions[folder][k] for k in sorted(self.sessions[folder])]
            file = self.files[folder]
            session = folder.parent.name if folder.name == "events" else folder.name
            yield or_skip(partial(read_apart, partial(_run, session, file, None, events, {})),
                          file, session)


def _scalar(value: Any) -> bool:
    """Whether an event's ``id`` or ``cause`` can name an event (a number or a
    string; anything else in an untrusted file names none)."""
    return isinstance(value, int | str) and not isinstance(value, bool)


def _key(event_id: Any) -> tuple[int, int, str]:
    """An order of event ids: integers by value, then anything else by text."""
    if isinstance(event_id, int) and not isinstance(event_id, bool):
        return (0, event_id, "")
    return (1, 0, str(event_id))


def rewritten(row: dict[str, Any], record: RunRecord) -> bool:
    """Whether ``record`` is the run of an imported ``row`` written again:
    eval_infer copies each line of ``output.jsonl`` into
    ``output.swebench_eval.jsonl``, adding the verdict (same instance, same
    calls). The importer then reads the second as a companion, not a
    duplicate."""
    return (row.get("source") == SOURCE and record.source == SOURCE
            and row.get("run_id") == record.run_id and row.get("steps") == len(record.calls))


def take_verdict(row: dict[str, Any], record: RunRecord) -> None:
    """Give ``row`` the verdict of its copy ``record`` when it has none."""
    if row.get("resolved") is None and record.resolved is not None:
        row["resolved"] = record.resolved


def _line_run(run_id: str, file: str, line: dict) -> RunRecord:
    """The run of an evaluation output's line (its ``history`` the events)."""
    history = line.get("history")
    events = _flatten(history) if isinstance(history, list) else None
    if events is None:
        raise Unusable(NO_TRAJECTORY, f"history is {type(history).__name__}, not "
                                      "a list of events")
    return read_apart(partial(_run, run_id, file, run_id, events, line))


def _run(run_id: str, file: str, task: str | None, events: list, line: dict,
         apart: tuple[bool, bool]) -> RunRecord:
    metrics = as_dict(line.get("metrics"))
    if not metrics:  # a saved trajectory: the metrics the last action carries
        carried = [as_dict(e.get("llm_metrics")) for e in events if isinstance(e, dict)]
        metrics = next((m for m in reversed(carried) if m), {})
    stream = _Stream(metrics, apart)
    for event in events:
        if isinstance(event, dict):
            stream.read(event)
    calls = stream.finish()
    metadata = as_dict(line.get("metadata"))
    model = as_dict(metadata.get("llm_config")).get("model")
    if not isinstance(model, str):
        model = next((c.model for c in calls if c.model), None)
    limit: Any = number_or_none(metadata.get("max_iterations"))  # the writer checks it
    ended = stream.state if stream.state is not None else (
        exit_label(line["error"]) if isinstance(line.get("error"), str) else stream.ended)
    starts = [m for m in stream.moments if m is not None]
    first, last = (min(starts), max(starts)) if starts else (None, None)
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=task, model=model,
        cost_usd=number_or_none(metrics.get("accumulated_cost")), exit=ended,
        resolved=_resolved(line), started_at=first, duration_s=seconds(last, first),
        step_limit=limit,
        cost_limit_usd=number_or_none(metrics.get("max_budget_per_task")),
        repairs=stream.notes, totals=stream.totals())


def _resolved(line: dict) -> bool | None:
    for holder in (as_dict(as_dict(line.get("test_result")).get("report")),
                   as_dict(line.get("report")), line):
        verdict = holder.get("resolved")
        if isinstance(verdict, bool):
            return verdict
    return None


class _Stream:
    """A run's events read in order into calls (see the module)."""

    def __init__(self, metrics: dict, apart: tuple[bool, bool]) -> None:
        self.metrics, self.apart = metrics, apart
        self.notes: list[Repair] = []
        self.calls: list[CallRecord] = []
        self.texts: list[list[str | None]] = []  # per call, the messages after it
        self.open: str | None = None  # the response id of the action just read
        self.responses: list[str | None] = []  # per call, its response id
        self.by_tool_id: dict[str, tuple[ToolCallRecord, datetime | None]] = {}
        self.by_event: dict[Any, tuple[ToolCallRecord, datetime | None]] = {}
        self.moments: list[datetime | None] = []
        self.previous: datetime | None = None
        self.state: str | None = None
        self.ended: str | None = None  # the state the last top-level action ended the run in
        self.condensed = False  # a condenser ran: its model calls are in token_usages too
        # per condensation action: the calls before it, its start, wait, summary and agent
        self.condensations: list[tuple[int, float | None, float | None, str | None,
                                       str | None]] = []
        self.delegates: list[str] = []  # the agents delegated to and not yet back, innermost last
        self.latencies: dict[str, list[float | None]] = {}  # by response id, in order
        for entry in as_list(metrics.get("response_latencies")):
            if isinstance(entry, dict):
                self.latencies.setdefault(str(entry.get("response_id")), []).append(
                    number_or_none(entry.get("latency")))

    @property
    def start(self) -> datetime | None:
        return next((m for m in self.moments if m is not None), None)

    def read(self, event: dict) -> None:
        """Take one event: a model call, a tool's answer, a user's message."""
        moment = parse_utc(event.get("timestamp"))
        self.moments.append(moment)
        source, action = event.get("source"), event.get("action")
        if "action" in event:
            self.condensed |= action in ("condensation", "condensation_request")
            if action == "condensation":
                self.condensations.append((
                    len(self.calls), seconds(self.previous, self.start),
                    seconds(moment, self.previous),
                    content_text(as_dict(event.get("args")).get("summary")),
                    self.delegates[-1] if self.delegates else None))
            if source == "agent" and isinstance(action, str) and action not in NOT_CALLS:
                if not self.delegates:  # the state OpenHands' controller sets on it
                    self.ended = ENDING_ACTIONS.get(action)
                self._action(event, str(action), moment)
                if action == "delegate":
                    self.delegates.append(str(as_dict(event.get("args")).get("agent")))
            else:
                self.open = None  # only observations come between a response's actions
                if source == "user" and action == "message" and self.calls:
                    self.texts[-1].append(content_text(as_dict(event.get("args")).get("content")))
        elif "observation" in event:
            self._observation(event, moment)
        self.previous = moment or self.previous

    def _action(self, event: dict, action: str, moment: datetime | None) -> None:
        meta = as_dict(event.get("tool_call_metadata"))
        response = as_dict(meta.get("model_response"))
        rid = response.get("id") if isinstance(response.get("id"), str) else None
        if rid is not None and rid == self.open and self.calls:
            call = self.calls[-1]  # a parallel tool call of the response just read
        else:
            call = self._call(event, action, response, rid, moment)
        self.open = rid
        if meta.get("tool_call_id") is not None:
            wanted = str(meta["tool_call_id"])
            tool = next((t for t in call.tool_calls if t.id == wanted), None)
            if tool is None:
                tool = ToolCallRecord(name=meta.get("function_name", ""), id=wanted,
                                      arguments=canonical_json(_arguments(event)))
                call.tool_calls.append(tool)
            self.by_tool_id[wanted] = (tool, moment)
        elif call.tool_calls:
            tool = call.tool_calls[-1]
        else:
            return
        if _scalar(event.get("id")):
            self.by_event[event["id"]] = (tool, moment)

    def _call(self, event: dict, action: str, response: dict, rid: str | None,
              moment: datetime | None) -> CallRecord:
        where = f"event {event.get('id', '?')} ({action})"
        choice = as_dict(next(iter(as_list(response.get("choices"))), None))
        message = as_dict(choice.get("message"))
        if response:
            text = content_text(message.get("content"))
            tools = [openai_tool(t) for t in as_list(message.get("tool_calls"))
                     if isinstance(t, dict)]
        else:
            args = as_dict(event.get("args"))
            text = content_text(args.get("content") if action == "message"
                                else args.get("thought"))
            tools = [] if action == "message" else [
                ToolCallRecord(name=action, arguments=canonical_json(_arguments(event)))]
        usage = as_dict(response.get("usage"))
        counts, provenance = (
            from_openai(usage, where, notes=self.notes, apart=self.apart) if usage
            else (Usage(), dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)))
        latency = _take(self.latencies, rid)
        reason = choice.get("finish_reason")
        call = CallRecord(
            usage=counts, model=response.get("model") if isinstance(response.get("model"),
                                                                     str) else None,
            finish_reason=None if reason is None else str(reason),
            started_s=seconds(self.previous, self.start),
            latency_s=latency if latency is not None else seconds(moment, self.previous),
            text_tokens=approx_tokens(text), text_sha256=sha256_text(text),
            tool_calls=tools, provenance=provenance,
            agent=self.delegates[-1] if self.delegates else None)
        self.calls.append(call)
        self.texts.append([])
        self.responses.append(rid)
        return call

    def _observation(self, event: dict, moment: datetime | None) -> None:
        kind = event.get("observation")
        extras = as_dict(event.get("extras"))
        if kind == "delegate" and self.delegates:  # the delegate is done
            self.delegates.pop()
        if kind == "agent_state_changed":
            state = extras.get("agent_state")
            self.state = None if state is None else str(state)
            reason = extras.get("reason")
            if self.state == ERROR_STATE and isinstance(reason, str) and reason.strip():
                self.state = exit_label(reason)  # why: a control flag's RuntimeError, an LLM fault
            return
        meta = as_dict(event.get("tool_call_metadata"))
        answered = None if meta.get("tool_call_id") is None else \
            self.by_tool_id.pop(str(meta["tool_call_id"]), None)
        if answered is None and _scalar(event.get("cause")):
            answered = self.by_event.pop(event["cause"], None)
        text = content_text(event.get("content"))
        if answered is not None:
            tool, asked = answered
            tool.result_tokens, tool.result_sha256, tool.error = tool_result(
                text, error=_error(event, extras))
            tool.duration_s = seconds(moment, asked)
        elif kind == "error" and self.calls:
            self.texts[-1].append(text)

    def finish(self) -> list[CallRecord]:
        """The calls, with the evaluation's per-call records where the events
        lack them, and their observations."""
        usages = [u for u in as_list(self.metrics.get("token_usages")) if isinstance(u, dict)]
        costs = as_list(self.metrics.get("costs"))
        aligned = len(costs) == len(usages)
        by_id: dict[str, list[int]] = {}  # by response id, in order
        for i, u in enumerate(usages):
            by_id.setdefault(str(u.get("response_id")), []).append(i)
        named = {rid for rid in self.responses if rid is not None}
        spare = [i for i, u in enumerate(usages) if str(u.get("response_id")) not in named]
        blind = [k for k, rid in enumerate(self.responses) if rid is None]
        matches = list(zip(blind, spare, strict=True)) \
            if len(blind) == len(spare) and not self.condensed else []
        for k, rid in enumerate(self.responses):
            index = _take(by_id, rid)
            if index is not None:
                matches.append((k, index))
        calls = self.calls
        for k, index in matches:
            call = calls[k]
            if call.provenance.get("input_tokens") == UNKNOWN:
                usage, provenance = _token_usage(usages[index], index, self.notes, self.apart)
                call = replace(call, usage=usage, provenance=provenance)
            if aligned and call.cost_usd is None:
                call = replace(call, cost_usd=number_or_none(as_dict(costs[index]).get("cost")))
            calls[k] = call
        if self.condensed and not blind:  # the entries left are the condenser's calls
            used = {index for _, index in matches}
            left = [i for i in range(len(usages)) if i not in used]
            for i in reversed(range(len(left))):
                at, started, waited, summary, agent = self.condensations[
                    min(i, len(self.condensations) - 1)] if self.condensations else (
                    len(calls), None, None, None, None)
                calls.insert(at, self._compaction(usages[left[i]], left[i], costs if aligned
                                                  else None, started, waited, summary, agent))
                self.texts.insert(at, [])
        self.calls = [replace(call, observation_tokens=sum(approx_tokens(t) for t in texts),
                              observation_sha256=joined_sha256(texts))
                      for call, texts in zip(calls, self.texts, strict=True)]
        return self.calls

    def _compaction(self, entry: dict, index: int, costs: list | None, started: float | None,
                    waited: float | None, summary: str | None, agent: str | None
                    ) -> CallRecord:
        """A condenser's model call from its ``token_usages`` entry (and its
        cost when ``costs`` align with the entries)."""
        usage, provenance = _token_usage(entry, index, self.notes, self.apart)
        latency = _take(self.latencies, str(entry.get("response_id")))
        model = entry.get("model")
        return CallRecord(
            usage=usage, model=model if isinstance(model, str) and model else None,
            cost_usd=None if costs is None else number_or_none(as_dict(costs[index]).get("cost")),
            started_s=started, latency_s=latency if latency is not None else waited,
            text_tokens=approx_tokens(summary), text_sha256=sha256_text(summary),
            purpose="compaction", provenance=provenance, agent=agent)

    def totals(self) -> dict[str, int] | None:
        """The run's recorded token totals, when some call's usage is unknown."""
        if not any(c.provenance.get("input_tokens") == UNKNOWN for c in self.calls):
            return None
        total = as_dict(self.metrics.get("accumulated_token_usage"))
        if not total:
            return None
        try:
            usage, _ = _token_usage(total, None, None, self.apart)
        except Unusable:
            return None
        return {"input_tokens": usage.input_tokens, "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "output_tokens": usage.output_tokens, "reasoning_tokens": 0}


def _token_usage(entry: dict, index: int | None, notes: list[Repair] | None,
                 apart: tuple[bool, bool]) -> tuple[Usage, dict[str, str]]:
    """An OpenHands ``TokenUsage`` (prompt including the cache; no reasoning
    count) and its provenance."""
    where = "metrics.accumulated_token_usage" if index is None \
        else f"metrics.token_usages[{index}]"
    counts = from_total_prompt(entry.get("prompt_tokens", 0), entry.get("completion_tokens", 0),
                               cache_read=entry.get("cache_read_tokens"),
                               cache_write=entry.get("cache_write_tokens"), where=where,
                               notes=notes, cache_apart=apart[0])
    return counts, derived(counts, entry.get("prompt_tokens", 0),
                           entry.get("completion_tokens", 0), where)


def _arguments(event: dict) -> dict:
    """An action's ``args`` less its ``thought`` (the reply's text)."""
    return {k: v for k, v in as_dict(event.get("args")).items() if k != "thought"}


def _error(event: dict, extras: dict) -> bool:
    if event.get("observation") == "error":
        return True
    if isinstance(event.get("success"), bool):
        return not event["success"]
    return failed_exit_code(as_dict(extras.get("metadata")).get("exit_code",
                                                                extras.get("exit_code")))


def failed_exit_code(code: Any) -> bool:
    """Whether a command's recorded exit code says it failed: an integer
    other than 0 and -1 (OpenHands' code for unknown); anything else (absent,
    not an integer) says nothing. The V1 SDK's observations read alike
    (:mod:`sim.traces.openhands_sdk`)."""
    return isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)


def _take(queues: dict[str, list[Any]], rid: str | None) -> Any:
    """Take (remove and return) the first value left under the response id
    ``rid``: the values of an id met again are taken in order; None when
    none is left (or ``rid`` is None)."""
    held = queues.get(rid) if rid is not None else None
    return held.pop(0) if held else None
