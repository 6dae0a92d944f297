"""Cache reads a recorded cost implies, where the usage does not split the prompt.

Some sources keep each call's prompt total and its billed cost but not the
prompt's cache split: tau2-bench keeps only ``prompt_tokens`` and
``completion_tokens`` of a response, so a call whose provider read most of its
prompt from the cache imports as uncached, with a recorded cost far below its
tokens at list prices (tau2's OpenAI runs: 80-98% of the prompt was read).
Counted as uncached, the traces tell calibration that the model never caches
and that its prices are a third of the list's; the world then charges every
prompt token the same, where real runs pay less per token the longer they run.

With **automatic prompt caching** (OpenAI, DeepSeek, xAI, Gemini's implicit
cache: reads billed at a discount, no surcharge for writing) a call's cost is
linear in the tokens it read, the prompt total, output and reasoning fixed, so
its recorded cost fixes them (:func:`implied_share`):

    share = (cost uncached - recorded cost) / (cost uncached - cost all read)

each cost by the harness's one rule (:func:`sim.cost.recorded.call_cost`, the
tier the prompt reaches included). A model's calls are read this way
(:func:`model_reads`) only when the reading is the billing's:

- no call of the model records a cache read or write (a source that splits the
  prompt is taken at its word);
- its listed prices discount reads and charge writes as uncached input (a
  write surcharge, explicit caching as Anthropic bills it, makes one cost two
  unknowns);
- at least :data:`MIN_CALLS` calls record a trustworthy cost above $0
  (:func:`sim.cost.recorded.trusted`), and at least :data:`CONSISTENT` of them
  imply a share within [-:data:`TOLERANCE`, 1 + :data:`TOLERANCE`] (a price
  the provider did not bill, a reseller's mark-up or a discount the catalogue
  lacks, shows as shares out of that range, and the model is left as it is);
- the token-weighted share is above :data:`TOLERANCE` (else nothing was read).

Each such call then reads ``round(share x prompt)`` tokens, the share clipped
to [0, 1] and under :data:`TOLERANCE` taken as 0 (a cost rounded to its last
digit, not a hit); its uncached input is the rest of its prompt. Calls without
a trustworthy cost keep their counts. Units: tokens, USD.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.cost.recorded import call_cost, trusted
from sim.harness.messages import Usage
from sim.harness.prices import Prices

MIN_CALLS = 10
"""Calls with a trustworthy recorded cost a model needs for its reads to be implied."""

TOLERANCE = 0.02
"""Share of the prompt within which a cost is consistent with the listed prices
(costs rounded when recorded; catalogue and bill a percent apart), and under
which an implied read is none."""

CONSISTENT = 0.95
"""Share of a model's costed calls that must imply a share within the tolerance."""


def automatic(prices: Prices) -> bool:
    """Whether ``prices`` (every tier) are automatic caching's: reads below the
    input price, writes at it."""
    return all(p.cache_read < p.input and p.cache_write == p.input
               for p in (prices.base, *(t for _, t in prices.tiers)))


def implied_share(prices: Prices, prompt: int, output: int, thinking: int,
                  cost: float) -> float:
    """The share of a call's ``prompt`` (tokens, cached or not) read from the
    cache that its recorded ``cost`` (USD) implies at ``prices``, unclipped;
    NaN for an empty prompt or prices without a read discount."""
    uncached = call_cost(prices, Usage(prompt, output, 0, 0, thinking))
    all_read = call_cost(prices, Usage(0, output, prompt, 0, thinking))
    if prompt <= 0 or not uncached > all_read:
        return math.nan
    return (uncached - cost) / (uncached - all_read)


@dataclass(frozen=True)
class ModelReads:
    """The cache reads implied for one model's calls: ``reads`` (tokens, one
    per call given; -1 where the call keeps its counts), over ``calls`` calls
    with a trustworthy cost, ``share`` of their prompt tokens read."""

    model: str
    reads: np.ndarray
    calls: int
    share: float


CallPrices = Prices | Sequence[Prices] | None
"""A model's listed prices for its calls: one for all, one per call (each at
the instant the call was billed: a time-of-day price), or None (unknown)."""


