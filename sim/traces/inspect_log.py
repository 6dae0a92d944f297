"""Inspect AI eval logs (``.eval`` archives and ``.json`` logs), read with inspect_ai.

Reading needs the optional ``inspect`` extra (``pip install 'sim[inspect]'``):
the log is opened with inspect_ai's own reader
(:func:`inspect_ai.log.read_eval_log_samples`, which streams the samples of an
``.eval`` archive; a log whose header lists no ``sample_ids``, as inspect_ai
wrote them until about 0.3.42, is read whole with
:func:`inspect_ai.log.read_eval_log`, since the streaming reader refuses it),
so every log version inspect_ai reads is read here.

One sample epoch is one run (``run_id`` the sample's ``uuid``, else
``EVAL_ID/SAMPLE_ID/EPOCH``; ``task_id`` the sample id). Its **model calls** are
its ``model`` events outside the scorers (a grader's calls are not the
agent's), except failed ones (``error`` set, no output); a call whose output
records no usage is kept with its token counts unknown (provenance
``unknown``, counts 0). Inspect's ``output_tokens`` include
``reasoning_tokens``, taken out (``derived``; a sample any of whose calls has
more reasoning than output, as Gemini's thoughts are counted apart, is read
with the reasoning apart: :mod:`sim.traces.usage`). Whether its
``input_tokens`` include the cache read (``input_tokens_cache_read``) depends
on the version that wrote the log (see :func:`input_convention`): since
inspect_ai 0.3.184 they exclude it for every provider; before, the
OpenAI-style providers (:data:`INCLUDING_PROVIDERS`: OpenAI's Chat
Completions, o1 and Responses APIs, Grok and the OpenAI-compatible ones)
reported the whole prompt, and the cache is subtracted (``derived``); a
recorded ``total_tokens`` decides against the version when its arithmetic
tells. Each run says in ``conventions["input_tokens"]`` how it was read.
Google's usage recorded no cache before inspect_ai 0.3.208 (its prompt count
included any): the cache read is unknown there. An output without choices has no finish
reason, text or tool calls; ``total_cost`` is the call's cost; the event's
``timestamp`` and ``completed`` give ``started_s`` (from the sample's start) and
``latency_s``. The tool calls are those of the call's output message, answered
by the ``tool`` events with the same id (result text, ``error``, duration).
``observation_tokens`` are the user and system messages that the next call's
input adds after the previous output and its tool results, and
``observation_sha256`` the hash of their texts joined in order (null when it
adds none); ``text_tokens`` and ``text_sha256`` are the output message's text.
**Subagents**: a call in a span of type ``agent`` other than the sample's own
agents (the outermost and the outermost that made calls itself,
:class:`sim.traces.assemble.AgentTree`: an agent run as a tool, a handoff's
agent) carries that span's id in ``agent``.

A sample without any model call (it failed before its first reply) is a run of
zero calls, with its exit. Run fields: the eval's model; the sum of the calls'
costs (:func:`~sim.traces.assemble.run_cost`: null when a call records none);
``exit`` is the type of the limit that stopped the sample (Inspect's own
label: ``message``, ``token``, ``time``, ``working``, ``cost``...), else
``error`` for a sample that failed, else null (it ran to its end);
``resolved`` when the first score converts (``value_to_float``) to 1 or 0;
``started_at``, ``total_time``; the message and cost limits of the sample or
the eval.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from sim.traces.assemble import AgentTree, requested_tool, run_cost
from sim.traces.model import (
    UNKNOWN,
    CallRecord,
    RunRecord,
    Usage,
    approx_tokens,
    finite_or_none,
    joined_sha256,
    parse_utc,
    sha256_text,
    tool_result,
)
from sim.traces.repairs import Repair
from sim.traces.skips import MISSING_EXTRA, UNREADABLE, Skip, Unusable, or_skip
from sim.traces.usage import derived, from_disjoint, from_total_prompt, read_apart, unknown_usage

SOURCE = "inspect"
SCORER_SPANS = frozenset({"scorers", "scorer"})
AGENT_SPAN = "agent"
"""The span type Inspect gives an agent's run (``inspect_ai.agent``)."""

