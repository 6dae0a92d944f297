"""Recording simulated runs in the trace model (``python -m sim run ... --traces``).

:class:`RunRecorder` is an observer of the pump that drives the harness loop
(:mod:`sim.harness.pump`): it sees every effect and result, changes none, and
records one row per model call the harness accounted for, as entries of
column lists (:class:`~sim.traces.columns.CallColumns`, shared by a chunk's
runs; no object per call), so a simulated run can be imported, summarised and
calibrated like a real one. The direct engine, the DES engine and the live
driver record through it alike, only when traces are asked for.

**Subagents.** A run's children are recorded as importers record a Claude
Code session's subagents: each child's (and grandchild's) calls are calls of
its root's run, with ``agent`` set to the child's spawn key
(:func:`agent_id`: ``"<task>:<ordinal>"``, one more ``:<ordinal>`` per
level), by a :class:`ChildRecorder` the parent's recorder makes
(:meth:`RunRecorder.child`) on the root's clock. The spawn is what the model
called: a call of the subagent tool (``harness.subagents.tool``) among the
parent's tool calls, whose result is what the model was shown back and whose
``duration_s`` the seconds the parent waited for its children. The calls are
numbered (``calls.call``) in the order the engine made them: in the direct
engine each child runs to its end in turn (the order the session's shared
budgets were charged in), in the DES by when their answers came back.

What a simulated call records:

- ``purpose``: ``step`` (a loop step), ``compaction`` (a summary call) or
  ``verifier`` (a model grader's check, priced like a call); every one of them
  is a row, so a run's token sums equal its ``results.parquet`` row (``steps``
  counts these calls, not the loop's turns);
- usage (``thinking_tokens`` as ``reasoning_tokens``), the model that answered,
  ``stop_reason`` as ``finish_reason``, the cost the harness charged (the
  change of the run's spend), ``started_s`` on the engine's clock from the
  run's start and the response's ``latency_s``; a model error is no call;
- ``text_tokens``: the response's text blocks' sizes; ``text_sha256``: the
  hash of their texts concatenated in order;
- its tool calls (canonical JSON arguments), and for each what the model was
  shown back: the ``tool_result`` block's size, text hash and error flag (a
  call refused by policy is an error result too) and the time the tool ran
  (summed over harness retries; a spawn's: the parent's wait for its
  children);
- ``observation_tokens``: the other text the harness put in the history before
  the next model call (a nudge, a verifier's feedback, a continuation note, a
  simulated user's reply); ``observation_sha256``: the hash of those texts
  joined in order (:func:`~sim.traces.model.joined_sha256`; null when none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from sim.bad_input import InputError
from sim.harness.effects import (
    ModelRequest,
    ModelResponse,
    SpawnRequest,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifyRequest,
)
from sim.harness.messages import Block, Message, ToolResultBlock, ToolUseBlock, Usage
from sim.harness.state import HarnessState
from sim.traces.columns import (
    COST,
    OBSERVATION_SHA256,
    OBSERVATION_TOKENS,
    RESULT,
    TOOL_WIDTH,
    TOOLS,
    WIDTH,
    CallColumns,
    observed_text,
)
from sim.traces.model import RUNS_SCHEMA, CallRecord, RunRecord, canonical_json
from sim.traces.reading import check_values

SOURCE = "sim"


class RunRecorder:
    """Records the model calls of one run, as an observer of the pump that
    drives it (:class:`sim.harness.pump.Observer`: every driver, direct, DES
    and live, records the same way); ``clock()`` is the driver's time in
    seconds (the recorder's creation is the run's start). The calls go into
    ``columns`` (a chunk's shared :class:`~sim.traces.columns.CallColumns`,
    under this run's ``key``; a buffer of its own when not given);
    :attr:`calls` gives them as objects.

    A call is appended to the columns when its answer comes back
    (:meth:`result`); its cost once the harness has taken the answer (at the
    next effect or the end: the change of the run's spend; a call whose
    tokens the harness did not account, cancelled in flight, is dropped); what
    came back for a step call (:func:`_came_back`) is read from the history
    at the next model call and at the end."""

    __slots__ = ("clock", "columns", "key", "state", "t0", "rows", "tool_rows", "durations",
                 "pending", "spent", "tokens", "usage", "began", "step", "tools", "made",
                 "assistant", "position")

    def __init__(self, state: HarnessState, clock: Callable[[], float],
                 columns: CallColumns | None = None, key: Any = 0,
                 t0: float | None = None) -> None:
        self.state = state
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.columns = CallColumns() if columns is None else columns
        self.key = key
        self.rows, self.tool_rows = self.columns.rows, self.columns.tool_rows
        self.durations: dict[str, float] = {}  # a tool call's seconds, summed over retries
        self.pending = -1  # the call awaiting its cost (its offset in ``rows``); -1: none
        self.spent, self.tokens = 0.0, 0  # the spend and tokens before it
        self.usage: Usage | None = None  # its usage
        self.began = 0.0  # when the call in flight was sent (the clock's reading)
        self.step, self.tools, self.made = -1, 0, 0  # the last step call; its tool calls
        self.assistant: Message | None = None  # its message in the history
        self.position = 0  # where that message was

    @property
    def calls(self) -> list[CallRecord]:
        """The run's calls as :class:`~sim.traces.model.CallRecord` objects, in order."""
        return self.columns.records().get(self.key, [])

    def child(self, state: HarnessState, clock: Callable[[], float],
              key: Sequence[int]) -> ChildRecorder:
        """The recorder of a child run of this one (``state``; ``key`` its
        spawn key): its calls go into the same columns under the same run,
        with ``agent`` :func:`agent_id` of ``key``; ``clock`` must read the
        same clock as this recorder's (its times are from the run's start)."""
        return ChildRecorder(state, clock, self.columns, self.key, self.t0, agent_id(key))

    def _taken(self) -> None:
        """The harness has taken the answer of the call awaiting its cost:
        its cost is the change of the spend, or it is left out (not accounted)."""
        state, pending = self.state, self.pending
        if state.money_usd != self.spent or not _unaccounted(state, self.tokens, self.usage):
            self.rows[pending + COST] = state.money_usd - self.spent
            messages = state.messages
            if pending == self.step and messages and messages[-1].role == "assistant":
                self.assistant, self.position = messages[-1], len(messages) - 1
            elif pending == self.step:  # the harness did not keep the reply
                self.assistant, self.position = None, 0
        else:  # not accounted (cancelled in flight): left out
            self.columns.dropped.append(pending // WIDTH)
            if self.step == pending:
                self.step = -1
        self.pending = -1

    def effect(self, effect: Any) -> None:
        """Before ``effect`` is answered: the last call's cost; before a model
        call, what came back for the last step call, and the clock, spend
        and tokens the call is measured from."""
        if self.pending >= 0:
            self._taken()
        kind = type(effect)
        if kind is ModelRequest:
            state = self.state
            if self.assistant is not None:
                self._came_back()
            self.began, self.spent = self.clock(), state.money_usd
            self.tokens = _tokens(state)
        elif kind is VerifyRequest:
            state = self.state
            self.began, self.spent, self.tokens = self.clock(), state.money_usd, _tokens(state)

    def result(self, effect: Any, result: Any) -> None:
        """``effect``'s answer: a model response (or a grader's verdict with
        usage) is a call appended to the columns; a tool's seconds are summed
        per call id."""
        kind = type(effect)
        if kind is ToolRequest:
            call_id = effect.call.id
            seconds = (result.duration_s if type(result) is ToolResult
                       else getattr(result, "duration_s", 0.0))
            durations = self.durations
            durations[call_id] = durations.get(call_id, 0.0) + (seconds or 0.0)
        elif kind is ModelRequest:
            if type(result) is not ModelResponse:
                return
            rows, tool_rows = self.rows, self.tool_rows
            pending, first, usage = len(rows), len(tool_rows), result.usage
            content = result.content
            block: Any = content[0] if len(content) == 1 else None
            if type(block) is ToolUseBlock:  # the commonest reply: one tool call alone
                text, texts, calls = 0, "", 1
                tool_rows.extend((block.id, block.name, _arguments(block.input), None, None,
                                  None, None))
            else:
                text, texts = _answer(content, tool_rows)
                calls = (len(tool_rows) - first) // TOOL_WIDTH
            rows.extend((self.key, usage.input_tokens, usage.cache_read_tokens,
                         usage.cache_write_tokens, usage.output_tokens, usage.thinking_tokens,
                         result.model or effect.model, None, result.stop_reason,
                         self.began - self.t0, result.latency_s, text, calls, 0,
                         effect.purpose, texts, None))
            self.pending, self.usage = pending, usage
            if effect.purpose == "step":
                self.step, self.tools, self.made, self.assistant = pending, first, calls, None
        elif kind is VerifyRequest and type(result) is Verdict and result.usage is not None:
            self.pending, usage = len(self.rows), result.usage
            self.usage = usage  # a model grader's check, priced like a call
            self.rows.extend((self.key, usage.input_tokens, usage.cache_read_tokens,
                              usage.cache_write_tokens, usage.output_tokens,
                              usage.thinking_tokens, self.state.model, None, None,
                              self.began - self.t0, result.duration_s, None, 0, 0, "verifier",
                              None, None))
        elif kind is SpawnRequest:  # the subagent tool's call: the parent's wait
            durations = self.durations
            call_id = effect.call.id
            durations[call_id] = (durations.get(call_id, 0.0)
                                  + (getattr(result, "duration_s", 0.0) or 0.0))

    def _came_back(self) -> None:
        """What came back for the last step call (its message, at
        :attr:`position` in the history when last seen; its tool calls from
        :attr:`tools` in the tool rows): the tool results (their texts,
        hashed when the table is built) and the other text in the history
        after its message; the commonest case, one tool call whose result is
        alone in the one message after the call's, on a short path. Nothing
        when the message was compacted away (what was seen before stays)."""
        messages, rows, tool_rows = self.state.messages, self.rows, self.tool_rows
        message, position, first, step = self.assistant, self.position, self.tools, self.step
        durations = self.durations
        if self.made == 1 and len(messages) == position + 2 and messages[position] is message:
            later = messages[-1].content
            block: Any = later[0] if len(later) == 1 else None
            if type(block) is ToolResultBlock and tool_rows[first] == block.tool_use_id:
                at = first + RESULT  # its result fields, set one by one (no slice object)
                tool_rows[at] = block.tokens
                tool_rows[at + 1] = block.content  # hashed when the table is built
                tool_rows[at + 2] = block.is_error
                tool_rows[at + 3] = durations.get(block.tool_use_id)
                rows[step + OBSERVATION_TOKENS] = 0
                rows[step + OBSERVATION_SHA256] = None
                return
        if position >= len(messages) or messages[position] is not message:
            for position in range(len(messages) - 1, -1, -1):  # moved by a compaction
                if messages[position] is message:
                    break
            else:
                return
        last = first + (rows[step + TOOLS] - 1) * TOOL_WIDTH
        observed = 0
        texts: list[str] = []
        for later_message in messages[position + 1:]:
            for block in later_message.content:
                kind = block.type
                if kind == "tool_result":
                    call_id = block.tool_use_id
                    i = last
                    while i >= first and tool_rows[i] != call_id:  # the last call of that id
                        i -= TOOL_WIDTH
                    if i >= first:
                        tool_rows[i + RESULT] = block.tokens
                        tool_rows[i + RESULT + 1] = block.content
                        tool_rows[i + RESULT + 2] = block.is_error
                        tool_rows[i + RESULT + 3] = durations.get(call_id)
                elif kind == "text":
                    observed += block.tokens
                    texts.append(block.text)
        rows[step + OBSERVATION_TOKENS] = observed
        rows[step + OBSERVATION_SHA256] = observed_text(texts) if texts else None

    def end(self, state: HarnessState) -> None:
        """The run ended: the last call's cost and what came back for the last step call."""
        if self.pending >= 0:
            self._taken()
        if self.assistant is not None:
            self._came_back()


class ChildRecorder(RunRecorder):
    """A :class:`RunRecorder` of a child run (a subagent): its calls are its
    root run's (the same ``key``), each marked with the child's ``agent`` id
    in the columns' :attr:`~sim.traces.columns.CallColumns.agents`; ``t0``
    is the root run's start on the shared clock."""

    __slots__ = ("agent",)

    def __init__(self, state: HarnessState, clock: Callable[[], float], columns: CallColumns,
                 key: Any, t0: float, agent: str) -> None:
        super().__init__(state, clock, columns, key, t0)
        self.agent = agent

    def result(self, effect: Any, result: Any) -> None:
        """As :meth:`RunRecorder.result`; a call appended is the child's."""
        before = len(self.rows)
        super().result(effect, result)
        if len(self.rows) != before:
            self.columns.agents[before // WIDTH] = self.agent


def agent_id(key: Sequence[int]) -> str:
    """The ``agent`` id of the child run of spawn key ``key`` (its root
    task's index, then its ordinal at each level), its parts joined by ``:``.

    >>> agent_id((7, 0, 2))
    '7:0:2'
    """
    return ":".join(map(str, key))


def _tokens(state: HarnessState) -> int:
    """All tokens the harness has accounted for the run so far."""
    return (state.input_tokens + state.output_tokens + state.cache_read_tokens
            + state.cache_write_tokens + state.thinking_tokens)

def _unaccounted(state: HarnessState, tokens: int, usage: Any) -> bool:
    """Whether the harness left a call's ``usage`` out of its counters (a call
    cancelled in flight): they still add up to ``tokens``, and the call used some."""
    return (state.input_tokens + state.output_tokens + state.cache_read_tokens
            + state.cache_write_tokens + state.thinking_tokens == tokens) and any(
                (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
                 usage.output_tokens, usage.thinking_tokens))  # no sum: a usage the
    # harness refused as impossible (1e300 + 10**400 tokens) must not overflow here


def _answer(content: list[Block], tool_rows: list[Any]) -> tuple[int, str]:
    """A response's text blocks' size in tokens and their texts concatenated
    (hashed when the table is built); its tool calls appended to
    ``tool_rows`` (their results to come)."""
    text = 0
    texts = ""
    for block in content:
        kind = block.type
        if kind == "text":
            text += block.tokens  # type: ignore[union-attr]
            texts += block.text  # type: ignore[union-attr]
        elif kind == "tool_use":
            tool_rows.extend((block.id, block.name,  # type: ignore[union-attr]
                              _arguments(block.input),  # type: ignore[union-attr]
                              None, None, None, None))
    return text, texts


_ARGUMENTS: dict[tuple[Any, Any], str] = {}
_ARGUMENTS_KEPT = 4096


def _arguments(arguments: Any) -> str:
    """:func:`~sim.traces.model.canonical_json` of a tool call's arguments;
    those of one pair of strings, the simulated worlds' ``{"target": "..."}``,
    from a cache of the last few thousand (cleared when full). Only strings:
    other values may be unhashable (a provider's nested object), and ``1``,
    ``1.0`` and ``True`` are equal keys with different JSON."""
    if type(arguments) is dict and len(arguments) == 1:
        for pair in arguments.items():
            if type(pair[1]) is not str:
                break
            return _ARGUMENTS.get(pair) or _cached_arguments(pair, arguments)
    return canonical_json(arguments)


def _cached_arguments(pair: tuple[str, str], arguments: dict[str, str]) -> str:
    """The canonical JSON of ``arguments`` (one ``pair`` of strings), kept in the cache."""
    if len(_ARGUMENTS) >= _ARGUMENTS_KEPT:
        _ARGUMENTS.clear()
    text = _ARGUMENTS[pair] = canonical_json(arguments)
    return text


def simulated_run(calls: list[CallRecord], *, run_id: str, file: str, task_id: str,
                  model: str | None, status: str, reason: str, cost_usd: float,
                  resolved: bool | None, duration_s: float, step_limit: int | None,
                  cost_limit_usd: float | None) -> RunRecord:
    """A simulated run as a :class:`RunRecord` with its recorded ``calls``
    (none: a task cancelled before it started); ``exit`` is the harness's
    ``status:reason``, ``resolved`` the task's hidden truth; ``cost_usd`` the
    run's own, or for a run with subagents :func:`session_cost`."""
    if any(c.agent is not None for c in calls):
        cost_usd = session_cost([c.cost_usd for c in calls], cost_usd)
    return RunRecord(run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=task_id,
                     model=model, cost_usd=cost_usd, exit=f"{status}:{reason}",
                     resolved=resolved, duration_s=duration_s, step_limit=step_limit,
                     cost_limit_usd=cost_limit_usd)


def session_cost(costs: Sequence[float | None], own: float) -> float:
    """The cost (USD) of a run with subagents: the exact sum of its
    recorded calls' ``costs`` (parent's and children's, as an importer sums
    a session's calls; it includes children a parent stopped early never
    collected), else, when some call has none, ``own``."""
    known = [c for c in costs if c is not None]
    return math.fsum(known) if len(known) == len(costs) else own


def _session_costs(calls: pa.Table, steps: Any, costs: list[float]) -> list[float]:
    """``costs`` (each run's own, in order), with each run whose calls (grouped
    by run, ``steps`` of them each) include a subagent's at :func:`session_cost`."""
    agent = calls.column("agent").is_valid().to_numpy(zero_copy_only=False)
    cost = calls.column("cost_usd").to_pylist()
    out = list(costs)
    start = 0
    for i, count in enumerate(steps.tolist()):
        end = start + count
        if agent[start:end].any():
            out[i] = session_cost(cost[start:end], costs[i])
        start = end
    return out


def simulated_tables(columns: CallColumns, keys: Sequence[Any], runs: dict[str, list],
                     constants: dict[str, Any], careful: Callable[[], list[RunRecord]]
                     ) -> tuple[pa.Table, pa.Table]:
    """The runs ``keys`` (their calls recorded in ``columns``) as the rows of
    runs.parquet and calls.parquet, built as columns: ``runs`` holds the
    per-run columns the harness knows (``run_id``, ``task_id``, ``cost_usd``,
    ``exit``, ``resolved``, ``duration_s``, a list each in ``keys``' order),
    ``constants`` the columns equal for all of them (``file``, ``model``,
    ``step_limit``, ``cost_limit_usd``); ``steps`` and the token sums come
    from the calls, and so does the cost of a run with subagents
    (:func:`session_cost`), the rest is null. When some value is impossible (the
    reader's bounds, :func:`~sim.traces.reading.check_values`) or a text
    cannot be stored, the tables are those of the runs ``careful()`` gives,
    as :func:`~sim.traces.writer.trace_tables` builds them (impossible
    values nulled, run by run)."""
    try:
        calls, steps, sums = columns.table(keys, runs["run_id"])
        if columns.agents:  # a session's cost: its calls', subagents' included
            runs = {**runs, "cost_usd": _session_costs(calls, steps, runs["cost_usd"])}
        n = len(keys)
        values: dict[str, Any] = {"source": [SOURCE] * n, "steps": steps, **sums, **runs}
        for name, value in constants.items():
            values[name] = [value] * n
        table = pa.Table.from_arrays(
            [pa.array(values[f.name], f.type) if f.name in values else pa.nulls(n, f.type)
             for f in RUNS_SCHEMA], schema=RUNS_SCHEMA)
        check_values(table, calls, Path("."))
        return table, calls
    except (InputError, pa.ArrowException, UnicodeEncodeError):
        from sim.traces.writer import trace_tables

        return trace_tables(careful())
