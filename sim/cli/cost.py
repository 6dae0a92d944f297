"""``python -m sim cost``: what a deterministic run costs, without simulating it.

Uses the closed forms of :mod:`sim.cost`: ``N`` steps, a prefix of ``P``
tokens, ``h`` history tokens added per step, ``O`` output tokens per step.
Prices (USD per million tokens) come from ``--model`` (the genai-prices
catalogue), ``--prices NAME`` (a named set such as ``seed001``) or
``--price-in``/``--price-out``; any ``--price-*`` flag overrides the chosen
base. ``--prices`` with ``--model`` (or ``--provider``) is refused: a named
set prices every model alike, so the model would be silently ignored.
Without a base, cache reads default to a tenth of the input price and cache
writes to 1.25 times it (Anthropic's 5-minute multipliers). Seed 001's
example::

    python -m sim cost --steps 30 --prefix 12000 --per-step 1500 --output 600 \\
        --price-in 3 --price-out 15

prints 1,012,500 input tokens (prefix 360,000 + history 652,500) and $3.31.
``--format json`` prints one JSON object and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, cast

from sim.bad_input import InputError
from sim.cost import (
    CACHE_MODES,
    CACHE_TTLS,
    NAMED_PRICES,
    RunCost,
    Tokens,
    resolve_price_tiers,
    run_breakdown,
)
from sim.harness.params import Prices
from sim.harness.prices import MAX_PRICE

_DESCRIPTION = (
    "Tokens and cost of a deterministic run of N steps that re-sends a prefix of P tokens "
    "plus a history growing by h tokens per step: input(N) = N*P + h*N*(N-1)/2. Prices are "
    "USD per million tokens from --model (genai-prices catalogue), --prices NAME, or "
    "--price-in/--price-out; --price-* flags override the chosen base. Without a base, cache "
    "reads default to 0.1x and cache writes to 1.25x the input price.")

MAX_COUNT = 10**12
"""The largest count accepted (steps, tokens)."""

_COUNTS = (("steps", "--steps"), ("prefix", "--prefix"), ("per_step", "--per-step"),
           ("output", "--output"), ("thinking", "--thinking"))
_PRICE_FLAGS = (("input", "price_in", "--price-in"), ("output", "price_out", "--price-out"),
                ("cache_read", "price_cache_read", "--price-cache-read"),
                ("cache_write", "price_cache_write", "--price-cache-write"),
                ("thinking", "price_thinking", "--price-thinking"))
_PRICE_HELP = {"input": "uncached input", "output": "output",
               "cache_read": "cache read (default 0.1x input without a base)",
               "cache_write": "cache write (default 1.25x input without a base)",
               "thinking": "thinking (default: the output price)"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``cost`` command to the top-level parser."""
    parser = subparsers.add_parser(
        "cost", help="cost of a deterministic N-step run from closed forms (no simulation)",
        description=_DESCRIPTION)
    shape = parser.add_argument_group("run shape (tokens)")
    shape.add_argument("--steps", type=int, required=True,
                       help="model calls in the run (N), at least 1")
    shape.add_argument("--prefix", type=int, required=True,
                       help="stable prefix re-sent every step: system prompt + tools (P)")
    shape.add_argument("--per-step", type=int, required=True,
                       help="history tokens added per step: call + result (h)")
    shape.add_argument("--output", type=int, required=True, help="output tokens per step (O)")
    shape.add_argument("--thinking", type=int, default=0, help="thinking tokens per step")
    prices = parser.add_argument_group("prices (USD per million tokens)")
    prices.add_argument("--model", help="model id priced from the genai-prices catalogue")
    prices.add_argument("--provider", help="genai-prices provider id for --model")
    prices.add_argument("--prices", metavar="NAME",
                        help=f"named price set: {', '.join(sorted(NAMED_PRICES))}")
    prices.add_argument("--cache-ttl", choices=CACHE_TTLS, default="5m",
                        help="cache-write price to take from the catalogue (default 5m)")
    for field, dest, flag in _PRICE_FLAGS:
        prices.add_argument(flag, dest=dest, type=float, metavar="USD",
                            help=f"price of {_PRICE_HELP[field]} tokens")
    parser.add_argument("--cache", choices=CACHE_MODES, default="none",
                        help="prompt caching: none, append-only context, or expired "
                             "between steps (default none)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="table (default) or JSON only on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the run's tokens and cost; return 0. Bad input raises InputError."""
    for dest, flag in _COUNTS:
        value = getattr(args, dest)
        least = 1 if dest == "steps" else 0
        if not least <= value <= MAX_COUNT:
            raise InputError(f"{flag} must be an integer from {least} to {MAX_COUNT:,}, "
                             f"got {value}")
    tiers = _price_tiers(args)
    result = run_breakdown(args.steps, args.prefix, args.per_step, args.output, tiers,
                           thinking=args.thinking, cache=args.cache)
    if args.format == "json":
        print(json.dumps(_as_json(args, tiers, result), indent=2))
    else:
        print(_table(args, tiers, result))
    return 0


def _price_tiers(args: argparse.Namespace) -> Prices:
    overrides: dict[str, float] = {}
    for field, dest, flag in _PRICE_FLAGS:
        value = getattr(args, dest)
        if value is None:
            continue
        if not math.isfinite(value) or not 0 <= value <= MAX_PRICE:
            raise InputError(f"{flag} must be a number of USD per million tokens from 0 to "
                             f"{MAX_PRICE:,.0f}, got {value}")
        overrides[field] = value
    if args.prices is not None:
        for flag, value in (("--model", args.model), ("--provider", args.provider)):
            if value is not None:  # a named set has one price per kind, for any model
                raise InputError(f"--prices {args.prices} is a fixed price set, the same for "
                                 f"every model, so {flag} {value} would be ignored: give "
                                 f"--model for its catalogue prices, or --prices NAME, not both")
        return resolve_price_tiers("", args.prices).with_overrides(**overrides)
    if args.provider is not None and args.model is None:
        raise InputError(f"--provider {args.provider} names the provider of --model; give "
                         f"--model too")
    if args.model is not None:
        return resolve_price_tiers(args.model, overrides or None, provider=args.provider,
                                   cache_ttl=args.cache_ttl)
    if "input" not in overrides or "output" not in overrides:
        raise InputError("no prices: give --model ID, --prices NAME, or both --price-in and "
                         "--price-out (USD per million tokens)")
    overrides.setdefault("cache_read", overrides["input"] / 10)
    overrides.setdefault("cache_write", overrides["input"] * 1.25)
    return Prices(**cast("dict[str, Any]", overrides))  # price fields, never tiers


def _as_json(args: argparse.Namespace, tiers: Prices, result: RunCost) -> dict:
    tokens = result.tokens
    total = tokens.total

    def split(part: Tokens) -> dict[str, int]:
        return {"tokens": part.prompt, "uncached": part.input, "cache_read": part.cache_read,
                "cache_write": part.cache_write}

    return {
        "run": {"steps": args.steps, "prefix_tokens": args.prefix,
                "per_step_tokens": args.per_step, "output_tokens_per_step": args.output,
                "thinking_tokens_per_step": args.thinking, "cache": args.cache},
        "model": args.model, "provider": args.provider,
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


def _table(args: argparse.Namespace, tiers: Prices, result: RunCost) -> str:
    tokens = result.tokens
    total = tokens.total
    cached = args.cache != "none"
    source = f"set {args.prices}" if args.prices else f"model {args.model}" if args.model else ""
    if any(getattr(args, dest) is not None for _, dest, _ in _PRICE_FLAGS):
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
    """USD rounded half-up from the shortest decimal form of ``value``."""
    amount = Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"${amount:,}"