CACHE_EXCLUDED_SINCE = (0, 3, 184)
"""The inspect_ai release (28 February 2026) from which ``ModelUsage.input_tokens``
exclude the cache read for every provider (changelog: "input tokens now
excludes cached tokens whereas previously it included them for some
providers"; commit bf26615, UKGovernmentBEIS/inspect_ai#3341)."""

INCLUDING_PROVIDERS = frozenset({
    "openai", "openai-api", "grok", "together", "fireworks", "sambanova", "ollama",
    "openrouter", "perplexity", "llama-cpp-python", "vllm", "sglang",
    "hf-inference-providers", "cf", "sagemaker"})
"""The model providers (the model name's prefix, ``openai/gpt-4o``) whose
``input_tokens`` included the cache read before :data:`CACHE_EXCLUDED_SINCE`:
OpenAI (Chat Completions, o1, Responses; Azure OpenAI runs as ``openai``),
Grok, and those built on inspect_ai's OpenAI conversion
(``model_output_from_openai``: ``openai-api`` and the OpenAI-compatible
providers, SageMaker). Anthropic and Bedrock always reported the parts
apart; Groq, Mistral and Azure AI recorded no cache."""

GOOGLE_CACHE_SINCE = (0, 3, 208)
"""The inspect_ai release (19 April 2026) from which Google's usage records
its cache read (``cached_content_token_count``) and takes it out of
``input_tokens``; before, the cache was neither recorded nor taken out."""

EXCLUDES = "excludes cache (inspect_ai >= 0.3.184, or a provider that never included it)"
INCLUDES = "includes cache read, subtracted (inspect_ai < 0.3.184, OpenAI-style provider)"
INCLUDES_BY_TOTAL = ("includes cache read, subtracted: total_tokens = input + output "
                     "(the recorded inspect_ai version says excludes)")
EXCLUDES_BY_TOTAL = ("excludes cache: total_tokens = input + cache + output "
                     "(the recorded inspect_ai version says includes)")
GOOGLE_UNRECORDED = "includes any cache, not recorded (google, inspect_ai < 0.3.208)"
CONVENTIONS: tuple[str, ...] = (EXCLUDES, INCLUDES, INCLUDES_BY_TOTAL, EXCLUDES_BY_TOTAL,
                                GOOGLE_UNRECORDED)
"""The values of a run's ``conventions["input_tokens"]`` (several joined with
``"; "`` when its calls were read differently)."""

Version = tuple[int, int, int]


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
        version = parse_version(as_str(getattr(eval_, "packages", None), "inspect_ai"))
        samples: Iterator[Any]
        if eval_.dataset.sample_ids is None:
            # a log written before inspect_ai listed its sample ids (0.3.41, Oct 2024):
            # its reader streams no samples from it, so the whole log is read
            samples = iter(read_eval_log(path, resolve_attachments=True, format=fmt).samples
                           or [])
        else:
            samples = read_eval_log_samples(path, all_samples_required=False,
                                            resolve_attachments=True, format=fmt)
    while True:
        with _reading():
            sample = next(samples, None)
        if sample is None:
            return
        run_id = sample.uuid or f"{eval_.eval_id}/{sample.id}/{sample.epoch}"
        yield or_skip(partial(read_apart, partial(_run, sample, eval_, run_id, file, version)),
                      file, run_id, deep=False)


@contextmanager
def _reading() -> Iterator[None]:
    """inspect_ai's reader failing on a damaged or foreign log: Unusable."""
    try:
        yield
    except Exception as error:
        raise Unusable(UNREADABLE, f"inspect_ai cannot read it as an Inspect log "
                                   f"({type(error).__name__}: {error})") from None


