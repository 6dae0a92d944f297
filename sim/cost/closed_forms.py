"""What a deterministic run costs, in closed form.

Units everywhere: tokens are exact integer counts, money is USD (float), prices
are USD per million tokens (:class:`~sim.harness.params.Prices`, the one price
type, tiers included: the harness prices each call with it).

**Closed forms** (seed 001, "What a run costs"): a deterministic run of ``N``
steps re-sends a stable prefix of ``P`` tokens plus a history that grows by
``h`` tokens per step, and generates ``O`` output (and ``T`` thinking) tokens
per step. Step ``n`` (counting from 0) sends a prompt of ``P + h*n`` tokens, so
the run sends ``input(N) = N*P + h*N*(N-1)/2`` prompt tokens. Three cache modes
split each step's prompt between prices:

``"none"``
    every prompt token is billed at the input price;
``"append-only"``
    prompt caching of an append-only context: step 0 writes its prompt ``P``
    to the cache; step ``n >= 1`` reads what the previous call sent,
    ``P + h*(n-1)`` tokens, at the cache-read price and writes the new suffix,
    ``h`` tokens, at the cache-write price (the cache never expires);
``"expired"``
    the cache expires between steps (e.g. a pause longer than the TTL): every
    step writes its whole prompt ``P + h*n`` at the cache-write price and reads
    nothing.

The closed forms ignore providers' minimum cacheable length and breakpoint
limits. Tiered ("cliff") prices are exact: a step whose prompt exceeds a tier's
threshold pays that tier's prices on all its tokens, and the steps of a run
fall into contiguous bands because the prompt grows monotonically.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Literal

from sim.bad_input import InputError
from sim.harness.params import Prices

CacheMode = Literal["none", "append-only", "expired"]
CACHE_MODES: tuple[str, ...] = ("none", "append-only", "expired")


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token counts (tokens) billed at distinct prices. ``input``, ``cache_read``
    and ``cache_write`` are disjoint parts of the prompt (uncached, read from the
    cache, written to it); ``output`` excludes ``thinking``."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    thinking: int = 0

    @property
    def prompt(self) -> int:
        """Prompt tokens: uncached plus cache-read plus cache-write."""
        return self.input + self.cache_read + self.cache_write

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.cache_read + other.cache_read,
                      self.cache_write + other.cache_write, self.output + other.output,
                      self.thinking + other.thinking)

    def cost(self, prices: Prices) -> float:
        """Cost in USD of these tokens at ``prices``."""
        return prices.cost(self.input, self.output, self.cache_read, self.cache_write,
                           self.thinking)


@dataclass(frozen=True, slots=True)
class RunTokens:
    """Tokens of a whole run split by origin: the prefix re-sent every step, the
    growing history, and what the model generated (output and thinking)."""

    prefix: Tokens
    history: Tokens
    generated: Tokens

    @property
    def total(self) -> Tokens:
        """All tokens of the run."""
        return self.prefix + self.history + self.generated


@dataclass(frozen=True, slots=True)
class RunCost:
    """A run's tokens and its cost in USD split the same way."""

    tokens: RunTokens
    prefix_usd: float
    history_usd: float
    output_usd: float
    thinking_usd: float

    @property
    def input_usd(self) -> float:
        """USD of all prompt tokens (prefix plus history)."""
        return self.prefix_usd + self.history_usd

    @property
    def total_usd(self) -> float:
        """USD of the whole run."""
        return self.prefix_usd + self.history_usd + self.output_usd + self.thinking_usd


def input_tokens(steps: int, prefix: int, per_step: int) -> int:
    """Prompt tokens of an N-step run: ``N*P + h*N*(N-1)/2`` (tokens), where
    ``P = prefix`` and ``h = per_step`` history tokens added per step."""
    prefix_part, history_part = input_split(steps, prefix, per_step)
    return prefix_part + history_part


def input_split(steps: int, prefix: int, per_step: int) -> tuple[int, int]:
    """``(N*P, h*N*(N-1)/2)``: the prompt tokens of an N-step run that re-send
    the prefix, and those that re-send the history (tokens, exact integers)."""
    _check_counts(steps=steps, prefix=prefix, per_step=per_step)
    return steps * prefix, per_step * steps * (steps - 1) // 2


def run_tokens(steps: int, prefix: int, per_step: int, output: int, *,
               thinking: int = 0) -> RunTokens:
    """Tokens of an N-step run without prompt caching: all ``input(N)`` prompt
    tokens uncached (prefix ``N*P``, history ``h*N*(N-1)/2``), ``N*O`` output and
    ``N*T`` thinking tokens (``T = thinking`` per step)."""
    _check_counts(steps=steps, prefix=prefix, per_step=per_step, output=output,
                  thinking=thinking)
    return _step_tokens(0, steps, prefix, per_step, output, thinking, "none")


