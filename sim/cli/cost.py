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

from sim.api.costing import CACHE_MODES, CACHE_TTLS, NAMED_PRICES, PRICE_FLAGS
from sim.cli.common import add_format_option

_DESCRIPTION = (
    "Tokens and cost of a deterministic run of N steps that re-sends a prefix of P tokens "
    "plus a history growing by h tokens per step: input(N) = N*P + h*N*(N-1)/2. Prices are "
    "USD per million tokens from --model (genai-prices catalogue), --prices NAME, or "
    "--price-in/--price-out; --price-* flags override the chosen base. Without a base, cache "
    "reads default to 0.1x and cache writes to 1.25x the input price.")

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
    for field, dest, flag in PRICE_FLAGS:
        prices.add_argument(flag, dest=dest, type=float, metavar="USD",
                            help=f"price of {_PRICE_HELP[field]} tokens")
    parser.add_argument("--cache", choices=CACHE_MODES, default="none",
                        help="prompt caching: none, append-only context, or expired "
                             "between steps (default none)")
    add_format_option(parser, "table (default) or JSON only on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the run's tokens and cost (:func:`sim.api.costing.run_cost`);
    return 0. Bad input raises InputError."""
    from sim.api.costing import run_cost

    costed = run_cost(args.steps, args.prefix, args.per_step, args.output,
                      thinking=args.thinking, cache=args.cache, model=args.model,
                      provider=args.provider, prices=args.prices, cache_ttl=args.cache_ttl,
                      **{dest: getattr(args, dest) for _, dest, _ in PRICE_FLAGS})
    if args.format == "json":
        print(json.dumps(costed.as_dict(), indent=2))
    else:
        print(costed.text())
    return 0
