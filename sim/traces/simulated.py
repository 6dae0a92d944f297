"""Recording simulated runs in the trace model (``python -m sim run ... --traces``).

:class:`RunRecorder` sits between an engine and the harness loop: it wraps the
loop generator (:meth:`RunRecorder.wrap`), passes every effect and result
through unchanged, and records one row per model call the harness accounted
for, as entries of column lists (:class:`~sim.traces.columns.CallColumns`,
shared by a chunk's runs; no object per call), so a simulated run can be
imported, summarised and calibrated like a real one. Engines use it only when traces are
asked for; without it the loop runs unwrapped.

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
  (summed over harness retries);
- ``observation_tokens``: the other text the harness put in the history before
  the next model call (a nudge, a verifier's feedback, a continuation note, a
  simulated user's reply); ``observation_sha256``: the hash of those texts
  joined in order (:func:`~sim.traces.model.joined_sha256`; null when none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from sim.bad_input import InputError
from sim.harness.effects import (
    ModelRequest,
    ModelResponse,
    ToolRequest,
    Verdict,
    VerifyRequest,
)
from sim.harness.loop import Loop
from sim.harness.messages import Message, Usage
from sim.harness.state import HarnessState
from sim.traces.columns import CallColumns, observed_sha256, text_sha256, texts_sha256
from sim.traces.model import RUNS_SCHEMA, CallRecord, RunRecord, canonical_json
from sim.traces.reading import check_values

SOURCE = "sim"
_EMPTY_SHA256 = text_sha256("")


class RunRecorder:
    """Records the model calls of one run; ``clock()`` is the engine's time in
    seconds (the recorder's creation is the run's start). The calls go into
    ``columns`` (a chunk's shared :class:`~sim.traces.columns.CallColumns`,
    under this run's ``key``; a buffer of its own when not given);
    :attr:`calls` gives them as objects."""

    __slots__ = ("_assistant", "_durations", "_open", "_position", "_step", "_step_tools", "clock",
                 "columns", "key", "state", "t0")

    def __init__(self, state: HarnessState, clock: Callable[[], float],
                 columns: CallColumns | None = None, key: Any = 0) -> None:
        self.state = state
        self.clock = clock
        self.t0 = clock()
        self.columns = CallColumns() if columns is None else columns
        self.key = key
        self._open: tuple[int, float, int, Usage] | None = None  # row, spend, tokens before
        self._step: int | None = None  # the last step call's row, awaiting what came back
        self._step_tools = 0  # its first tool call's entry in the tool columns
        self._assistant: Message | None = None  # its message in the history
        self._position = 0  # where that message was
        self._durations: dict[str, float] = {}

    @property
    def calls(self) -> list[CallRecord]:
        """The run's calls as :class:`~sim.traces.model.CallRecord` objects, in order."""
        return self.columns.records().get(self.key, [])

    def wrap(self, loop: Loop) -> Loop:
        """``loop`` with every effect and result seen by the recorder."""
        result = None
        send = loop.send
        state, clock, durations = self.state, self.clock, self._durations
        while True:
            try:
                effect = send(result)
            except StopIteration as stop:
                if self._open is not None:
                    self._settle()
                self._observe()
                self._step = self._assistant = None  # the run's history is not kept alive
                durations.clear()
                return stop.value
            if self._open is not None:
                self._settle()
            kind = type(effect)
            if kind is ToolRequest:
                result = yield effect
                duration = getattr(result, "duration_s", 0.0) or 0.0
                call_id = effect.call.id  # type: ignore[union-attr]
                durations[call_id] = durations.get(call_id, 0.0) + duration
            elif kind is ModelRequest:
                if self._step is not None:
                    self._observe()
                began, spent = clock(), state.money_usd
                tokens = (state.input_tokens + state.output_tokens + state.cache_read_tokens
                          + state.cache_write_tokens + state.thinking_tokens)
                result = yield effect
                if type(result) is ModelResponse:
                    self._model_call(effect, result, began, spent,  # type: ignore[arg-type]
                                     tokens)
            elif kind is VerifyRequest:
                began, spent, tokens = clock(), state.money_usd, self._tokens()
                result = yield effect
                if type(result) is Verdict and result.usage is not None:
                    self._open = (self._append(result.usage, state.model, None,
                                               began - self.t0, result.duration_s, None,
                                               "verifier", None), spent, tokens, result.usage)
            else:
                result = yield effect

    def _tokens(self) -> int:
        s = self.state
        return (s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_write_tokens
                + s.thinking_tokens)

    def _append(self, usage: Usage, model: str | None, finish_reason: str | None,
                started_s: float, latency_s: float | None, text_tokens: int | None,
                purpose: str | None, text_hash: str | None, tools: int = 0) -> int:
        """One call appended to every row column (its cost and observation
        to come); returns its row."""
        c = self.columns
        row = len(c.run)
        c.run.append(self.key)
        c.input_tokens.append(usage.input_tokens)
        c.cache_read_tokens.append(usage.cache_read_tokens)
        c.cache_write_tokens.append(usage.cache_write_tokens)
        c.output_tokens.append(usage.output_tokens)
        c.reasoning_tokens.append(usage.thinking_tokens)
        c.model.append(model)
        c.cost_usd.append(None)
        c.finish_reason.append(finish_reason)
        c.started_s.append(started_s)
        c.latency_s.append(latency_s)
        c.text_tokens.append(text_tokens)
        c.tools.append(tools)
        c.observation_tokens.append(0)
        c.purpose.append(purpose)
        c.text_sha256.append(text_hash)
        c.observation_sha256.append(None)
        return row

    def _model_call(self, request: ModelRequest, response: ModelResponse, began: float,
                    spent: float, tokens: int) -> None:
        c = self.columns
        first = len(c.tool_id)
        text = 0
        texts = []
        for block in response.content:
            if block.type == "text":
                text += block.tokens
                texts.append(block.text)
            elif block.type == "tool_use":
                c.tool_id.append(block.id)
                c.tool_name.append(block.name)
                c.arguments.append(_arguments(block.input))
                c.result_tokens.append(None)
                c.result_sha256.append(None)
                c.error.append(None)
                c.duration_s.append(None)
        usage = response.usage
        row = self._append(usage, response.model or request.model, response.stop_reason,
                           began - self.t0, response.latency_s, text, request.purpose,
                           texts_sha256(texts) if texts else _EMPTY_SHA256,
                           len(c.tool_id) - first)
        self._open = (row, spent, tokens, usage)
        if request.purpose == "step":
            self._step, self._step_tools, self._assistant = row, first, None

    def _settle(self) -> None:
        """After the harness has taken the last result: the call's cost, or the
        call dropped when the harness did not account it (cancelled in flight)."""
        assert self._open is not None
        row, spent, tokens, usage = self._open
        self._open = None
        c = self.columns
        s = self.state
        if (s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_write_tokens
                + s.thinking_tokens == tokens) and (usage.prompt_tokens or usage.output_tokens
                                                    or usage.thinking_tokens):
            c.dropped.append(row)
            if self._step == row:
                self._step = None
            return
        c.cost_usd[row] = self.state.money_usd - spent
        if row == self._step:
            messages = self.state.messages
            if messages and messages[-1].role == "assistant":
                self._assistant, self._position = messages[-1], len(messages) - 1

    def _observe(self) -> None:
        """What came back for the last step call: the tool results and other
        text in the history after its message (re-read until the next step)."""
        row, message = self._step, self._assistant
        if row is None or message is None:
            return
        messages = self.state.messages
        position = self._position
        if position >= len(messages) or messages[position] is not message:
            for position in range(len(messages) - 1, -1, -1):  # moved by a compaction
                if messages[position] is message:
                    break
            else:
                return  # compacted away: keep what was seen before
        c = self.columns
        tools = range(self._step_tools + c.tools[row] - 1, self._step_tools - 1, -1)
        observed = 0
        texts = []
        for later in messages[position + 1:]:
            for block in later.content:
                if block.type == "tool_result":
                    for i in tools:  # the last tool call of that id, as a dict by id would
                        if c.tool_id[i] == block.tool_use_id:
                            c.result_tokens[i] = block.tokens
                            c.result_sha256[i] = (None if block.content is None
                                                  else text_sha256(block.content))
                            c.error[i] = block.is_error
                            c.duration_s[i] = self._durations.get(block.tool_use_id)
                            break
                elif block.type == "text":
                    observed += block.tokens
                    texts.append(block.text)
        c.observation_tokens[row] = observed
        c.observation_sha256[row] = observed_sha256(texts) if texts else None


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
            text = _ARGUMENTS.get(pair)
            if text is None:
                if len(_ARGUMENTS) >= _ARGUMENTS_KEPT:
                    _ARGUMENTS.clear()
                text = _ARGUMENTS[pair] = canonical_json(arguments)
            return text
    return canonical_json(arguments)


def simulated_run(calls: list[CallRecord], *, run_id: str, file: str, task_id: str,
                  model: str | None, status: str, reason: str, cost_usd: float,
                  resolved: bool | None, duration_s: float, step_limit: int | None,
                  cost_limit_usd: float | None) -> RunRecord:
    """A simulated run as a :class:`RunRecord` with its recorded ``calls``
    (none: a task cancelled before it started); ``exit`` is the harness's
    ``status:reason``, ``resolved`` the task's hidden truth."""
    return RunRecord(run_id=run_id, source=SOURCE, file=file, calls=calls, task_id=task_id,
                     model=model, cost_usd=cost_usd, exit=f"{status}:{reason}",
                     resolved=resolved, duration_s=duration_s, step_limit=step_limit,
                     cost_limit_usd=cost_limit_usd)


def simulated_tables(columns: CallColumns, keys: Sequence[Any], runs: dict[str, list],
                     constants: dict[str, Any], careful: Callable[[], list[RunRecord]]
                     ) -> tuple[pa.Table, pa.Table]:
    """The runs ``keys`` (their calls recorded in ``columns``) as the rows of
    runs.parquet and calls.parquet, built as columns: ``runs`` holds the
    per-run columns the harness knows (``run_id``, ``task_id``, ``cost_usd``,
    ``exit``, ``resolved``, ``duration_s``, a list each in ``keys``' order),
    ``constants`` the columns equal for all of them (``file``, ``model``,
    ``step_limit``, ``cost_limit_usd``); ``steps`` and the token sums come
    from the calls, the rest is null. When some value is impossible (the
    reader's bounds, :func:`~sim.traces.reading.check_values`) or a text
    cannot be stored, the tables are those of the runs ``careful()`` gives,
    as :func:`~sim.traces.writer.trace_tables` builds them (impossible
    values nulled, run by run)."""
    try:
        calls, steps, sums = columns.table(keys, runs["run_id"])
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
