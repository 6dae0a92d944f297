"""Langfuse's usage and cost of one generation, in the trace model's convention.

Langfuse stores a generation's usage as ``usageDetails``: a flat object of
usage types (arbitrary keys) that it prices one by one and, when no
``total`` is given, sums to a total. So its keys are **disjoint**: ``input``
is the uncached prompt and ``output`` the output without the detail keys
Langfuse's integrations split from them and subtract (the server's OpenAI
conversion makes ``input_<key>``/``output_<key>`` of every
``prompt_tokens_details``/``completion_tokens_details`` key; the LangChain
handler ``input_cache_read``, ``input_cache_creation``, ``output_reasoning``
...; its OpenTelemetry ingestion ``input_cached_tokens``,
``input_cache_creation``, ``output_reasoning_tokens``, ``output_audio_tokens``).
Keys are read here as follows (:func:`counts`):

====================================  ========================================
keys                                  read as
====================================  ========================================
``input`` (else ``input_tokens``)     uncached input
``output`` (else ``output_tokens``)   output without reasoning
``input_cached_tokens``,              cache reads, apart from ``input``
``input_cache_read``,
``cache_read_input_tokens``,
``cache_read_tokens``, ``cache_read``,
``input_cached_*``, ``cached_modality_*``
``input_cache_creation*`` (with the   cache writes, apart from ``input``
``_5m``/``_1h`` tiers),
``input_cache_write``,
``cache_creation_input_tokens``,
``cache_write_tokens``,
``cache_creation``
``output_reasoning_tokens``,          reasoning, apart from ``output``
``output_reasoning``,
``reasoning_tokens``,
``thoughts_token_count``
other ``input_*`` / ``output_*``      parts of the input / output (audio,
(``input_audio_tokens``,              modality, prediction tokens), added
``input_modality_TEXT``...)           to it
``prompt_details.cache_read``,        cache *inside* ``input``: subtracted
``cache_read.input_tokens``           from it (``input_tokens`` derived)
``prompt_details.cache_write``,       cache writes inside ``input``:
``cache_creation.input_tokens``       subtracted
``completion_details.reasoning``,     reasoning *inside* ``output``:
``reasoning.output_tokens``           subtracted (``output_tokens`` derived)
``prompt_details.*``,                 parts already counted in ``input`` /
``completion_details.*`` (audio...)   ``output``: not added
``total``, ``total_tokens``,          not used (a tier's part of
``cache_creation_ephemeral_*``        ``cache_creation_input_tokens``)
====================================  ========================================

The "inside" keys are OpenInference's and the OpenTelemetry GenAI names
(``llm.token_count.prompt_details.cache_read``...) as Langfuse servers before
v3.175.0 (cache) and v4.7.0 (reasoning) stored them, raw beside the prompt
and completion totals; later servers convert them into the disjoint keys
above. A run read so says it in :attr:`~sim.traces.model.RunRecord.conventions`.
An OpenAI-style usage (``prompt_tokens``, ``completion_tokens``, as the
Langfuse SDK's OpenAI integration records it in its spans before the server
converts it) is read with :func:`sim.traces.usage.from_openai`, and the
Responses API's (``input_tokens`` with ``input_tokens_details``,
``output_tokens`` with ``output_tokens_details``) the same way, the cached
tokens inside ``input_tokens`` and the reasoning inside ``output_tokens``.
Values that are not counts (a nested object the server would drop) are
passed over.

**Provenance** (:attr:`~sim.traces.model.CallRecord.provenance`): a column
computed from recorded figures (a count subtracted or parts added) is
``derived``; a generation with no usage (``usageDetails`` missing or empty,
or neither input nor output) has every token column ``unknown`` (0 in the
usage), one with input but no output (or the reverse) the missing side's
columns. The cost (:func:`cost`): ``costDetails.total`` (exact), else the
sum of its parts (derived), else ``totalCost``/``calculatedTotalCost``
(exact), else unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.traces.model import DERIVED, EXACT, UNKNOWN, Usage, as_dict, finite_or_none
from sim.traces.repairs import PROMPT_WITHOUT_CACHE, REASONING_APART, Repair
from sim.traces.usage import count, from_openai, from_total_prompt

READ_KEYS = frozenset({"input_cached_tokens", "input_cache_read", "cache_read_input_tokens",
                       "cache_read_tokens", "cache_read"})
WRITE_KEYS = frozenset({"input_cache_write", "cache_creation_input_tokens",
                        "cache_write_tokens", "cache_creation"})
REASONING_KEYS = frozenset({"output_reasoning_tokens", "output_reasoning", "reasoning_tokens",
                            "thoughts_token_count", "thoughtsTokenCount"})
READ_INSIDE = frozenset({"prompt_details.cache_read", "cache_read.input_tokens"})
WRITE_INSIDE = frozenset({"prompt_details.cache_write", "cache_creation.input_tokens"})
REASONING_INSIDE = frozenset({"completion_details.reasoning", "reasoning.output_tokens"})
_UNUSED = frozenset({"total", "total_tokens", "input", "output", "input_tokens",
                     "output_tokens"})
_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
            "reasoning_tokens")
INSIDE_CONVENTION = ("{key} counted inside {side} (a Langfuse server before {version} "
                     "stored OpenInference/GenAI keys raw): subtracted")


@dataclass
class Counted:
    """One generation's usage in the trace model's convention, with the
    provenance of each token column that is not exact and the conventions
    read (``{what: how}``)."""

    usage: Usage
    provenance: dict[str, str] = field(default_factory=dict)
    conventions: dict[str, str] = field(default_factory=dict)


def unknown() -> Counted:
    """A generation without usage: zeros, every token column unknown."""
    return Counted(Usage(), dict.fromkeys(_COLUMNS, UNKNOWN))


@dataclass
class _Parts:
    """The detail keys of a ``usageDetails``, summed by kind (with how many
    nonzero keys made each sum)."""

    sums: dict[str, int] = field(default_factory=dict)
    keys: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, key: str, value: int) -> None:
        self.sums[kind] = self.sums.get(kind, 0) + value
        if value:
            self.keys.setdefault(kind, []).append(key)

    def get(self, kind: str) -> int:
        return self.sums.get(kind, 0)

    def several(self, kind: str) -> bool:
        return len(self.keys.get(kind, [])) > 1


def _kind(key: str) -> str | None:
    """What a ``usageDetails`` key counts (see the module), None for unused."""
    if key in _UNUSED:
        return None
    if key in READ_KEYS or key.startswith(("input_cached_", "cached_modality_")):
        return "read"
    if key in WRITE_KEYS or key.startswith(("input_cache_creation", "input_cache_write")):
        return "write"
    if key in REASONING_KEYS:
        return "reasoning"
    if key in READ_INSIDE:
        return "read_inside"
    if key in WRITE_INSIDE:
        return "write_inside"
    if key in REASONING_INSIDE:
        return "reasoning_inside"
    if key.startswith("input_"):
        return "input"
    if key.startswith("output_"):
        return "output"
    return None


def counts(usage: Any, where: str, notes: list[Repair] | None = None) -> Counted:
    """A Langfuse ``usageDetails`` object (or an OpenAI-style usage) read into
    the trace model's convention (see the module); ``notes`` receives the
    repairs of an impossible relation (a cache inside the input above it)."""
    usage = as_dict(usage)
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return _openai(usage, where, notes)
    if isinstance(usage.get("input_tokens_details"), dict) or \
            isinstance(usage.get("output_tokens_details"), dict):
        return _responses(usage, where, notes)
    inside = _side(usage, "input", "input_tokens", where)
    outside = _side(usage, "output", "output_tokens", where)
    if inside is None and outside is None:
        return unknown()
    parts = _Parts()
    for key, value in usage.items():
        kind = _kind(str(key))
        if kind is not None and not isinstance(value, dict | list) and value is not None:
            parts.add(kind, str(key), count(value, f"usageDetails.{key}", where))
    out = Counted(Usage())
    uncached = _subtract(out, inside, parts, ("read_inside", "write_inside"), "input_tokens",
                         "v3.175.0", notes, PROMPT_WITHOUT_CACHE)
    output = _subtract(out, outside, parts, ("reasoning_inside",), "output_tokens",
                       "v4.7.0", notes, REASONING_APART)
    for column, value, kind in (("input_tokens", uncached, "input"),
                                ("output_tokens", output, "output")):
        if value is None:
            out.provenance[column] = UNKNOWN
        elif parts.get(kind):
            out.provenance[column] = DERIVED
    for column, kinds in (("cache_read_tokens", ("read", "read_inside")),
                          ("cache_write_tokens", ("write", "write_inside")),
                          ("reasoning_tokens", ("reasoning", "reasoning_inside"))):
        if sum(len(parts.keys.get(k, [])) for k in kinds) > 1:
            out.provenance[column] = DERIVED
    if output is None and not (parts.get("reasoning") or parts.get("reasoning_inside")):
        out.provenance["reasoning_tokens"] = UNKNOWN
    out.usage = Usage(
        input_tokens=0 if uncached is None else uncached + parts.get("input"),
        cache_read_tokens=parts.get("read") + parts.get("read_inside"),
        cache_write_tokens=parts.get("write") + parts.get("write_inside"),
        output_tokens=0 if output is None else output + parts.get("output"),
        thinking_tokens=parts.get("reasoning") + parts.get("reasoning_inside"))
    return out


def _side(usage: dict, key: str, synonym: str, where: str) -> int | None:
    """The recorded count of one side (``input`` or ``output``), else its
    synonym's; None when neither is recorded."""
    name = key if usage.get(key) is not None else synonym
    value = usage.get(name)
    return None if value is None else count(value, f"usageDetails.{name}", where)


