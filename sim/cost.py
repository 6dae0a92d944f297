"""What agent runs cost: catalogue prices and closed forms for deterministic runs.

Units everywhere: tokens are exact integer counts, money is USD (float), prices
are USD per million tokens (:class:`~sim.harness.params.Prices`, the one price
type, tiers included: the harness prices each call with it).

**Prices** come from the genai-prices catalogue (:func:`lookup_prices`,
:func:`lookup_price_tiers`), from a named set (:data:`NAMED_PRICES`) or from
explicit overrides (:func:`resolve_prices`). Lookups are cached per model,
provider, cache TTL and request time, so a simulation cell looks its prices up
once and then prices every call with plain float arithmetic.

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

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, Literal, cast

from sim.bad_input import InputError
from sim.harness.params import Prices

if TYPE_CHECKING:  # the catalogue is imported where it is read, not when sim starts
    from genai_prices import data_snapshot
    from genai_prices import types as gp

CacheMode = Literal["none", "append-only", "expired"]
CACHE_MODES: tuple[str, ...] = ("none", "append-only", "expired")
CACHE_TTLS: tuple[str, ...] = ("5m", "1h")
PRICE_FIELDS: tuple[str, ...] = ("input", "output", "cache_read", "cache_write", "thinking")
_FULL_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")

NAMED_PRICES: dict[str, Prices] = {
    # Seed 001's illustrative prices: $3 input, $15 output, cache reads at a tenth
    # of input and 5-minute cache writes at 1.25x input (USD per million tokens).
    "seed001": Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
}


# --------------------------------------------------------------------------- prices


def lookup_price_tiers(model_id: str, provider: str | None = None, *, cache_ttl: str = "5m",
                       when: datetime | None = None) -> Prices:
    """The prices of ``model_id`` in the genai-prices catalogue (USD per
    million tokens) with all their cliff tiers (``Prices.tiers``, genai-prices'
    semantics), as :func:`lookup_prices` reads them; see there."""
    if cache_ttl not in CACHE_TTLS:
        raise InputError(f"cache TTL must be one of {', '.join(CACHE_TTLS)}, got {cache_ttl!r}")
    if when is None:  # truncated so that repeated lookups hit the cache
        when = datetime.now(UTC).replace(second=0, microsecond=0)
    elif when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return _catalogue_tiers(model_id, provider, cache_ttl, when)


def lookup_prices(model_id: str, provider: str | None = None, *, cache_ttl: str = "5m",
                  prompt_tokens: int = 0, when: datetime | None = None) -> Prices:
    """Prices of ``model_id`` (USD per million tokens) from the genai-prices catalogue.

    ``provider``: a genai-prices provider id (``"anthropic"``, ``"aws"``, ...);
    None lets genai-prices pick it from the model id. ``when``: request time
    selecting dated or time-of-day prices (None: now, UTC; pass a fixed time for
    results that do not depend on the day they are computed). ``prompt_tokens``:
    the whole prompt of the call, cached or not, which selects the tier of
    tiered prices (a tier applies above its threshold).

    Field by field, falling back exactly as genai-prices itself prices usage
    the catalogue does not price separately:

    - ``input`` / ``output``: ``input_mtok`` / ``output_mtok`` (required; a model
      without both, e.g. an embedding or audio model, is an InputError);
    - ``cache_read``: ``cache_read_mtok``, else the input price (no discount);
    - ``cache_write``: for ``cache_ttl="5m"`` ``cache_write_5m_mtok`` else
      ``cache_write_mtok``; for ``"1h"`` ``cache_write_1h_mtok`` else
      ``cache_write_mtok``; else the input price (no write surcharge, as for
      OpenAI's automatic caching);
    - ``thinking``: ``output_reasoning_mtok``, else None (billed as output).

    Request-context variants (batch, flex or priority service tiers) and
    per-request or per-search fees are not represented. Unknown model or
    provider: :class:`~sim.bad_input.InputError` naming it, with close matches.
    """
    tiers = lookup_price_tiers(model_id, provider, cache_ttl=cache_ttl, when=when)
    return tiers.at(prompt_tokens).base


@lru_cache(maxsize=256)
def _catalogue_tiers(model_id: str, provider: str | None, cache_ttl: str,
                     when: datetime) -> Prices:
    from genai_prices import data_snapshot
    from genai_prices import types as gp

    snapshot = data_snapshot.get_snapshot()
    try:
        _, model = snapshot.find_provider_model(model_id, None, provider, None)
    except LookupError:
        raise InputError(_unknown_model_message(snapshot, model_id, provider)) from None
    model_price = model.get_prices(when)
    starts = sorted({tier.start for value in model_price.__dict__.values()
                     if isinstance(value, gp.TieredPrices) for tier in value.tiers})
    base = _prices_at(model_price, 0, cache_ttl, model_id)
    return replace(base, tiers=tuple((s, _prices_at(model_price, s + 1, cache_ttl, model_id))
                                     for s in starts))


def _prices_at(model_price: gp.ModelPrice, prompt_tokens: int, cache_ttl: str,
               model_id: str) -> Prices:
    from genai_prices import types as gp

    def price(*keys: str) -> float | None:
        for key in keys:
            value = getattr(model_price, key)
            if isinstance(value, gp.TieredPrices):
                chosen = value.base
                for tier in value.tiers:
                    if prompt_tokens > tier.start:
                        chosen = tier.price
                value = chosen
            if value is not None:
                return float(value)
        return None

    input_price, output_price = price("input_mtok"), price("output_mtok")
    if input_price is None or output_price is None:
        raise InputError(f"model {model_id!r} has no per-token input and output prices in "
                         "the genai-prices catalogue; give explicit prices")
    write = price(f"cache_write_{cache_ttl}_mtok", "cache_write_mtok")
    read = price("cache_read_mtok")
    return Prices(input=input_price, output=output_price,
                  cache_read=input_price if read is None else read,
                  cache_write=input_price if write is None else write,
                  thinking=price("output_reasoning_mtok"))


def _unknown_model_message(snapshot: data_snapshot.DataSnapshot, model_id: str,
                           provider: str | None) -> str:
    from genai_prices import data_snapshot

    providers = snapshot.providers
    if provider is not None:
        found = data_snapshot.find_provider_by_id(providers, provider)
        if found is None:
            close = difflib.get_close_matches(provider.lower(), [p.id for p in providers], n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            return f"unknown provider {provider!r} in the genai-prices catalogue{hint}"
        providers = [found]
    where = f" for provider {provider!r}" if provider else ""
    listed = [p.id for p in snapshot.providers if any(m.is_match(model_id) for m in p.models)]
    if listed:
        hint = f"; it is listed under provider {', '.join(listed)}: name one"
    else:
        ids = sorted({m.id for p in providers for m in p.models})
        close = difflib.get_close_matches(model_id.lower(), ids, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"unknown model {model_id!r}: not found in the genai-prices catalogue{where}{hint} "
            "(or give explicit prices)")


def resolve_price_tiers(model: str, prices_spec: str | Mapping[str, object] | None = None, *,
                        provider: str | None = None, cache_ttl: str = "5m",
                        when: datetime | None = None) -> Prices:
    """Prices (USD per million tokens, with tiers) for ``model`` given a
    scenario's price spec.

    ``prices_spec`` is None (the model's catalogue prices), the name of a set in
    :data:`NAMED_PRICES`, or a mapping of overrides with keys among
    :data:`PRICE_FIELDS` applied on top of the catalogue prices (every tier).
    For a model missing from the catalogue the mapping must be full (input,
    output, cache_read and cache_write; thinking defaults to the output price);
    a partial mapping is then an InputError.
    """
    if prices_spec is None:
        return lookup_price_tiers(model, provider, cache_ttl=cache_ttl, when=when)
    if isinstance(prices_spec, str):
        if prices_spec not in NAMED_PRICES:
            raise InputError(f"unknown price set {prices_spec!r}; named sets: "
                             f"{', '.join(sorted(NAMED_PRICES))}", path="prices")
        return NAMED_PRICES[prices_spec]
    if not isinstance(prices_spec, Mapping):
        raise InputError("must be a named price set or a mapping of prices, got "
                         f"{type(prices_spec).__name__}", path="prices")
    overrides = _checked_overrides(prices_spec)
    try:
        catalogue = lookup_price_tiers(model, provider, cache_ttl=cache_ttl, when=when)
    except InputError as error:
        missing = [name for name in _FULL_PRICE_FIELDS if name not in overrides]
        if missing:
            raise InputError(f"{error}; overriding only some prices needs catalogue prices "
                             f"to start from (missing {', '.join(missing)})",
                             path="prices") from None
        return Prices(**cast("dict[str, Any]", overrides))  # price fields, never tiers
    return catalogue.with_overrides(**overrides)


def resolve_prices(model: str, prices_spec: str | Mapping[str, object] | None = None, *,
                   provider: str | None = None, cache_ttl: str = "5m", prompt_tokens: int = 0,
                   when: datetime | None = None) -> Prices:
    """The prices (USD per million tokens, without tiers) of one call with a
    prompt of ``prompt_tokens`` tokens: :func:`resolve_price_tiers` at that size."""
    tiers = resolve_price_tiers(model, prices_spec, provider=provider, cache_ttl=cache_ttl,
                                when=when)
    return tiers.at(prompt_tokens).base


def _checked_overrides(spec: Mapping[str, object]) -> dict[str, float | None]:
    unknown = sorted(str(k) for k in spec if k not in PRICE_FIELDS)
    if unknown:
        raise InputError(f"unknown price field(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(PRICE_FIELDS)}", path="prices")
    checked: dict[str, float | None] = {}
    for name, value in spec.items():
        if value is None and name == "thinking":
            checked[name] = None
            continue
        if (isinstance(value, bool) or not isinstance(value, Real)
                or not math.isfinite(value) or value < 0):
            raise InputError(f"must be a non-negative number of USD per million tokens, "
                             f"got {value!r}", path=f"prices.{name}")
        checked[name] = float(value)
    return checked


# --------------------------------------------------------------------------- tokens


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