def cached_run_tokens(steps: int, prefix: int, per_step: int, output: int, *,
                      thinking: int = 0, expired: bool = False) -> RunTokens:
    """Tokens of an N-step run with prompt caching (tokens, exact integers).

    Append-only context (``expired=False``), for ``N >= 1``:

    - cache writes: ``P`` on step 0, then ``h`` per step: ``P + h*(N-1)``
      (prefix ``P``, history ``h*(N-1)``);
    - cache reads: ``P + h*(n-1)`` on step ``n >= 1``: ``(N-1)*P + h*(N-1)*(N-2)/2``
      (prefix ``(N-1)*P``, history ``h*(N-1)*(N-2)/2``);
    - reads plus writes equal ``input(N)``; no uncached prompt tokens.

    Cache expired between steps (``expired=True``): every step writes its whole
    prompt, so cache writes are ``input(N)`` (prefix ``N*P``, history
    ``h*N*(N-1)/2``) and there are no reads. Output ``N*O``, thinking ``N*T``.
    """
    _check_counts(steps=steps, prefix=prefix, per_step=per_step, output=output,
                  thinking=thinking)
    mode: CacheMode = "expired" if expired else "append-only"
    return _step_tokens(0, steps, prefix, per_step, output, thinking, mode)


def run_breakdown(steps: int, prefix: int, per_step: int, output: int,
                  prices: Prices, *, thinking: int = 0,
                  cache: CacheMode = "none") -> RunCost:
    """Tokens and USD of an N-step run in one of :data:`CACHE_MODES` (see the
    module docstring), each token type at its own price (USD per million
    tokens): cost = sum over token types of tokens * price / 1e6. With tiered
    prices, step ``n`` is priced at the tier of its prompt ``P + h*n``."""
    _check_counts(steps=steps, prefix=prefix, per_step=per_step, output=output,
                  thinking=thinking)
    if cache not in CACHE_MODES:
        raise InputError(f"cache must be one of {', '.join(CACHE_MODES)}, got {cache!r}")
    usd = [0.0, 0.0, 0.0, 0.0]
    for first, stop, band_prices in _bands(steps, prefix, per_step, prices):
        part = _step_tokens(first, stop, prefix, per_step, output, thinking, cache)
        usd[0] += part.prefix.cost(band_prices)
        usd[1] += part.history.cost(band_prices)
        usd[2] += Tokens(output=part.generated.output).cost(band_prices)
        usd[3] += Tokens(thinking=part.generated.thinking).cost(band_prices)
    tokens = _step_tokens(0, steps, prefix, per_step, output, thinking, cache)
    return RunCost(tokens, *usd)


def run_cost(steps: int, prefix: int, per_step: int, output: int,
             prices: Prices, *, thinking: int = 0) -> float:
    """USD of an N-step run without caching:
    ``(input(N)*p_in + N*O*p_out + N*T*p_think) / 1e6`` with prices in USD per
    million tokens (seed 001: N=30, P=12,000, h=1,500, O=600 at $3/$15 gives
    $3.3075)."""
    return run_breakdown(steps, prefix, per_step, output, prices, thinking=thinking).total_usd


def cached_run_cost(steps: int, prefix: int, per_step: int, output: int,
                    prices: Prices, *, thinking: int = 0,
                    expired: bool = False) -> float:
    """USD of an N-step run with prompt caching (:func:`cached_run_tokens`):
    ``(reads*p_read + writes*p_write + N*O*p_out + N*T*p_think) / 1e6``."""
    mode: CacheMode = "expired" if expired else "append-only"
    return run_breakdown(steps, prefix, per_step, output, prices, thinking=thinking,
                         cache=mode).total_usd


def _step_tokens(first: int, stop: int, prefix: int, per_step: int, output: int,
                 thinking: int, cache: str) -> RunTokens:
    """Tokens of steps ``first <= n < stop`` in closed form."""
    k = max(stop - first, 0)
    if k == 0:
        return RunTokens(Tokens(), Tokens(), Tokens())
    n_sum = (first + stop - 1) * k // 2          # sum of n over the steps
    generated = Tokens(output=k * output, thinking=k * thinking)
    if cache == "none":
        return RunTokens(Tokens(input=k * prefix), Tokens(input=per_step * n_sum), generated)
    if cache == "expired":
        return RunTokens(Tokens(cache_write=k * prefix), Tokens(cache_write=per_step * n_sum),
                         generated)
    has_step0 = 1 if first == 0 else 0
    later = k - has_step0                        # steps n >= 1: read P + h*(n-1), write h
    return RunTokens(Tokens(cache_read=later * prefix, cache_write=has_step0 * prefix),
                     Tokens(cache_read=per_step * (n_sum - later), cache_write=per_step * later),
                     generated)


def _bands(steps: int, prefix: int, per_step: int,
           tiers: Prices) -> list[tuple[int, int, Prices]]:
    """Contiguous step ranges ``[first, stop)`` sharing one price tier: step n's
    prompt ``P + h*n`` exceeds ``start`` from ``n = (start - P) // h + 1`` on."""
    bounds = [0]
    for start, _ in tiers.tiers:
        if prefix > start:
            first = 0
        elif per_step == 0:
            first = steps
        else:
            first = (start - prefix) // per_step + 1
        bounds.append(min(first, steps))
    bounds.append(steps)
    all_prices = [tiers, *(p for _, p in tiers.tiers)]
    return [(bounds[i], bounds[i + 1], p) for i, p in enumerate(all_prices)
            if bounds[i] < bounds[i + 1]]


def _check_counts(**counts: object) -> None:
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise InputError(f"{name} must be a non-negative integer, got {value!r}")
