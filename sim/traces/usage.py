"""Token usage from the providers' conventions into the trace model's.

The trace model (:mod:`sim.traces.model`) counts a call's prompt as three
disjoint parts, ``input`` (uncached) + ``cache_read`` + ``cache_write``, and its
output as two, ``output`` (without reasoning) + ``reasoning``. Each function
here returns one call's usage as the harness's own type,
:class:`sim.harness.messages.Usage` (reasoning as ``thinking_tokens``), built
by keyword. Providers say it two ways, and each function takes one:

- :func:`from_total_prompt`: the prompt total *includes* the cache counts
  (OpenAI ``prompt_tokens`` with ``cached_tokens``; DeepSeek
  ``prompt_cache_hit_tokens``; OpenTelemetry ``gen_ai.usage.input_tokens``),
  and the output total includes reasoning (OpenAI ``completion_tokens`` with
  ``reasoning_tokens``; Inspect's ``output_tokens``);
- :func:`from_disjoint`: the parts are reported apart (Anthropic's
  ``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``).

A count that is not a non-negative integer makes the call unusable
(:class:`~sim.traces.skips.Unusable`, naming ``where``). Two impossible
relations are explained by a provider counting the parts apart, and repaired
so (noted in ``notes`` as ``(field, reason)``, :mod:`sim.traces.repairs`):

- **cache above the prompt** (``cache_read + cache_write > prompt``): the
  prompt total was reported *without* the cache, Anthropic's own convention
  passed through an OpenAI-style ``prompt_tokens`` (LiteLLM's older Anthropic
  usage; some OpenTelemetry instrumentations): the prompt is taken as the
  uncached input and the cache counts kept as they are;
- **reasoning above the output**: the output was reported without the
  reasoning (Gemini's ``candidatesTokenCount`` beside ``thoughtsTokenCount``,
  passed through OpenAI-style or Inspect usage): the output is kept whole and
  the reasoning counted apart.

A source that counts apart does so for every call, not only for those where
it shows, so the importers read a whole run one way: when any of its calls
needs a repair, the run is read again with ``cache_apart`` / ``reasoning_apart``
set (every call with a cache, or with reasoning, is then noted:
:func:`read_apart`).

**Provenance**: a count that is not the recorded figure itself is
**derived** (:data:`~sim.traces.model.DERIVED`): the uncached input when the
cache was subtracted from a prompt total, the output when the reasoning was
subtracted from a completion total (:func:`derived`). A call whose source
records no usage has every count **unknown** (:data:`~sim.traces.model.UNKNOWN`),
its :class:`~sim.traces.model.Usage` all 0, and is kept with its run
(:func:`unknown_usage`); one that records a prompt total but no output total
(or the reverse) has the missing side's columns unknown (:func:`from_totals`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.harness.messages import Usage
from sim.traces.model import DERIVED, MAX_COUNT, PROVENANCE_FIELDS, UNKNOWN, RunRecord, as_dict
from sim.traces.repairs import PROMPT_WITHOUT_CACHE, REASONING_APART, Repair, short_repr
from sim.traces.skips import BAD_COUNT, Unusable


def count(value: Any, name: str, where: str, *, default: int | None = None) -> int:
    """``value`` as a token count: a non-negative integer (an integral float or a
    decimal string, as OTLP JSON writes int64, is accepted). None gives
    ``default`` when one is given."""
    if value is None and default is not None:
        return default
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            number = None
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_COUNT:
        raise Unusable(BAD_COUNT, f"{where}: {name} is {short_repr(value)}, not a non-negative "
                                  f"integer{'' if not isinstance(number, int) else ' in range'}")
    return number


def from_total_prompt(prompt: Any, output: Any, *, cache_read: Any = None,
                      cache_write: Any = None, reasoning: Any = None, where: str,
                      names: tuple[str, str] = ("prompt_tokens", "completion_tokens"),
                      notes: list[Repair] | None = None, cache_apart: bool = False,
                      reasoning_apart: bool = False) -> Usage:
    """Usage from a prompt total that includes the cache counts and an output
    total that includes reasoning (missing cache or reasoning counts are 0);
    a total that cannot include them (or ``cache_apart`` / ``reasoning_apart``)
    is read as without them, noted in ``notes`` (see the module)."""
    total = count(prompt, names[0], where)
    out = count(output, names[1], where)
    read = count(cache_read, "cache read tokens", where, default=0)
    write = count(cache_write, "cache write tokens", where, default=0)
    think = count(reasoning, "reasoning tokens", where, default=0)
    uncached = total - read - write
    if cache_apart or uncached < 0:
        uncached = total
        if read + write and notes is not None:
            notes.append(("calls.input_tokens", PROMPT_WITHOUT_CACHE))
    return Usage(input_tokens=uncached, cache_read_tokens=read, cache_write_tokens=write,
                 output_tokens=_output(out, think, notes, reasoning_apart), thinking_tokens=think)


SERVICE_TIERS = ("flex", "priority")
"""OpenAI service tiers whose name LangChain and LangSmith put before a detail
key (``flex_cache_read``, ``priority_reasoning``)."""
CACHE_WRITE_TTLS = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens",
                    "ephemeral_1hr_input_tokens")
"""Anthropic's cache writes by lifetime, as LangChain and LangSmith copy them
into ``input_token_details`` (``1hr``: LangSmith's Claude Agent SDK integration)."""


def langchain_details(prompt: Any, output: Any, where: str) -> tuple[int, int, int]:
    """The cache reads, cache writes and reasoning (tokens, in that order) of a LangChain
    ``UsageMetadata``'s ``input_token_details`` (``prompt``) and
    ``output_token_details`` (``output``), as langchain-openai,
    langchain-anthropic and LangSmith's wrappers fill them:

    - reads: ``cache_read``; under an OpenAI service tier ``flex_cache_read`` or
      ``priority_cache_read`` instead (the bare ``flex``/``priority`` key is the
      tier's uncached rest, already inside the prompt total);
    - writes: ``cache_creation``, or Anthropic's writes by lifetime
      (:data:`CACHE_WRITE_TTLS`) summed. Some writers fill both with the same
      tokens (langchain-anthropic before 1.0 copied the breakdown beside the
      total), others one of them, so the larger of the two is read;
    - reasoning: ``reasoning``, or ``flex_reasoning`` / ``priority_reasoning``.

    Each figure is the largest of its spellings (a writer uses one). A value
    that is not a count makes the call unusable (:func:`count`)."""
    prompt, output = as_dict(prompt), as_dict(output)

    def largest(details: dict, names: list[str]) -> int:
        return max((count(details.get(n), f"{n} tokens", where, default=0) for n in names),
                   default=0)

    ttls = sum(count(prompt.get(n), f"{n} tokens", where, default=0) for n in CACHE_WRITE_TTLS)
    return (largest(prompt, ["cache_read", *(f"{t}_cache_read" for t in SERVICE_TIERS)]),
            max(largest(prompt, ["cache_creation"]), ttls),
            largest(output, ["reasoning", *(f"{t}_reasoning" for t in SERVICE_TIERS)]))


def from_disjoint(uncached: Any, output: Any, *, cache_read: Any = None, cache_write: Any = None,
                  reasoning: Any = None, where: str, notes: list[Repair] | None = None,
                  reasoning_apart: bool = False) -> Usage:
    """Usage from disjoint prompt parts; ``output`` includes ``reasoning``
    unless it cannot (or ``reasoning_apart``: see the module)."""
    out = count(output, "output tokens", where)
    think = count(reasoning, "reasoning tokens", where, default=0)
    return Usage(input_tokens=count(uncached, "input tokens", where),
                 cache_read_tokens=count(cache_read, "cache read tokens", where, default=0),
                 cache_write_tokens=count(cache_write, "cache write tokens", where, default=0),
                 output_tokens=_output(out, think, notes, reasoning_apart),
                 thinking_tokens=think)


def _output(out: int, think: int, notes: list[Repair] | None, apart: bool) -> int:
    """Output tokens without reasoning: ``out - think``, or ``out`` when the
    reasoning was counted apart (noted)."""
    if apart or think > out:
        if think and notes is not None:
            notes.append(("calls.reasoning_tokens", REASONING_APART))
        return out
    return out - think


def from_openai(usage: dict, where: str, *, details: dict | None = None,
                notes: list[Repair] | None = None,
                apart: tuple[bool, bool] = (False, False)) -> tuple[Usage, dict[str, str]]:
    """Usage of an OpenAI-style usage (``prompt_tokens`` including the cache,
    ``completion_tokens`` including reasoning) and its provenance
    (:func:`derived`), the one reading every importer of such usage shares.
    The cache and reasoning counts come from ``details`` (the provider's raw
    usage, when the source keeps it apart from the totals; else ``usage``
    itself): cache read from ``prompt_tokens_details.cached_tokens``, else DeepSeek's
    ``prompt_cache_hit_tokens``, else ``cache_read_input_tokens``; cache write
    from ``cache_creation_input_tokens``, else
    ``prompt_tokens_details.cache_creation_tokens`` or ``cache_write_tokens``;
    reasoning from ``completion_tokens_details.reasoning_tokens``.
    ``apart`` is ``(cache_apart, reasoning_apart)`` (see the module)."""
    raw = usage if details is None else details
    prompt_details = as_dict(raw.get("prompt_tokens_details"))
    read = _first(prompt_details.get("cached_tokens"), raw.get("prompt_cache_hit_tokens"),
                  raw.get("cache_read_input_tokens"))
    write = _first(raw.get("cache_creation_input_tokens"),
                   prompt_details.get("cache_creation_tokens"),
                   prompt_details.get("cache_write_tokens"))
    reasoning = as_dict(raw.get("completion_tokens_details")).get("reasoning_tokens")
    prompt, output = usage.get("prompt_tokens"), usage.get("completion_tokens")
    counts = from_total_prompt(prompt, output, cache_read=read, cache_write=write,
                               reasoning=reasoning, where=where, notes=notes,
                               cache_apart=apart[0], reasoning_apart=apart[1])
    return counts, derived(counts, prompt, output, where)


def from_responses(usage: dict, where: str, *, notes: list[Repair] | None = None,
                   apart: tuple[bool, bool] = (False, False)) -> tuple[Usage, dict[str, str]]:
    """Usage of OpenAI's Responses API (``input_tokens`` including
    ``input_tokens_details.cached_tokens``, ``output_tokens`` including
    ``output_tokens_details.reasoning_tokens``) and its provenance
    (:func:`derived`); ``apart`` as for :func:`from_openai`."""
    names = ("input_tokens", "output_tokens")
    prompt, output = usage.get(names[0]), usage.get(names[1])
    counts = from_total_prompt(
        prompt, output, cache_read=as_dict(usage.get("input_tokens_details")).get("cached_tokens"),
        reasoning=as_dict(usage.get("output_tokens_details")).get("reasoning_tokens"),
        where=where, names=names, notes=notes, cache_apart=apart[0], reasoning_apart=apart[1])
    return counts, derived(counts, prompt, output, where)


def _first(*values: Any) -> Any:
    """The first value that is not None (None when all are)."""
    return next((v for v in values if v is not None), None)


def read_apart(build: Callable[[tuple[bool, bool]], RunRecord]) -> RunRecord:
    """A run read once (``build((False, False))``), and read again with
    ``(cache_apart, reasoning_apart)`` when its repairs say the source counts
    the cache, or the reasoning, apart (see the module): the importers' one
    way of reading a whole run in one convention."""
    record = build((False, False))
    reasons = {reason for _, reason in record.repairs}
    apart = PROMPT_WITHOUT_CACHE in reasons, REASONING_APART in reasons
    return build(apart) if any(apart) else record


PROMPT_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_write_tokens")
"""The parts of a call's prompt (a call with any of them unknown is left out
of a summary's prompt fit and cache shares)."""
OUTPUT_COLUMNS = ("output_tokens", "reasoning_tokens")
"""The parts of a call's output."""


def from_totals(prompt: Any, output: Any, *, cache_read: Any = None, cache_write: Any = None,
               reasoning: Any = None, where: str, names: tuple[str, str],
               notes: list[Repair] | None = None, apart: tuple[bool, bool] = (False, False)
               ) -> tuple[Usage, dict[str, str]]:
    """A call's usage (:func:`from_total_prompt`: a prompt total that includes
    the cache, an output that includes reasoning) and its provenance
    (:attr:`sim.traces.model.CallRecord.provenance`), the one reading of every
    span dialect (and ATIF step) whose prompt count includes the cache:
    the uncached input is ``derived`` when cache tokens were subtracted from
    the prompt, the output when reasoning was subtracted. A span without a
    prompt count (None) has its three prompt columns ``unknown`` (0 in the
    usage), one without an output count its output and reasoning; a present
    count that is not a token count is Unusable, as before."""
    unknown: dict[str, str] = {}
    if prompt is None:
        unknown.update(dict.fromkeys(PROMPT_COLUMNS, UNKNOWN))
        prompt, cache_read, cache_write = 0, None, None
    if output is None:
        unknown.update(dict.fromkeys(OUTPUT_COLUMNS, UNKNOWN))
        output, reasoning = 0, None
    usage = from_total_prompt(prompt, output, cache_read=cache_read, cache_write=cache_write,
                              reasoning=reasoning, where=where, names=names, notes=notes,
                              cache_apart=apart[0], reasoning_apart=apart[1])
    return usage, derived(usage, prompt, output, where) | unknown


def derived(counts: Usage, prompt: Any, output: Any, where: str) -> dict[str, str]:
    """The provenance of ``counts`` read from the recorded ``prompt`` and
    ``output`` figures (the values the usage reading took as its input and
    output totals; already checked as counts): ``input_tokens`` derived when
    it differs from ``prompt``, ``output_tokens`` when it differs from
    ``output``; the rest exact (not listed).

    >>> derived(Usage(input_tokens=400, cache_read_tokens=600, output_tokens=50), 1000, 50, "x")
    {'input_tokens': 'derived'}
    """
    provenance = {}
    if counts.input_tokens != count(prompt, "prompt tokens", where):
        provenance["input_tokens"] = DERIVED
    if counts.output_tokens != count(output, "output tokens", where):
        provenance["output_tokens"] = DERIVED
    return provenance


def unknown_usage() -> tuple[Usage, dict[str, str]]:
    """The usage of a call whose source records none: counts 0, every
    provenance unknown (so the writer writes null, not 0)."""
    return Usage(), dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
