"""Inspect AI eval logs (``.eval`` archives and ``.json`` logs), read with inspect_ai.

Reading needs the optional ``inspect`` extra (``pip install 'sim[inspect]'``):
the log is opened with inspect_ai's own reader
(:func:`inspect_ai.log.read_eval_log_samples`, which streams the samples of an
``.eval`` archive), so every log version inspect_ai reads is read here.

One sample epoch is one run (``run_id`` the sample's ``uuid``, else
``EVAL_ID/SAMPLE_ID/EPOCH``; ``task_id`` the sample id). Its **model calls** are
its ``model`` events outside the scorers (a grader's calls are not the
agent's), except failed ones (``error`` set, no output): Inspect's
``input_tokens`` exclude the cache counts (``input_tokens_cache_read``,
``input_tokens_cache_write``) and its ``output_tokens`` include
``reasoning_tokens`` (a sample any of whose calls has more reasoning than
output, as Gemini's thoughts are counted apart, is read with the reasoning
apart: :mod:`sim.traces.usage`); an output without choices has no finish
reason, text or tool calls; ``total_cost`` is the call's cost; the event's
``timestamp`` and ``completed`` give ``started_s`` (from the sample's start) and
``latency_s``. The tool calls are those of the call's output message, answered
by the ``tool`` events with the same id (result text, ``error``, duration).
``observation_tokens`` are the user and system messages that the next call's
input adds after the previous output and its tool results, and
``observation_sha256`` the hash of their texts joined in order (null when it
adds none); ``text_tokens`` and ``text_sha256`` are the output message's text.

A sample without any model call (it failed before its first reply) is a run of
zero calls, with its exit. Run fields: the eval's model; the sum of the calls'
costs (null when none is recorded); ``exit`` is the type of the limit that
stopped the sample (Inspect's own label: ``message``, ``token``, ``time``,
``working``, ``cost``...), else ``error`` for a sample that failed, else null
(it ran to its end); ``resolved`` when the first score converts
(``value_to_float``) to 1 or 0; ``started_at``, ``total_time``; the message and
cost limits of the sample or the eval.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    canonical_arguments,
    finite_or_none,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.repairs import Repair
from sim.traces.skips import MISSING_EXTRA, NO_USAGE, UNREADABLE, Skip, Unusable
from sim.traces.usage import from_disjoint, needs_apart

SOURCE = "inspect"
SCORER_SPANS = frozenset({"scorers", "scorer"})


def available() -> bool:
    """Whether inspect_ai is installed."""
    return importlib.util.find_spec("inspect_ai") is not None


def runs(path: Path, file: str, fmt: Literal["eval", "json"]) -> Iterator[RunRecord | Skip]:
    """The runs of the Inspect log at ``path`` (``fmt``: ``"eval"`` or ``"json"``)."""
    if not available():
        raise Unusable(MISSING_EXTRA, "an Inspect AI log: install the 'inspect' extra "
                                      "(pip install 'sim[inspect]') to read it")
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    with _reading():
        eval_ = read_eval_log(path, header_only=True, format=fmt).eval
        samples = read_eval_log_samples(path, all_samples_required=False,
                                        resolve_attachments=True, format=fmt)
    while True:
        with _reading():
            sample = next(samples, None)
        if sample is None:
            return
        run_id = sample.uuid or f"{eval_.eval_id}/{sample.id}/{sample.epoch}"
        try:
            record = _run(sample, eval_, run_id, file)
            apart = needs_apart(record.repairs)
            if apart[1]:  # the reasoning is counted apart: every call is read so
                record = _run(sample, eval_, run_id, file, apart[1])
            yield record
        except Unusable as problem:
            yield Skip(file, problem.reason, problem.detail, run_id)


@contextmanager
def _reading() -> Iterator[None]:
    """inspect_ai's reader failing on a damaged or foreign log: Unusable."""
    try:
        yield
    except Exception as error:
        raise Unusable(UNREADABLE, f"inspect_ai cannot read it as an Inspect log "
                                   f"({type(error).__name__}: {error})") from None


