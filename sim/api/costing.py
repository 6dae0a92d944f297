"""A deterministic run's tokens and cost from the API, without simulating it
(``python -m sim cost``): the closed forms of :mod:`sim.cost` for ``steps``
model calls re-sending a prefix of ``prefix`` tokens plus a history growing by
``per_step`` tokens per step, with ``output`` (and ``thinking``) tokens per
step: input(N) = N*P + h*N*(N-1)/2. Prices are USD per million tokens from
``model`` (the genai-prices catalogue), ``prices`` (a named set) or the
``price_*`` arguments, which override the chosen base; without a base, cache
reads default to a tenth of the input price and cache writes to 1.25 times it.
Bad input raises :class:`sim.bad_input.InputError` naming the flag.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, cast

from sim.bad_input import InputError
from sim.cost import (
    CACHE_MODES,
    CACHE_TTLS,
    NAMED_PRICES,
    CacheMode,
    RunCost,
    Tokens,
    resolve_price_tiers,
    run_breakdown,
)
from sim.harness.params import Prices
from sim.harness.prices import MAX_PRICE

__all__ = ["CACHE_MODES", "CACHE_TTLS", "MAX_COUNT", "NAMED_PRICES", "PRICE_FLAGS", "Costed",
           "run_cost"]

MAX_COUNT = 10**12
"""The largest count accepted (steps, tokens)."""

COUNTS = (("steps", "--steps"), ("prefix", "--prefix"), ("per_step", "--per-step"),
           ("output", "--output"), ("thinking", "--thinking"))
PRICE_FLAGS = (("input", "price_in", "--price-in"), ("output", "price_out", "--price-out"),
                ("cache_read", "price_cache_read", "--price-cache-read"),
                ("cache_write", "price_cache_write", "--price-cache-write"),
                ("thinking", "price_thinking", "--price-thinking"))
"""Each price: its field of :class:`sim.harness.params.Prices`, the argument
of :func:`run_cost` and the command's flag."""


@dataclass(frozen=True)
class RunShape:
    """What a run is made of: ``steps`` model calls, a ``prefix`` re-sent each
    step, ``per_step`` history tokens added per step, ``output`` and
    ``thinking`` tokens per step, and the prompt ``cache`` mode."""

    steps: int
    prefix: int
    per_step: int
    output: int
    thinking: int = 0
    cache: CacheMode = "none"


@dataclass(frozen=True)
class Costed:
    """A run's tokens and cost (:func:`run_cost`): its ``shape``, the price
    ``tiers`` used, where they came from (``model``, ``provider``, the named
    set ``prices``, whether ``price_*`` overrides were given) and the
    ``result`` (:class:`sim.cost.RunCost`: tokens by kind, USD)."""

    shape: RunShape
    tiers: Prices
    result: RunCost
    model: str | None = None
    provider: str | None = None
    prices: str | None = None
    overridden: bool = False

    def as_dict(self) -> dict[str, Any]:
        """What ``cost --format json`` prints."""
        return _as_json(self.shape, self.model, self.provider, self.tiers, self.result)

    def text(self) -> str:
        """What ``cost`` prints: the run, the prices, a table of tokens and
        USD by part, and the total."""
        return _table(self)


def run_cost(steps: int, prefix: int, per_step: int, output: int, *, thinking: int = 0,
             cache: CacheMode = "none", model: str | None = None, provider: str | None = None,
             prices: str | None = None, cache_ttl: str = "5m",
             price_in: float | None = None, price_out: float | None = None,
             price_cache_read: float | None = None, price_cache_write: float | None = None,
             price_thinking: float | None = None) -> Costed:
    """The tokens and cost of a deterministic run (see the module docstring):
    counts from 0 (``steps`` from 1) to :data:`MAX_COUNT`; ``prices`` with
    ``model`` or ``provider`` is refused (a named set prices every model alike)."""
    shape = RunShape(steps, prefix, per_step, output, thinking, cache)
    for dest, flag in COUNTS:
        value = getattr(shape, dest)
        least = 1 if dest == "steps" else 0
        if not least <= value <= MAX_COUNT:
            raise InputError(f"{flag} must be an integer from {least} to {MAX_COUNT:,}, "
                             f"got {value}")
    given = {"price_in": price_in, "price_out": price_out, "price_cache_read": price_cache_read,
             "price_cache_write": price_cache_write, "price_thinking": price_thinking}
    tiers = _price_tiers(given, model, provider, prices, cache_ttl)
    result = run_breakdown(steps, prefix, per_step, output, tiers, thinking=thinking,
                           cache=cache)
    return Costed(shape, tiers, result, model, provider, prices,
                  any(value is not None for value in given.values()))


