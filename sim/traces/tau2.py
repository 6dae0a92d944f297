"""tau2-bench results: conversations of a tool-using agent with a simulated user.

Three shapes are recognised (by content): a results object with a
``simulations`` list (tau2's own ``Results``), a bare list of simulation
records (``id``, ``messages``, ``termination_reason``/``reward_info``...), and
aggregated evaluation results (a list of per-model summaries with
``task_results``), which hold no trajectory and are skipped as such. A
results object whose ``simulations`` list is empty is a file skipped as
``no runs``.

One simulation is one run. Its **model calls** are the assistant messages that
carry ``usage``; tau2's scripted greeting (an assistant message at position 0
without usage) is not a call; any other assistant message without usage is a
call whose token counts are unknown (null in ``calls.parquet``; the run is
kept, and replay and calibration leave it out, counted). A simulation without any model
call (an ``infrastructure_error`` before the first reply, a user who stops at
the greeting) is a run of zero calls, with its exit, cost and reward. Per call:

- tokens: ``usage.prompt_tokens`` is the whole prompt (cached or not) and
  ``usage.completion_tokens`` the output; the cache split comes from the raw
  provider response in ``raw_data.usage`` when it is there: Anthropic's
  ``input_tokens``/``cache_read_input_tokens``/``cache_creation_input_tokens``
  (which must add up to the prompt), or OpenAI-style
  ``prompt_tokens_details.cached_tokens`` / DeepSeek's
  ``prompt_cache_hit_tokens`` (cache read) and ``cache_creation_input_tokens``
  (cache write); reasoning from ``completion_tokens_details.reasoning_tokens``.
  A run any of whose calls has more cache than prompt (LiteLLM's older
  Anthropic usage, whose ``prompt_tokens`` leave the cache out) or more
  reasoning than output is read with those counted apart, every call of it
  (:mod:`sim.traces.usage`); Anthropic parts that do not add up to
  ``prompt_tokens`` are kept as the provider gave them; either way counted as
  repairs. Provenance (:func:`sim.traces.usage.derived`): the input is derived
  when a cache count was subtracted from ``prompt_tokens`` (exact when it is
  Anthropic's own ``input_tokens``), the output when reasoning was
  subtracted from ``completion_tokens``;
- ``cost`` as recorded; ``finish_reason`` from the raw response;
- where the usage does not split the prompt (tau2 keeps only ``prompt_tokens``
  and ``completion_tokens`` unless the raw response is there), the cache
  reads the recorded costs imply, model by model over the file
  (:mod:`sim.traces.billed_reads`: automatic caching's prices, the costs
  consistent with them), provenance ``derived``;
- times from the message timestamps: a call starts when the message before it
  was recorded and ends when its own was (``started_s``, ``latency_s``);
- its tool calls (name, arguments) with the ``tool`` messages answering them
  (matched by id): the result text, its ``error`` flag, and the time between
  the result and the message before it as the tool's duration;
- ``text_tokens`` and ``text_sha256``: the size and hash of the message's
  ``content`` (the hash null when it has none);
- ``observation_tokens``: the simulated user's text messages that reach the
  agent after the call and before the next (the user's own tool calls and
  their results are not shown to the agent and are not counted);
  ``observation_sha256`` the hash of their texts, joined in order (null when
  none came).

Run fields: ``task_id``, the agent's model (``info.agent_info.llm``, else
the model of its calls when they agree, else the file's ``model``),
``agent_cost`` as ``cost_usd``, ``termination_reason`` verbatim as ``exit``,
``resolved`` when ``reward_info.reward`` is 1, ``start_time`` and
``duration``, and the limits ``info.max_steps`` (which counts messages: ``message_limit``) and
``info.max_errors`` (``error_limit``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from sim.traces.assemble import number_or_none, requested_tool, seconds
from sim.traces.billed_reads import with_billed_reads
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    approx_tokens,
    as_dict,
    as_list,
    content_text,
    finite_or_none,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.repairs import PARTS_KEPT, Repair
from sim.traces.skips import NO_RUNS, NO_TRAJECTORY, NO_USAGE, Skip, Unusable, or_skip
from sim.traces.usage import derived, from_disjoint, from_openai, read_apart, unknown_usage

SOURCE = "tau2"


def detect(doc: Any) -> str | None:
    """``"results"``, ``"records"``, ``"aggregated"`` or None (not tau2)."""
    if isinstance(doc, dict) and isinstance(doc.get("simulations"), list):
        return "results"
    if isinstance(doc, list) and doc and all(isinstance(item, dict) for item in doc):
        first = doc[0]
        if isinstance(first.get("messages"), list) and (
                "termination_reason" in first or "reward_info" in first):
            return "records"
        if isinstance(first.get("task_results"), list):
            return "aggregated"
    return None


def runs(doc: Any, file: str) -> Iterator[RunRecord | Skip]:
    """The runs of one tau2 document (:func:`detect` must have named it)."""
    shape = detect(doc)
    if shape == "aggregated":
        raise Unusable(NO_TRAJECTORY, f"aggregated results ({len(doc)} per-model summaries "
                                      "with task_results, no messages)")
    if shape == "results":
        info = as_dict(doc.get("info"))
        simulations = doc["simulations"]
        if not simulations:
            raise Unusable(NO_RUNS, 'a results file with "simulations": [] (no simulation '
                                    "was recorded)")
        file_model = doc.get("model") if isinstance(doc.get("model"), str) else None
    else:
        info, simulations, file_model = {}, doc, None
    agent = as_dict(info.get("agent_info"))
    model = agent.get("llm") if isinstance(agent.get("llm"), str) else None
    limits = (number_or_none(info.get("max_steps")), number_or_none(info.get("max_errors")))
    ids = [_run_id(simulation, index) for index, simulation in enumerate(simulations)]
    yield from with_billed_reads([
        or_skip(partial(read_apart, partial(_run, simulation, run_id, file, model, file_model,
                                            limits)), file, run_id)
        for simulation, run_id in zip(simulations, ids, strict=True)])


def _run_id(simulation: Any, index: int) -> str:
    if isinstance(simulation, dict) and simulation.get("id") is not None:
        return str(simulation["id"])
    return f"simulation {index}"


def _run(sim: Any, run_id: str, file: str, model: str | None, file_model: str | None,
         limits: tuple[Any, Any], apart: tuple[bool, bool] = (False, False)) -> RunRecord:
    if not isinstance(sim, dict) or not isinstance(sim.get("messages"), list):
        raise Unusable(NO_TRAJECTORY, "simulation record without a messages list")
    start = parse_utc(sim.get("start_time"))
    notes: list[Repair] = []
    conversation = _Conversation(start, model or file_model, notes, apart)
    for position, message in enumerate(sim["messages"]):
        if isinstance(message, dict):
            conversation.read(position, message)
    calls = conversation.finish()
    reward = finite_or_none(as_dict(sim.get("reward_info")).get("reward"))
    exit_label = sim.get("termination_reason")
    if model is None:  # no configured agent model: the calls', if they agree
        models = {c.model for c in calls}
        model = models.pop() if len(models) == 1 else file_model
    return RunRecord(
        run_id=run_id, source=SOURCE, file=file, calls=calls,
        task_id=None if sim.get("task_id") is None else str(sim["task_id"]),
        model=model, cost_usd=number_or_none(sim.get("agent_cost")),
        exit=None if exit_label is None else str(exit_label),
        resolved=None if reward is None else reward == 1.0,
        started_at=start, duration_s=number_or_none(sim.get("duration")),
        message_limit=limits[0], error_limit=limits[1], repairs=notes)


class _Conversation:
    """A simulation's messages read in order into calls (see the module)."""

    def __init__(self, start: datetime | None, model: str | None, notes: list[Repair],
                 apart: tuple[bool, bool]) -> None:
        self.start, self.model, self.notes, self.apart = start, model, notes, apart
        self.calls: list[CallRecord] = []
        self.replies: list[list[str | None]] = []  # per call, the user's texts after it
        self.pending: dict[str, tuple[ToolCallRecord, datetime | None]] = {}
        self.previous: datetime | None = start

    def read(self, position: int, message: dict) -> None:
        """Take one message: a call, a tool's answer or the user's reply."""
        role = message.get("role")
        moment = parse_utc(message.get("timestamp"))
        if role == "assistant":
            self._assistant(position, message, moment)
        elif role == "tool" and self.calls and \
                message.get("requestor", "assistant") == "assistant":
            answered = self.pending.pop(str(message.get("id")), None)
            if answered is not None:
                _answer(answered[0], message, self.previous, moment)
        elif role == "user" and self.calls and not message.get("tool_calls"):
            self.replies[-1].append(content_text(message.get("content")))
        self.previous = moment or self.previous

    def _assistant(self, position: int, message: dict, moment: datetime | None) -> None:
        if not message.get("usage") and position == 0 and not message.get("raw_data"):
            return  # tau2's scripted greeting: no request was made
        # any other message without usage is a call whose counts are unknown (_call)
        call = _call(message, position, self.start, self.previous, moment, self.model,
                     self.notes, self.apart)
        self.calls.append(call)
        self.replies.append([])
        self.pending = {t.id: (t, moment) for t in call.tool_calls if t.id is not None}

    def finish(self) -> list[CallRecord]:
        """The calls with their observations (a call without usage has its
        counts unknown: :func:`~sim.traces.usage.unknown_usage`)."""
        return [replace(call, observation_tokens=sum(approx_tokens(t) for t in texts),
                        observation_sha256=joined_sha256(texts))
                for call, texts in zip(self.calls, self.replies, strict=True)]


