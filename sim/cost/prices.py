"""Prices: the genai-prices catalogue, named sets and explicit overrides.

Units everywhere: tokens are exact integer counts, money is USD (float), prices
are USD per million tokens (:class:`~sim.harness.params.Prices`, the one price
type, tiers included: the harness prices each call with it).

**Prices** come from the genai-prices catalogue (:func:`lookup_prices`,
:func:`lookup_price_tiers`), from a named set (:data:`NAMED_PRICES`) or from
explicit overrides (:func:`resolve_prices`). Lookups are cached per model,
provider, cache TTL and day (or stretch of a day between time-of-day prices),
so a simulation cell looks its prices up once and then prices every call with
plain float arithmetic.
"""

from __future__ import annotations

import difflib
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise
from numbers import Real
from typing import TYPE_CHECKING, Any, cast

from sim.bad_input import InputError
from sim.harness.params import Prices

if TYPE_CHECKING:  # the catalogue is imported where it is read, not when sim starts
    from genai_prices import data_snapshot
    from genai_prices import types as gp

CACHE_TTLS: tuple[str, ...] = ("5m", "1h")
PRICE_FIELDS: tuple[str, ...] = ("input", "output", "cache_read", "cache_write", "thinking")
_FULL_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")

NAMED_PRICES: dict[str, Prices] = {
    # Seed 001's illustrative prices: $3 input, $15 output, cache reads at a tenth
    # of input and 5-minute cache writes at 1.25x input (USD per million tokens).
    "seed001": Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
}


def catalogue_names(model: str) -> list[tuple[str, str | None]]:
    """The ``(model, provider)`` pairs a recorded model name is looked up as in
    the catalogue, in order: the name as written under any provider; then, for a
    ``prefix/rest`` name, ``rest`` under the provider ``prefix`` (``azure/gpt-4o``)
    and ``rest`` under any provider (a router's or proxy's prefix the catalogue
    does not know, ``myproxy/gpt-4o``). Every path that prices a recorded model
    from the catalogue (summary, calibrate, replay, tune) tries these, so a run
    has one catalogue price whichever command reads it."""
    names: list[tuple[str, str | None]] = [(model, None)]
    if "/" in model:
        prefix, _, rest = model.partition("/")
        names += [(rest, prefix), (rest, None)]
    return names


@lru_cache(maxsize=1024)
def catalogue_entry(model: str) -> tuple[str, str | None] | None:
    """The first of :func:`catalogue_names`' ``(model, provider)`` pairs the
    catalogue prices per token (its entries do not depend on the time; their
    prices do), None when there is none: found once per recorded name, so
    pricing each of many runs at its own time searches the catalogue once."""
    for name, provider in catalogue_names(model):
        try:
            lookup_price_tiers(name, provider)
        except InputError:
            continue
        return name, provider
    return None


def prices_day(day: date | str | None = None) -> date:
    """The day whose catalogue prices stand for ``day`` (a date, a datetime:
    its UTC date, or an ISO ``YYYY-MM-DD``; None: today, UTC). Every price read
    for a day (a scenario's ``harness.prices_date``, calibrate's fit, a lookup
    without a time) reads that day's prices (:func:`lookup_price_tiers` with a
    date: a time-of-day price such as DeepSeek's off-peak discount counted by
    the hours it holds), so one day has one price, whatever the hour a command
    runs."""
    if day is None:
        return datetime.now(UTC).date()
    if isinstance(day, str):
        return date.fromisoformat(day)
    if isinstance(day, datetime):
        return (day if day.tzinfo else day.replace(tzinfo=UTC)).astimezone(UTC).date()
    return day


def lookup_price_tiers(model_id: str, provider: str | None = None, *, cache_ttl: str = "5m",
                       when: date | None = None) -> Prices:
    """The prices of ``model_id`` in the genai-prices catalogue (USD per
    million tokens) with all their cliff tiers (``Prices.tiers``, genai-prices'
    semantics), as :func:`lookup_prices` reads them; see there."""
    if cache_ttl not in CACHE_TTLS:
        raise InputError(f"cache TTL must be one of {', '.join(CACHE_TTLS)}, got {cache_ttl!r}")
    if when is None:  # the day's price: the hour a command runs never changes its figures
        when = prices_day()
    if not isinstance(when, datetime):
        return _day_tiers(model_id, provider, cache_ttl, when)
    return _catalogue_tiers(model_id, provider, cache_ttl, _stretch_instant(model_id, provider,
                                                                            when))