def parse_version(text: str | None) -> Version | None:
    """``"0.3.95"`` (or ``"0.3.184.dev3+g1a2b"``) as ``(0, 3, 95)``; None when
    missing or not a version.

    >>> parse_version("0.3.184.dev3+g1a2b"), parse_version("unknown")
    ((0, 3, 184), None)
    """
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def as_str(packages: Any, name: str) -> str | None:
    """The recorded version of package ``name`` in an eval's ``packages``."""
    value = packages.get(name) if isinstance(packages, dict) else None
    return value if isinstance(value, str) else None


def input_convention(usage: Any, provider: str, version: Version | None) -> tuple[bool, str]:
    """Whether a call's ``input_tokens`` include its cache read, and the
    convention's label (one of :data:`CONVENTIONS`). The recorded inspect_ai
    ``version`` and the ``provider`` decide (:data:`CACHE_EXCLUDED_SINCE`,
    :data:`INCLUDING_PROVIDERS`; an unrecorded version reads as today's),
    unless the call's ``total_tokens`` tells otherwise: with a cache count,
    ``total = input + output`` (plus reasoning, for providers that count it
    apart) says the input included the cache, ``total = input + cache +
    output`` that it did not; the arithmetic wins."""
    if provider == "google" and usage.input_tokens_cache_read is None and \
            version is not None and version < GOOGLE_CACHE_SINCE:
        return False, GOOGLE_UNRECORDED
    by_version = version is not None and version < CACHE_EXCLUDED_SINCE \
        and provider in INCLUDING_PROVIDERS
    by_total = _total_says(usage)
    if by_total is None or by_total == by_version:
        return by_version, INCLUDES if by_version else EXCLUDES
    return by_total, INCLUDES_BY_TOTAL if by_total else EXCLUDES_BY_TOTAL


def _total_says(usage: Any) -> bool | None:
    """Whether ``total_tokens`` shows the input including the cache (True),
    excluding it (False), or cannot tell (None: no cache, no total, or both
    readings add up)."""
    numbers = (usage.input_tokens, usage.output_tokens, usage.total_tokens,
               usage.input_tokens_cache_read or 0, usage.input_tokens_cache_write or 0,
               usage.reasoning_tokens or 0)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        return None
    inp, out, total, read, write, reasoning = numbers
    if not read + write or not total:
        return None
    including = total in (inp + out, inp + out + reasoning)
    excluding = total in (inp + read + write + out, inp + read + write + out + reasoning)
    return including if including != excluding else None


def _run(sample: Any, eval_: Any, run_id: str, file: str, version: Version | None,
         apart: tuple[bool, bool]) -> RunRecord:
    """The run of one sample; of ``apart`` (:func:`sim.traces.usage.read_apart`)
    only the reasoning's changes the reading."""
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
    labels: dict[str, None] = {}
    calls = [_call(event, i, start, tools, notes, apart[1], version, labels)
             for i, event in enumerate(events)]
    calls = [_observed(call, events[i].input,
                       events[i + 1].input if i + 1 < len(events) else sample.messages)
             for i, call in enumerate(_mark_subagents(calls, events, spans))]
    config = eval_.config
    return RunRecord(
        run_id=str(run_id), source=SOURCE, file=file, calls=calls, task_id=str(sample.id),
        model=eval_.model, cost_usd=run_cost(calls), exit=_exit(sample),
        resolved=_resolved(sample), started_at=started_at,
        duration_s=finite_or_none(sample.total_time),
        message_limit=_first_int(getattr(sample, "message_limit", None),
                                 getattr(config, "message_limit", None)),
        cost_limit_usd=finite_or_none(getattr(config, "cost_limit", None)), repairs=notes,
        conventions={"input_tokens": "; ".join(labels)} if labels else {})


@dataclass(frozen=True)
class _SpanRef:
    """A span as :class:`~sim.traces.assemble.AgentTree` reads it (``start``:
    its order among the sample's spans)."""

    span: str
    parent: str
    start: int
    type: str | None = None