def _call(message: dict, position: int, start: datetime | None, before: datetime | None,
          moment: datetime | None, model: str | None, notes: list[Repair],
          apart: tuple[bool, bool]) -> CallRecord:
    where = f"message {position} (turn_idx {message.get('turn_idx', '?')})"
    usage = message.get("usage")
    raw = as_dict(message.get("raw_data"))
    if not usage:
        counts, provenance = unknown_usage()
    elif not isinstance(usage, dict):
        raise Unusable(NO_USAGE, f"{where}: usage is not an object")
    else:
        counts, provenance = _counts(usage, as_dict(raw.get("usage")), where, notes, apart)
    tool_calls = []
    for call in as_list(message.get("tool_calls")):
        if isinstance(call, dict):
            tool_calls.append(requested_tool(call.get("name", ""), call.get("id"),
                                             call.get("arguments")))
    started = seconds(before, start)
    latency = seconds(moment, before)
    text = content_text(message.get("content"))
    return CallRecord(
        usage=counts, provenance=provenance,
        model=raw.get("model") if isinstance(raw.get("model"), str) else model,
        cost_usd=number_or_none(message.get("cost")), finish_reason=_finish_reason(raw),
        started_s=started, latency_s=latency,
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text), tool_calls=tool_calls)


def _counts(usage: dict, raw: dict, where: str, notes: list[Repair],
            apart: tuple[bool, bool]) -> tuple[Usage, dict[str, str]]:
    """A call's counts and their provenance (see the module)."""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    details = raw.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if "input_tokens" in raw and "prompt_tokens" not in raw:  # Anthropic's own usage
        counts = from_disjoint(raw.get("input_tokens"), completion,
                               cache_read=raw.get("cache_read_input_tokens"),
                               cache_write=raw.get("cache_creation_input_tokens"),
                               reasoning=reasoning, where=where, notes=notes,
                               reasoning_apart=apart[1])
        if prompt is not None and counts.prompt_tokens != prompt:
            notes.append(("calls.input_tokens", PARTS_KEPT))
        return counts, derived(counts, raw.get("input_tokens"), completion, where)
    return from_openai(usage, where, details=raw, notes=notes, apart=apart)


def _answer(record: ToolCallRecord, message: dict, before: datetime | None,
            moment: datetime | None) -> None:
    text = content_text(message.get("content"))
    error = message.get("error")
    record.result_tokens, record.result_sha256, record.error = tool_result(
        text, error=bool(error) if error is not None else False)
    record.duration_s = seconds(moment, before)


def _finish_reason(raw: dict) -> str | None:
    reason = raw.get("finish_reason", raw.get("stop_reason"))
    if reason is None and isinstance(raw.get("choices"), list) and raw["choices"]:
        first = raw["choices"][0]
        reason = first.get("finish_reason") if isinstance(first, dict) else None
    return None if reason is None else str(reason)