def lookup_prices(model_id: str, provider: str | None = None, *, cache_ttl: str = "5m",
                  prompt_tokens: int = 0, when: date | None = None) -> Prices:
    """Prices of ``model_id`` (USD per million tokens) from the genai-prices catalogue.

    ``provider``: a genai-prices provider id (``"anthropic"``, ``"aws"``, ...);
    None lets genai-prices pick it from the model id. ``when``: a datetime,
    the request time selecting dated or time-of-day prices; a date, that day's
    prices, each time-of-day price (DeepSeek's peak and off-peak) weighted by
    the share of the UTC day it holds, so a call at an unknown hour of the day
    costs what it costs on average over the day's hours (the prices a
    scenario's ``harness.prices_date`` stands for; :func:`prices_day`); None:
    today's (a result never depends on the hour it is computed; pass a fixed
    day for results that do not depend on the day either). ``prompt_tokens``:
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
    from genai_prices import types as gp

    model_price = _catalogue_model(model_id, provider).get_prices(when)
    starts = sorted({tier.start for value in model_price.__dict__.values()
                     if isinstance(value, gp.TieredPrices) for tier in value.tiers})
    base = _prices_at(model_price, 0, cache_ttl, model_id)
    return replace(base, tiers=tuple((s, _prices_at(model_price, s + 1, cache_ttl, model_id))
                                     for s in starts))


def _catalogue_model(model_id: str, provider: str | None) -> gp.ModelInfo:
    """The catalogue's entry of ``model_id`` (an InputError naming it, with
    close matches, when it has none)."""
    from genai_prices import data_snapshot

    try:
        _, model = data_snapshot.get_snapshot().find_provider_model(model_id, None, provider,
                                                                    None)
    except LookupError:
        raise InputError(_unknown_model_text(model_id, provider)) from None
    return model


@lru_cache(maxsize=256)
def _day_tiers(model_id: str, provider: str | None, cache_ttl: str, day: date) -> Prices:
    """The prices of ``day`` (:func:`lookup_prices`): the catalogue's at each
    stretch of the UTC day between the bounds of its time-of-day prices,
    averaged with the stretch's share of the day as its weight (one stretch,
    the whole day, for a model without time-of-day prices)."""
    stretches = _day_stretches(model_id, provider, day)
    priced = [(weight, _catalogue_tiers(model_id, provider, cache_ttl, at))
              for weight, at in stretches]
    if all(prices == priced[0][1] for _, prices in priced):
        return priced[0][1]  # one price all day: itself, not a mean's rounding of it
    return mean_prices(priced)


DAY_US = 86_400_000_000
"""Microseconds in a (UTC) day: the unit of a day's stretches (a
``datetime``'s own resolution, so every bound and middle is exact)."""


@lru_cache(maxsize=256)
def _day_bounds(model_id: str, provider: str | None) -> tuple[int, ...]:
    """The microseconds of the UTC day at which ``model_id``'s time-of-day
    prices (genai-prices' ``TimeOfDateConstraint``: start inclusive, end
    exclusive, either may wrap past midnight) begin or end, with 0 and
    :data:`DAY_US`, ascending: between two of them its prices on a day hold
    throughout. A constraint's time of day is read in UTC as genai-prices reads
    it (naive: UTC; with a time zone: its offset on 1970-01-01)."""
    from genai_prices import types as gp

    model = _catalogue_model(model_id, provider)
    bounds = {0, DAY_US}
    for conditional in model.prices if isinstance(model.prices, list) else ():
        constraint = conditional.constraint
        if isinstance(constraint, gp.TimeOfDateConstraint):
            for moment in (constraint.start_time, constraint.end_time):
                at = datetime.combine(date(1970, 1, 1), moment if moment.tzinfo else
                                      moment.replace(tzinfo=UTC)).astimezone(UTC)
                bounds.add(((at.hour * 60 + at.minute) * 60 + at.second) * 1_000_000
                           + at.microsecond)
    return tuple(sorted(bounds))


def _day_stretches(model_id: str, provider: str | None, day: date
                   ) -> list[tuple[float, datetime]]:
    """``(share of the day, an instant inside it)`` of each stretch of ``day``
    (UTC) between two of :func:`_day_bounds` (the instant :func:`_stretch_instant`
    gives every instant of the stretch)."""
    midnight = datetime.combine(day, time(), tzinfo=UTC)
    return [((b - a) / DAY_US, midnight + timedelta(microseconds=a + (b - a) // 2))
            for a, b in pairwise(_day_bounds(model_id, provider))]


def _stretch_instant(model_id: str, provider: str | None, when: datetime) -> datetime:
    """The instant in the middle of the stretch of its day (:func:`_day_stretches`)
    ``when`` falls in (naive: UTC; rounded down to whole microseconds): its
    prices are ``when``'s, and every instant of a stretch shares one cached
    lookup."""
    moment = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    midnight = datetime.combine(moment.date(), time(), tzinfo=UTC)
    bounds = _day_bounds(model_id, provider)
    i = bisect_right(bounds, (moment - midnight) // timedelta(microseconds=1)) - 1
    return midnight + timedelta(microseconds=bounds[i] + (bounds[i + 1] - bounds[i]) // 2)


def mean_prices(weighted: Sequence[tuple[float, Prices]]) -> Prices:
    """The mean of prices ``(weight, prices)`` (weights summing to 1), tier by
    tier (the union of their tier starts, each price's own at each tier): what
    a call pays on average when it is priced by each with its weight's
    probability. ``thinking`` None (billed as output) stays None when every
    price's is; otherwise a None counts as its output price."""

    def flat(prompt_tokens: int) -> Prices:
        parts = [(w, p.at(prompt_tokens).base) for w, p in weighted]

        def mean(field: str) -> float:
            return math.fsum(w * getattr(p, field) for w, p in parts)
        thinking = (None if all(p.thinking is None for _, p in parts) else math.fsum(
            w * (p.output if p.thinking is None else p.thinking) for w, p in parts))
        return Prices(input=mean("input"), output=mean("output"),
                      cache_read=mean("cache_read"), cache_write=mean("cache_write"),
                      thinking=thinking)
    starts = sorted({start for _, p in weighted for start, _ in p.tiers})
    return replace(flat(0), tiers=tuple((start, flat(start + 1)) for start in starts))


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


@lru_cache(maxsize=64)
def _unknown_model_text(model_id: str, provider: str | None) -> str:
    """:func:`_unknown_model_message` for the catalogue's snapshot, kept per
    model: its close-match search (difflib over the whole catalogue) is slow,
    and callers that fall back to explicit prices ask again and again."""
    from genai_prices import data_snapshot

    return _unknown_model_message(data_snapshot.get_snapshot(), model_id, provider)


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
                        when: date | None = None) -> Prices:
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
                   when: date | None = None) -> Prices:
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