def _run(sample: Any, eval_: Any, run_id: str, file: str, apart: bool = False) -> RunRecord:
    spans: dict[str, tuple[str | None, str | None]] = {}
    events = []
    tools: dict[str, Any] = {}
    for event in sample.events or ():
        kind = getattr(event, "event", None)
        if kind == "span_begin":
            spans[event.id] = (event.parent_id, event.type)
        elif kind == "model" and not _in_scorer(getattr(event, "span_id", None), spans):
            if event.error is None or event.output.usage is not None:
                events.append(event)
        elif kind == "tool" and getattr(event, "id", None) is not None:
            tools[event.id] = event
    started_at = parse_utc(sample.started_at)
    start = started_at or (events[0].timestamp if events else None)
    notes: list[Repair] = []
    calls = [_call(event, i, start, tools, notes, apart) for i, event in enumerate(events)]
    for i, call in enumerate(calls):
        following = events[i + 1].input if i + 1 < len(events) else sample.messages
        call.observation_tokens, call.observation_sha256 = _observations(events[i].input,
                                                                         following)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    config = eval_.config
    return RunRecord(
        run_id=str(run_id), source=SOURCE, file=file, calls=calls, task_id=str(sample.id),
        model=eval_.model, cost_usd=sum(costs) if costs else None, exit=_exit(sample),
        resolved=_resolved(sample), started_at=started_at,
        duration_s=finite_or_none(sample.total_time),
        message_limit=_first_int(getattr(sample, "message_limit", None),
                                 getattr(config, "message_limit", None)),
        cost_limit_usd=finite_or_none(getattr(config, "cost_limit", None)), repairs=notes)


def _in_scorer(span_id: str | None, spans: dict[str, tuple[str | None, str | None]]) -> bool:
    seen = 0
    while span_id is not None and seen < 1000:
        parent, kind = spans.get(span_id, (None, None))
        if kind in SCORER_SPANS:
            return True
        span_id, seen = parent, seen + 1
    return False


def _call(event: Any, index: int, start: Any, tools: dict[str, Any], notes: list[Repair],
          apart: bool) -> CallRecord:
    where = f"model event {index} ({event.model})"
    usage = event.output.usage
    if usage is None:
        raise Unusable(NO_USAGE, f"{where}: no usage")
    counts = from_disjoint(usage.input_tokens, usage.output_tokens,
                           cache_read=usage.input_tokens_cache_read,
                           cache_write=usage.input_tokens_cache_write,
                           reasoning=usage.reasoning_tokens, where=where, notes=notes,
                           reasoning_apart=apart)
    message = event.output.message if event.output.choices else None
    records = []
    for call in (getattr(message, "tool_calls", None) or ()):
        record = ToolCallRecord(name=call.function, id=call.id,
                                arguments=canonical_arguments(call.arguments))
        answer = tools.get(call.id)
        if answer is not None:
            text = answer.result if isinstance(answer.result, str) else _text(answer.result)
            record.result_tokens, record.result_sha256, record.error = tool_result(
                text, error=answer.error is not None)
            record.duration_s = _elapsed(answer.timestamp, answer.completed,
                                         answer.working_time)
        records.append(record)
    text = message.text if message is not None else None
    return CallRecord(
        usage=counts, model=event.model, cost_usd=finite_or_none(usage.total_cost),
        finish_reason=event.output.choices[0].stop_reason if event.output.choices else None,
        started_s=(event.timestamp - start).total_seconds(),
        latency_s=_elapsed(event.timestamp, event.completed, event.working_time),
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text), tool_calls=records)


def _elapsed(begun: Any, completed: Any, working: float | None) -> float | None:
    if begun is not None and completed is not None:
        return (completed - begun).total_seconds()
    return finite_or_none(working)


def _observations(before: list, after: list) -> tuple[int | None, str | None]:
    """Tokens and text hash (:func:`joined_sha256`) of the user/system messages
    ``after`` adds to ``before`` (beyond the output and tool results); both None
    when it does not extend it, the hash None when it adds none."""
    if len(after) < len(before):
        return None, None
    texts = [m.text for m in after[len(before):] if m.role in ("user", "system")]
    return sum(approx_tokens(t) for t in texts), joined_sha256(texts)


def _text(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, list):
        return "".join(getattr(part, "text", "") or "" for part in content)
    return str(content)


def _exit(sample: Any) -> str | None:
    if sample.limit is not None:
        return str(sample.limit.type)
    if sample.error is not None:
        return "error"
    return None


def _resolved(sample: Any) -> bool | None:
    if not sample.scores:
        return None
    from inspect_ai.scorer import value_to_float

    score = next(iter(sample.scores.values()))
    try:
        value = value_to_float()(score.value)
    except (TypeError, ValueError):
        return None
    return True if value == 1.0 else False if value == 0.0 else None


def _first_int(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None

