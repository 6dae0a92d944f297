"""Recording a run inside the loop that drives it (the direct engine's ``--traces`` path).

:func:`drive_recorded` is :func:`sim.engines.direct.drive` with
:class:`~sim.traces.simulated.RunRecorder`'s recording done in the same loop:
it answers each effect through the engine's dispatch table and records the
model calls where it already holds the effect and its answer, with no
generator wrapped around the harness loop and no clock callback. The rows it
appends to :class:`~sim.traces.columns.CallColumns` are the ones the wrapping
recorder appends for the same run (``tests/test_traces_driven.py`` checks
that, table for table); the DES engine, whose clock is its own, keeps the
wrapping recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sim.harness.effects import (
    Checkpoint,
    ModelRequest,
    ModelResponse,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifyRequest,
)
from sim.harness.loop import Loop
from sim.harness.messages import Message, ToolResultBlock, ToolUseBlock
from sim.harness.state import HarnessState
from sim.traces.columns import (
    COST,
    OBSERVATION_SHA256,
    OBSERVATION_TOKENS,
    RESULT,
    TOOL_WIDTH,
    WIDTH,
    CallColumns,
)
from sim.traces.simulated import (
    _answer,
    _arguments,
    _observe,
    _reply,
    _unaccounted,
    _verdict_row,
)


def drive_recorded(loop: Loop, task: Any, answer: Mapping[type, Callable[[Any, Any, float], Any]],
                   state: HarnessState, columns: CallColumns, key: Any) -> HarnessState:
    """Drive ``loop`` (the harness loop of ``state``) against ``task``,
    answering each effect with ``answer[type(effect)](task, effect, now)``
    (``now``: the run's wall seconds, active plus parked), until it returns
    the final state; record the run's model calls into ``columns`` under
    ``key`` as :meth:`RunRecorder.wrap <sim.traces.simulated.RunRecorder.wrap>`
    does (the same rows, in the same order). The run's clock starts at the
    state's wall seconds when called."""
    rows, tool_rows, dropped = columns.rows, columns.tool_rows, columns.dropped
    durations: dict[str, float] = {}  # a tool call's seconds, summed over retries
    respond, execute = answer[ModelRequest], answer[ToolRequest]
    extend, tool_extend = rows.extend, tool_rows.extend
    model_request, checkpoint, tool_request, model_response, tool_use, tool_result, type_of = (
        ModelRequest, Checkpoint, ToolRequest, ModelResponse, ToolUseBlock, ToolResult, type)
    arguments = _arguments
    send = loop.send
    t0 = state.active_s + state.parked_s
    result: Any = None
    effect: Any = None  # (any effect type: dispatched on its exact type below)
    block: Any = None  # (any block type: likewise)
    pending = -1  # the call awaiting its cost (its offset in ``rows``); -1: none
    spent, tokens, usage = 0.0, 0, None  # the spend and tokens before it, its usage
    step, tools, made = -1, 0, 0  # the last step call, awaiting what came back; its tool calls
    assistant: Message | None = None  # its message in the history
    position = 0  # where that message was
    done, final = False, state  # the loop's end and its value (the final state)
    while True:
        try:
            effect = send(result)
        except StopIteration as stop:  # not kept past the clause: it holds this frame
            done, final = True, stop.value
        if pending >= 0:  # the harness has taken the last answer
            if state.money_usd != spent or not _unaccounted(state, tokens, usage):  # type: ignore[arg-type]
                rows[pending + COST] = state.money_usd - spent
                if pending == step:
                    assistant, position = _reply(state.messages)
            else:  # not accounted (cancelled in flight): left out
                step = _dropped(dropped, pending, step)
            pending = -1
        if done:
            _came_back(state.messages, rows, tool_rows, durations, step, tools, made,
                       assistant, position)
            return final
        kind = type_of(effect)
        if kind is model_request:
            if assistant is not None:  # what came back for the last step call
                _came_back(state.messages, rows, tool_rows, durations, step, tools, made,
                           assistant, position)
            began, spent = state.active_s + state.parked_s, state.money_usd
            tokens = (state.input_tokens + state.output_tokens + state.cache_read_tokens
                      + state.cache_write_tokens + state.thinking_tokens)
            result = respond(task, effect, began)
            if type_of(result) is model_response:
                pending, first, usage = len(rows), len(tool_rows), result.usage
                content = result.content
                block = content[0] if len(content) == 1 else None
                if type_of(block) is tool_use:  # the commonest reply: one tool call alone
                    text, texts, calls = 0, "", 1
                    tool_extend((block.id, block.name, arguments(block.input), None, None, None,
                                 None))
                else:
                    text, texts = _answer(content, tool_rows)
                    calls = (len(tool_rows) - first) // TOOL_WIDTH
                extend((key, usage.input_tokens, usage.cache_read_tokens,
                        usage.cache_write_tokens, usage.output_tokens, usage.thinking_tokens,
                        result.model or effect.model, None, result.stop_reason, began - t0,
                        result.latency_s, text, calls, 0, effect.purpose, texts, None))
                if effect.purpose == "step":
                    step, tools, made, assistant = pending, first, calls, None
        elif kind is checkpoint:
            result = None
        elif kind is tool_request:
            result = execute(task, effect, state.active_s + state.parked_s)
            call_id = effect.call.id
            seconds = (result.duration_s if type_of(result) is tool_result
                       else getattr(result, "duration_s", 0.0))
            durations[call_id] = durations.get(call_id, 0.0) + (seconds or 0.0)
        elif kind is VerifyRequest:
            spent, tokens = state.money_usd, _tokens(state)
            result = answer[kind](task, effect, state.active_s + state.parked_s)
            if _graded(rows, key, result, state, t0):
                pending, usage = len(rows) - WIDTH, result.usage
        else:
            result = answer[kind](task, effect, state.active_s + state.parked_s)


def _dropped(dropped: list[int], pending: int, step: int) -> int:
    """Leave the call at offset ``pending`` of the rows out (the harness did
    not account it); the step call awaiting what came back (-1: none if it
    was that call)."""
    dropped.append(pending // WIDTH)
    return -1 if step == pending else step


def _tokens(state: HarnessState) -> int:
    """All tokens the harness has accounted for the run so far."""
    return (state.input_tokens + state.output_tokens + state.cache_read_tokens
            + state.cache_write_tokens + state.thinking_tokens)


def _graded(rows: list[Any], key: Any, verdict: Any, state: HarnessState, t0: float) -> bool:
    """Append a model grader's check (a :class:`Verdict` with usage, sent
    as the state's clock reads, ``t0`` its start; its cost to come) to
    ``rows``; False for any other answer of the verifier."""
    if type(verdict) is Verdict and verdict.usage is not None:
        rows.extend(_verdict_row(key, verdict, state.model, state.active_s + state.parked_s - t0))
        return True
    return False


def _came_back(messages: list[Message], rows: list[Any], tool_rows: list[Any],
               durations: dict[str, float], step: int, tools: int, made: int,
               assistant: Message | None, position: int) -> None:
    """:func:`~sim.traces.simulated._observe` of the step call at ``step``
    (``made`` tool calls, from ``tools`` in ``tool_rows``), with the commonest
    case on a short path: one tool call, whose result is alone in the one
    message after the call's. Nothing when no step call awaits (``assistant``
    None)."""
    if assistant is None:
        return
    if made == 1 and len(messages) == position + 2 and messages[position] is assistant:
        later = messages[-1].content
        block: Any = later[0] if len(later) == 1 else None
        if type(block) is ToolResultBlock and tool_rows[tools] == block.tool_use_id:
            at = tools + RESULT  # its result fields, set one by one (no slice object)
            tool_rows[at] = block.tokens
            tool_rows[at + 1] = block.content  # hashed when the table is built
            tool_rows[at + 2] = block.is_error
            tool_rows[at + 3] = durations.get(block.tool_use_id)
            rows[step + OBSERVATION_TOKENS] = 0
            rows[step + OBSERVATION_SHA256] = None
            return
    _observe(messages, rows, tool_rows, durations, step, tools, assistant, position)