def _price_tiers(given: dict[str, float | None], model: str | None, provider: str | None,
                 prices: str | None, cache_ttl: str) -> Prices:
    overrides: dict[str, float] = {}
    for field, dest, flag in PRICE_FLAGS:
        value = given[dest]
        if value is None:
            continue
        if not math.isfinite(value) or not 0 <= value <= MAX_PRICE:
            raise InputError(f"{flag} must be a number of USD per million tokens from 0 to "
                             f"{MAX_PRICE:,.0f}, got {value}")
        overrides[field] = value
    if prices is not None:
        for flag, named in (("--model", model), ("--provider", provider)):
            if named is not None:  # a named set has one price per kind, for any model
                raise InputError(f"--prices {prices} is a fixed price set, the same for "
                                 f"every model, so {flag} {named} would be ignored: give "
                                 f"--model for its catalogue prices, or --prices NAME, not both")
        return resolve_price_tiers("", prices).with_overrides(**overrides)
    if provider is not None and model is None:
        raise InputError(f"--provider {provider} names the provider of --model; give "
                         f"--model too")
    if model is not None:
        return resolve_price_tiers(model, overrides or None, provider=provider,
                                   cache_ttl=cache_ttl)
    if "input" not in overrides or "output" not in overrides:
        raise InputError("no prices: give --model ID, --prices NAME, or both --price-in and "
                         "--price-out (USD per million tokens)")
    overrides.setdefault("cache_read", overrides["input"] / 10)
    overrides.setdefault("cache_write", overrides["input"] * 1.25)
    return Prices(**cast("dict[str, Any]", overrides))  # price fields, never tiers


def _as_json(shape: RunShape, model: str | None, provider: str | None, tiers: Prices,
             result: RunCost) -> dict[str, Any]:
    tokens = result.tokens
    total = tokens.total

    def split(part: Tokens) -> dict[str, int]:
        return {"tokens": part.prompt, "uncached": part.input, "cache_read": part.cache_read,
                "cache_write": part.cache_write}

    return {
        "run": {"steps": shape.steps, "prefix_tokens": shape.prefix,
                "per_step_tokens": shape.per_step, "output_tokens_per_step": shape.output,
                "thinking_tokens_per_step": shape.thinking, "cache": shape.cache},
        "model": model, "provider": provider,
        "prices_usd_per_mtok": asdict(tiers.base),
        "price_tiers": [{"above_prompt_tokens": start, "prices_usd_per_mtok": asdict(p)}
                        for start, p in tiers.tiers],
        "tokens": {"input": total.prompt, "output": total.output, "thinking": total.thinking,
                   "total": total.prompt + total.output + total.thinking,
                   "uncached": total.input, "cache_read": total.cache_read,
                   "cache_write": total.cache_write,
                   "prefix": split(tokens.prefix), "history": split(tokens.history)},
        "cost_usd": {name: round(value, 10) for name, value in (
            ("total", result.total_usd), ("input", result.input_usd),
            ("prefix", result.prefix_usd), ("history", result.history_usd),
            ("output", result.output_usd), ("thinking", result.thinking_usd))},
    }


def _table(costed: Costed) -> str:
    args, tiers, result = costed.shape, costed.tiers, costed.result
    tokens = result.tokens
    total = tokens.total
    cached = args.cache != "none"
    source = (f"set {costed.prices}" if costed.prices else f"model {costed.model}"
              if costed.model else "")
    if costed.overridden:
        source = f"{source}, --price-* overrides" if source else "--price-* flags"
    lines = [
        f"run: {args.steps:,} steps, prefix {args.prefix:,} tokens, +{args.per_step:,} history "
        f"tokens/step, {args.output:,} output tokens/step"
        + (f", {args.thinking:,} thinking tokens/step" if args.thinking else ""),
        f"prices, USD per million tokens ({source}): {_prices_text(tiers.base)}",
        *(f"  above {start:,} prompt tokens: {_prices_text(p)}" for start, p in tiers.tiers),
        f"cache: {args.cache}",
        "",
    ]
    head = f"{'':<12}{'tokens':>14}"
    if cached:
        head += f"{'uncached':>12}{'cache read':>13}{'cache write':>13}"
    lines.append(head + f"{'USD':>14}")

    def row(label: str, count: int, usd: float, part: Tokens | None = None) -> str:
        text = f"{label:<12}{count:>14,}"
        if cached:
            text += (f"{part.input:>12,}{part.cache_read:>13,}{part.cache_write:>13,}"
                     if part is not None else " " * 38)
        return text + f"{_usd(usd, 4):>14}"

    lines += [row("input", total.prompt, result.input_usd, tokens.prefix + tokens.history),
              row("  prefix", tokens.prefix.prompt, result.prefix_usd, tokens.prefix),
              row("  history", tokens.history.prompt, result.history_usd, tokens.history),
              row("output", total.output, result.output_usd)]
    if total.thinking:
        lines.append(row("thinking", total.thinking, result.thinking_usd))
    lines += [row("total", total.prompt + total.output + total.thinking, result.total_usd), "",
              f"cost: {_usd(result.total_usd, 2)} for {total.prompt:,} input tokens and "
              f"{total.output:,} output tokens"
              + (f" (+{total.thinking:,} thinking)" if total.thinking else "")]
    return "\n".join(lines)


def _prices_text(p: Prices) -> str:
    thinking = "as output" if p.thinking is None else f"{p.thinking:g}"
    return (f"input {p.input:g}, output {p.output:g}, cache read {p.cache_read:g}, "
            f"cache write {p.cache_write:g}, thinking {thinking}")


def _usd(value: float, places: int) -> str:
    """USD rounded half-up from the shortest decimal form of ``value``, with
    every digit a large amount has (``$inf`` past a float's range)."""
    if not math.isfinite(value):
        return f"${value}"
    exact = Decimal(repr(value))
    with localcontext() as context:
        context.prec = max(context.prec, exact.adjusted() + places + 2)
        amount = exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"${amount:,}"