def _observed(call: CallRecord, messages: Any, following: Any) -> CallRecord:
    """``call`` with its ``observation_tokens`` and ``observation_sha256``
    (:func:`_observations` of its input ``messages`` and the ``following`` ones)."""
    tokens, sha = _observations(messages, following)
    return replace(call, observation_tokens=tokens, observation_sha256=sha)


def _mark_subagents(calls: list[CallRecord], events: list[Any],
                    spans: dict[str, tuple[str | None, str | None]]) -> list[CallRecord]:
    """``calls`` with each one's ``agent``: the id of the agent span it ran in,
    when that agent is not one of the sample's own (see the module docstring)."""
    refs = [_SpanRef(str(i), str(p or ""), n, t) for n, (i, (p, t)) in enumerate(spans.items())]
    tree = AgentTree(refs, lambda ref: ref.type == AGENT_SPAN)
    agents = [tree.agent_of(_SpanRef("", str(getattr(e, "span_id", None) or ""), 0))
              for e in events]
    own = tree.outermost(agents)
    return [replace(call, agent=None if agent in own else agent)
            for call, agent in zip(calls, agents, strict=True)]


def _in_scorer(span_id: str | None, spans: dict[str, tuple[str | None, str | None]]) -> bool:
    seen = 0
    while span_id is not None and seen < 1000:
        parent, kind = spans.get(span_id, (None, None))
        if kind in SCORER_SPANS:
            return True
        span_id, seen = parent, seen + 1
    return False


def _call(event: Any, index: int, start: Any, tools: dict[str, Any], notes: list[Repair],
          apart: bool, version: Version | None, labels: dict[str, None]) -> CallRecord:
    where = f"model event {index} ({event.model})"
    counts, provenance = _usage(event.output.usage, str(event.model or "").split("/")[0],
                                version, where, notes, apart, labels)
    message = event.output.message if event.output.choices else None
    records = []
    for call in (getattr(message, "tool_calls", None) or ()):
        record = requested_tool(call.function, call.id, call.arguments)
        answer = tools.get(call.id)
        if answer is not None:
            text = answer.result if isinstance(answer.result, str) else _text(answer.result)
            record.result_tokens, record.result_sha256, record.error = tool_result(
                text, error=answer.error is not None)
            record.duration_s = _elapsed(answer.timestamp, answer.completed,
                                         answer.working_time)
        records.append(record)
    text = message.text if message is not None else None
    usage = event.output.usage
    return CallRecord(
        usage=counts, model=event.model, provenance=provenance,
        cost_usd=None if usage is None else finite_or_none(usage.total_cost),
        finish_reason=event.output.choices[0].stop_reason if event.output.choices else None,
        started_s=(event.timestamp - start).total_seconds(),
        latency_s=_elapsed(event.timestamp, event.completed, event.working_time),
        text_tokens=approx_tokens(text), text_sha256=sha256_text(text), tool_calls=records)


def _usage(usage: Any, provider: str, version: Version | None, where: str,
           notes: list[Repair], apart: bool, labels: dict[str, None]
           ) -> tuple[Usage, dict[str, str]]:
    """A call's counts in the trace model's convention and their provenance;
    its convention's label added to ``labels``."""
    if usage is None:
        return unknown_usage()
    including, label = input_convention(usage, provider, version)
    labels[label] = None
    parts = {"cache_read": usage.input_tokens_cache_read,
             "cache_write": usage.input_tokens_cache_write,
             "reasoning": usage.reasoning_tokens, "where": where, "notes": notes,
             "reasoning_apart": apart}
    counts = (from_total_prompt(usage.input_tokens, usage.output_tokens,
                                names=("input_tokens", "output_tokens"), **parts)
              if including else from_disjoint(usage.input_tokens, usage.output_tokens, **parts))
    provenance = derived(counts, usage.input_tokens, usage.output_tokens, where)
    if label == GOOGLE_UNRECORDED:
        provenance["cache_read_tokens"] = UNKNOWN
    return counts, provenance


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