def _subtract(out: Counted, total: int | None, parts: _Parts, kinds: tuple[str, ...],
              column: str, version: str, notes: list[Repair] | None, reason: str) -> int | None:
    """One side's ``total`` without the counts recorded inside it (``kinds``),
    derived and its convention noted; kept whole (a repair noted) when they
    exceed it; None when the side is not recorded."""
    if total is None:
        return None
    inner = sum(parts.get(k) for k in kinds)
    if not inner:
        return total
    keys = ", ".join(k for kind in kinds for k in parts.keys.get(kind, []))
    side = "input" if column == "input_tokens" else "output"
    if inner > total:
        if notes is not None:
            notes.append((f"calls.{column}", reason))
        return total
    out.provenance[column] = DERIVED
    out.conventions[column] = INSIDE_CONVENTION.format(key=keys, side=side, version=version)
    return total - inner


def _openai(usage: dict, where: str, notes: list[Repair] | None) -> Counted:
    """An OpenAI-style usage: the cache subtracted from ``prompt_tokens`` and
    the reasoning from ``completion_tokens``."""
    return _from_totals(from_openai(usage, where, notes=notes), usage,
                        ("prompt_tokens", "completion_tokens"), where)


def _responses(usage: dict, where: str, notes: list[Repair] | None) -> Counted:
    """OpenAI's Responses API usage (``input_tokens`` including
    ``input_tokens_details.cached_tokens``, ``output_tokens`` including
    ``output_tokens_details.reasoning_tokens``), read as the Langfuse server
    converts it."""
    names = ("input_tokens", "output_tokens")
    read = from_total_prompt(
        usage.get(names[0]), usage.get(names[1]),
        cache_read=as_dict(usage.get("input_tokens_details")).get("cached_tokens"),
        reasoning=as_dict(usage.get("output_tokens_details")).get("reasoning_tokens"),
        where=where, names=names, notes=notes)
    return _from_totals(read, usage, names, where)