def _per_call(prices: CallPrices, calls: int) -> Sequence[Prices] | None:
    """``prices`` as one per call (None: unknown)."""
    if prices is None or isinstance(prices, Prices):
        return None if prices is None else [prices] * calls
    if len(prices) != calls:
        raise ValueError(f"{len(prices)} prices for {calls} calls")
    return prices


def _implied(prices: Sequence[Prices], usages: Sequence[Usage],
             costs: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Each call's implied share at its prices (:func:`implied_share`; NaN
    without a trustworthy cost) and its prompt (tokens; 0 without one)."""
    shares = np.full(len(usages), np.nan)
    prompts = np.zeros(len(usages))
    for i, (u, cost, listed) in enumerate(zip(usages, costs, prices, strict=True)):
        if cost is not None and trusted(cost, u):  # a $0 call of no tokens: no prompt, no share
            prompts[i] = u.input_tokens
            shares[i] = implied_share(listed, u.input_tokens, u.output_tokens,
                                      u.thinking_tokens, cost)
    return shares, prompts


def unsplit(prices: Sequence[Prices], usages: Sequence[Usage]) -> bool:
    """Whether the calls leave out a split their provider bills: automatic
    caching's prices (at every call's instant) and no call recording a cache
    read or write."""
    return all(automatic(p) for p in {id(p): p for p in prices}.values()) and not any(
        u.cache_read_tokens or u.cache_write_tokens for u in usages)


def _consistent(shares: np.ndarray) -> float:
    """The share of the costed calls whose implied share is within the tolerance."""
    costed = shares[np.isfinite(shares)]
    inside = (costed >= -TOLERANCE) & (costed <= 1 + TOLERANCE)
    return float(inside.mean()) if costed.size else 0.0


def untold(prices: CallPrices, usages: Sequence[Usage], costs: Sequence[float | None]
           ) -> str | None:
    """Why a model's recorded costs do not tell the cache reads its usage
    leaves out (a clause: too few calls with a trustworthy cost, or costs the
    listed prices cannot give), or None when there is nothing untold: the
    source splits the prompt, the model's prices are not automatic caching's
    (or are unknown), or :func:`model_reads` can read the costs (reads found,
    or none). ``prices`` as :func:`model_reads` takes them."""
    each = _per_call(prices, len(usages))
    if each is None or not unsplit(each, usages):
        return None
    shares, _ = _implied(each, usages, costs)
    n = int(np.isfinite(shares).sum())
    if n == 0:
        return f"none of its {len(usages)} calls records a trustworthy cost"
    if n < MIN_CALLS:
        return (f"{n} of its {len(usages)} calls record a trustworthy cost, "
                f"{MIN_CALLS} are needed")
    consistent = _consistent(shares)
    if consistent < CONSISTENT:
        middle = float(np.median(shares[np.isfinite(shares)]))
        return (f"{consistent:.0%} of its costed calls cost what the listed prices give for "
                f"some read, the median call a read of {middle:.2f} of its prompt: billed at "
                "prices the catalogue does not list")
    return None


def model_reads(model: str, prices: CallPrices, usages: Sequence[Usage],
                costs: Sequence[float | None]) -> ModelReads | None:
    """The cache reads ``model``'s calls (their ``usages`` and recorded
    ``costs``, USD, None: not recorded) imply at its listed ``prices`` (one
    for every call, or each call's own: the price at the instant it was
    billed; None: unknown), or None when they do not tell them (module
    docstring; :func:`untold` says why not)."""
    each = _per_call(prices, len(usages))
    if each is None or not unsplit(each, usages):
        return None
    shares, prompts = _implied(each, usages, costs)
    costed = np.isfinite(shares)
    n = int(costed.sum())
    if n < MIN_CALLS or _consistent(shares) < CONSISTENT:
        return None
    clipped = np.where(costed, np.clip(np.nan_to_num(shares), 0.0, 1.0), 0.0)
    clipped[clipped < TOLERANCE] = 0.0
    reads = np.where(costed, np.round(clipped * prompts), -1).astype(np.int64)
    share = float(reads[costed].sum() / prompts[costed].sum())
    if share <= TOLERANCE:
        return None
    return ModelReads(model, reads, n, share)
