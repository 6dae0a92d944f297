"""Token usage from the providers' conventions into the trace model's.

The trace model (:mod:`sim.traces.model`) counts a call's prompt as three
disjoint parts, ``input`` (uncached) + ``cache_read`` + ``cache_write``, and its
output as two, ``output`` (without reasoning) + ``reasoning``. Providers say it
two ways, and each function here takes one:

- :func:`from_total_prompt`: the prompt total *includes* the cache counts
  (OpenAI ``prompt_tokens`` with ``cached_tokens``; DeepSeek
  ``prompt_cache_hit_tokens``; OpenTelemetry ``gen_ai.usage.input_tokens``),
  and the output total includes reasoning (OpenAI ``completion_tokens`` with
  ``reasoning_tokens``; Inspect's ``output_tokens``);
- :func:`from_disjoint`: the parts are reported apart (Anthropic's
  ``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``).

A count that is not a non-negative integer, cache counts larger than the prompt
they are part of, or reasoning larger than the output it is part of, make the
call unusable (:class:`~sim.traces.skips.Unusable`, naming ``where``).
"""

from __future__ import annotations

from typing import Any

from sim.traces.skips import BAD_COUNT, CACHE_EXCEEDS, REASONING_EXCEEDS, Unusable

MAX_COUNT = 2**53
"""The largest token count accepted (a larger one is a corrupt record)."""

Counts = tuple[int, int, int, int, int]
"""``(input, cache_read, cache_write, output, reasoning)`` tokens."""


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
        raise Unusable(BAD_COUNT, f"{where}: {name} is {value!r}, not a non-negative integer"
                                  f"{'' if not isinstance(number, int) else ' in range'}")
    return number


def from_total_prompt(prompt: Any, output: Any, *, cache_read: Any = None,
                      cache_write: Any = None, reasoning: Any = None, where: str,
                      names: tuple[str, str] = ("prompt_tokens", "completion_tokens")
                      ) -> Counts:
    """Counts from a prompt total that includes the cache counts and an output
    total that includes reasoning (missing cache or reasoning counts are 0)."""
    total = count(prompt, names[0], where)
    out = count(output, names[1], where)
    read = count(cache_read, "cache read tokens", where, default=0)
    write = count(cache_write, "cache write tokens", where, default=0)
    think = count(reasoning, "reasoning tokens", where, default=0)
    if read + write > total:
        raise Unusable(CACHE_EXCEEDS, f"{where}: cache read {read} + cache write {write} "
                                      f"> {names[0]} {total}")
    if think > out:
        raise Unusable(REASONING_EXCEEDS, f"{where}: reasoning {think} > {names[1]} {out}")
    return total - read - write, read, write, out - think, think


def from_disjoint(uncached: Any, output: Any, *, cache_read: Any = None, cache_write: Any = None,
                  reasoning: Any = None, where: str) -> Counts:
    """Counts from disjoint prompt parts; ``output`` includes ``reasoning``."""
    out = count(output, "output tokens", where)
    think = count(reasoning, "reasoning tokens", where, default=0)
    if think > out:
        raise Unusable(REASONING_EXCEEDS, f"{where}: reasoning {think} > output {out}")
    return (count(uncached, "input tokens", where),
            count(cache_read, "cache read tokens", where, default=0),
            count(cache_write, "cache write tokens", where, default=0), out - think, think)