def _from_totals(read: Usage, usage: dict, names: tuple[str, str], where: str) -> Counted:
    """``read`` with its input and output derived where they differ from the
    recorded totals ``names`` (a cache or the reasoning subtracted)."""
    out = Counted(read)
    if read.input_tokens != count(usage.get(names[0]), names[0], where):
        out.provenance["input_tokens"] = DERIVED
    if read.output_tokens != count(usage.get(names[1]), names[1], where):
        out.provenance["output_tokens"] = DERIVED
    return out


def cost(recorded: Any, *fallbacks: Any) -> tuple[float | None, str]:
    """The recorded cost in USD and its provenance: ``costDetails.total``
    (exact), else its parts summed (derived), else the first finite fallback
    (``totalCost``...: exact), else ``(None, unknown)``. A fallback of 0
    beside an empty ``costDetails`` (the sum Langfuse shows for no cost) is
    no cost recorded."""
    details = as_dict(recorded)
    total = finite_or_none(details.get("total"))
    if total is not None:
        return total, EXACT
    parts = [finite_or_none(v) for v in details.values()]
    if parts and None not in parts:
        return float(sum(p for p in parts if p is not None)), DERIVED
    for value in fallbacks:
        number = finite_or_none(value)
        if number is not None and not (number == 0 and recorded == {}):
            return number, EXACT
    return None, UNKNOWN
