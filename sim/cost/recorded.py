"""The one price of a recorded call and of a recorded run, and its basis.

Every command that puts a dollar figure on recorded runs (``traces summary``,
``calibrate``, ``replay``, ``tune``) prices them here, so one run has one
price whichever command reports it. Units: tokens are counts, money is USD,
prices are USD per million tokens (:class:`~sim.harness.prices.Prices`).

**A call's price** and the ``basis`` it rests on (:data:`BASES`, most trusted
first):

- ``recorded``: the cost the source recorded, where it is trustworthy
  (:func:`trusted`): present, finite, and either above $0 or for a call that
  used no tokens;
- otherwise (missing, or $0 with tokens used: a cost tracker that did not know
  its model) the call's tokens at its model's prices (:meth:`Prices.call_cost
  <sim.harness.prices.Prices.call_cost>`, the harness's one rule; a token count
  the source did not record counts 0), which are (:func:`model_price`):

  - ``fitted``: the listed prices (catalogue, else scenario) scaled by one
    factor, the model's trustworthy recorded costs over the listed prices of
    the same calls, when some of its calls record a cost above $0 (what the
    model was really billed at: discounts, a reseller's mark-up);
  - ``catalogue``: the price source's prices for the model (the genai-prices
    catalogue, with a scenario's price set or overrides applied, on its date);
  - ``scenario``: the scenario's own prices, when nothing else knows the model;
  - ``unpriced``: no price at all (no scenario given and the catalogue lacks
    the model): the price is NaN and the figure is left out, never taken as $0.

**A run's price** (:func:`run_price`) is the sum of its calls' prices; its
basis is ``recorded`` when every call's is, else the least trusted basis among
its calls. A run none of whose calls records a cost but which records a
trustworthy cost of its own (a source that keeps only the total) is priced at
that recorded cost, basis ``recorded``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import TypeGuard

from sim.harness.messages import Usage
from sim.harness.prices import Prices

RECORDED, FITTED, CATALOGUE, SCENARIO, UNPRICED = (
    "recorded", "fitted", "catalogue", "scenario", "unpriced")
BASES: tuple[str, ...] = (RECORDED, FITTED, CATALOGUE, SCENARIO, UNPRICED)
"""The bases of a price, most trusted first."""

BASIS_TEXT: dict[str, str] = {
    RECORDED: "recorded",
    FITTED: "at fitted prices (the catalogue scaled to the model's recorded costs)",
    CATALOGUE: "at catalogue prices",
    SCENARIO: "at the scenario's prices (a named price set, or a model not in the catalogue)",
    UNPRICED: "unpriced (no trustworthy cost, and no usage or no prices to price it)",
}
"""Each basis as a report says it."""

Listed = Callable[[str], "Prices | None"]
"""A price source: a model's listed prices (catalogue, or a scenario's spec
applied to it), None when it does not know the model."""


def used_tokens(usage: Usage) -> bool:
    """Whether a call's usage counts any token."""
    return (usage.input_tokens + usage.output_tokens + usage.cache_read_tokens
            + usage.cache_write_tokens + usage.thinking_tokens) > 0


def trusted(cost: float | None, usage: Usage | None) -> bool:
    """Whether a recorded cost (USD; None: not recorded) is the call's price:
    present, finite, and above $0 or for a call that used no tokens (a $0
    with ``usage`` None, not recorded, is not)."""
    if cost is None or not math.isfinite(cost):
        return False
    if cost == 0:
        return usage is not None and not used_tokens(usage)
    return cost > 0


def call_cost(prices: Prices | None, usage: Usage | None) -> float:
    """The one price of a recorded call's tokens: ``usage`` at ``prices``
    (USD), at the tier its prompt reaches
    (:meth:`sim.harness.prices.Prices.call_cost`, the harness's rule); NaN
    without prices or without usage (None: not recorded). Every command that
    prices a recorded call's tokens (``traces summary``, ``replay``,
    ``tune``) calls this, never ``Prices.call_cost`` itself; calibrate's fit
    of a model's price scale prices each run's token sums by the harness's
    :meth:`~sim.harness.prices.Prices.cost` (:mod:`sim.calibration.prices`)."""
    if prices is None or usage is None:
        return math.nan
    return prices.call_cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                            usage.cache_write_tokens, usage.thinking_tokens)


@dataclass(frozen=True)
class ModelPrice:
    """The prices an untrusted call of ``model`` is charged at and their basis
    (``fitted``, ``catalogue``, ``scenario`` or ``unpriced``); for ``fitted``,
    ``scale`` is the factor on the listed prices, fitted to ``calls`` calls
    recording ``recorded_usd``."""

    model: str
    prices: Prices | None
    basis: str
    scale: float = 1.0
    calls: int = 0
    recorded_usd: float = 0.0

    def note(self) -> str:
        """One line a report gives for this model."""
        if self.basis == FITTED:
            return (f"{self.model}: fitted prices, the listed prices x {self.scale:.4g} "
                    f"(the recorded ${self.recorded_usd:,.4f} of {self.calls:,} calls)")
        return f"{self.model}: {BASIS_TEXT[self.basis]}"


def scaled(prices: Prices, factor: float) -> Prices:
    """``prices`` with every price (every tier too) multiplied by ``factor``."""
    def one(p: Prices) -> Prices:
        return replace(p, input=p.input * factor, output=p.output * factor,
                       cache_read=p.cache_read * factor, cache_write=p.cache_write * factor,
                       thinking=None if p.thinking is None else p.thinking * factor)
    return replace(one(prices.base), tiers=tuple((s, one(t)) for s, t in prices.tiers))


Recorded = tuple["Usage | Sequence[Usage | None] | None", "float | None"]
"""A recorded cost and what it paid for: one call's usage, or the usage of
each call of a run that records only its total."""


def calls_cost(costs: Iterable[float | None]) -> float | None:
    """A run's cost from its calls' recorded ``costs`` (USD, in order; None:
    not recorded): their exact sum (:func:`math.fsum`) when every call
    records one, else None; None for a run of no call too (its cost is
    unknown, not $0). What an importer records as the run's cost when the
    source records only its calls' (:func:`sim.traces.assemble.run_cost`),
    and a recorded run's cost when the run records none
    (:attr:`sim.traces.model.RunRecord.recorded_cost_usd`)."""
    known = []
    for cost in costs:
        if cost is None:
            return None
        known.append(cost)
    return math.fsum(known) if known else None


def only_total(total: float | None, costs: Iterable[float | None]) -> TypeGuard[float]:
    """Whether a run records only its total: its own recorded cost ``total``
    is present while none of its calls' recorded ``costs`` is (and it has
    calls)."""
    if total is None:
        return False
    seen = False
    for cost in costs:
        if cost is not None:
            return False
        seen = True
    return seen


RunCalls = tuple[str, "float | None", "Sequence[tuple[float | None, Usage | None, str]]"]
"""A run as :func:`model_records` reads it: its model, its own recorded cost
(None: unrecorded) and its calls' ``(recorded cost, usage, model)``."""


def model_records(runs: Iterable[RunCalls],
                  records: dict[str, list[Recorded]] | None = None
                  ) -> dict[str, list[Recorded]]:
    """Each model's recorded costs and what they paid for (:data:`Recorded`),
    what :func:`model_price` fits to, added to ``records`` (a new dict when
    None) in one pass over ``runs``: a run recording only its total
    (:func:`only_total`) is one record of the run's model; otherwise each call
    that records a cost is one record of the call's model (a call recording
    none adds its model, with no record)."""
    out: dict[str, list[Recorded]] = {} if records is None else records
    for model, total, calls in runs:
        if only_total(total, (c for c, _, _ in calls)):
            out.setdefault(model, []).append(([u for _, u, _ in calls], total))
            continue
        for cost, usage, name in calls:
            mine = out.setdefault(name, [])
            if cost is not None:
                mine.append((usage, cost))
    return out


def model_price(model: str, listed: Prices | None, scenario: Prices | None,
                records: Iterable[Recorded]) -> ModelPrice:
    """The prices of ``model``'s untrusted calls (module docstring): ``listed``
    (the price source's; None: unknown) else ``scenario``, scaled to the
    trustworthy recorded costs above $0 among ``records`` (the model's calls,
    or runs recording only a total: :data:`Recorded`; those of unrecorded
    usage left out)."""
    base, basis = ((listed, CATALOGUE) if listed is not None
                   else (scenario, SCENARIO) if scenario is not None else (None, UNPRICED))
    if base is None:
        return ModelPrice(model, None, UNPRICED)
    paid: list[float] = []
    at_base: list[float] = []
    n = 0
    for usage, cost in records:
        usages = (usage,) if usage is None or isinstance(usage, Usage) else tuple(usage)
        if any(u is None for u in usages):
            continue  # usage not recorded: nothing to scale to
        if trusted(cost, _total(usages)):  # a $0 of no tokens adds nothing
            paid.append(float(cost))  # type: ignore[arg-type]  # trusted: not None
            at_base.extend(call_cost(base, u) for u in usages)
            n += len(usages)
    total, listed_total = math.fsum(paid), math.fsum(at_base)
    if total > 0 and listed_total > 0:
        factor = total / listed_total
        return ModelPrice(model, scaled(base, factor), FITTED, factor, n, total)
    return ModelPrice(model, base, basis)


def call_price(cost: float | None, usage: Usage | None, model: ModelPrice
               ) -> tuple[float, str]:
    """One call's price (USD) and basis: its recorded ``cost`` when
    :func:`trusted`, else its ``usage`` at ``model``'s prices; NaN and
    ``unpriced`` for a call whose usage and cost are both unknown."""
    if trusted(cost, usage):
        return float(cost), RECORDED  # type: ignore[arg-type]  # trusted: not None
    if usage is None:
        return math.nan, UNPRICED
    return call_cost(model.prices, usage), model.basis


def run_basis(bases: Iterable[str]) -> str:
    """A run's basis from its calls' (module docstring): the least trusted one."""
    rank = max((BASES.index(b) for b in bases), default=0)
    return BASES[rank]


def call_prices(calls: Sequence[tuple[float | None, Usage | None, ModelPrice]],
                recorded: float | None = None) -> list[tuple[float, str]]:
    """Each call's price (USD) and basis, from the run's calls' ``(recorded
    cost, usage, model price)`` and the run's own ``recorded`` cost: a run
    none of whose calls records a cost but which records a trustworthy total
    shares that total among its calls in proportion to their tokens' price
    (equally when that is 0), basis ``recorded``; otherwise
    :func:`call_price` per call."""
    if only_total(recorded, (c for c, _, _ in calls)) and trusted(
            recorded, _total(u for _, u, _ in calls)):
        weights = [call_cost(m.prices, u) for _, u, m in calls]
        whole = math.fsum(w for w in weights if math.isfinite(w))
        if not whole > 0 or not all(math.isfinite(w) for w in weights):
            weights, whole = [1.0] * len(calls), float(len(calls))
        return [(recorded * w / whole, RECORDED) for w in weights]
    return [call_price(cost, usage, model) for cost, usage, model in calls]


def run_price(calls: Sequence[tuple[float | None, Usage | None, ModelPrice]],
              recorded: float | None = None) -> tuple[float, str]:
    """A run's price (USD) and basis (module docstring): the sum of
    :func:`call_prices`, the least trusted basis among them."""
    priced = call_prices(calls, recorded)
    return math.fsum(p for p, _ in priced), run_basis(b for _, b in priced)


def _total(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of ``usages``; None when one is not recorded."""
    total = Usage()
    for u in usages:
        if u is None:
            return None
        total = Usage(total.input_tokens + u.input_tokens, total.output_tokens + u.output_tokens,
                      total.cache_read_tokens + u.cache_read_tokens,
                      total.cache_write_tokens + u.cache_write_tokens,
                      total.thinking_tokens + u.thinking_tokens)
    return total


def model_prices(by_model: Mapping[str, list[Recorded]], listed: Listed,
                 scenario: Prices | None = None) -> dict[str, ModelPrice]:
    """:func:`model_price` of each model of ``by_model`` (its recorded costs
    and their usage), ``listed(model)`` its listed prices."""
    return {m: model_price(m, listed(m), scenario, records) for m, records in by_model.items()}


def catalogue(when: date | None = None) -> Listed:
    """The genai-prices catalogue as a price source: a model's prices with
    their tiers at ``when`` (an instant, or a day: its time-of-day prices
    averaged over it, :func:`sim.cost.prices.lookup_prices`; None: today), a
    recorded name read as :func:`sim.cost.prices.catalogue_entry` finds it;
    None when the catalogue lacks it."""
    from sim.bad_input import InputError
    from sim.cost.prices import catalogue_entry, lookup_price_tiers

    found: dict[str, Prices | None] = {}

    def listed(model: str) -> Prices | None:
        if model not in found:
            entry = catalogue_entry(model)
            try:
                found[model] = None if entry is None else lookup_price_tiers(*entry, when=when)
            except InputError:  # priced per token on other days, not on this one
                found[model] = None
        return found[model]
    return listed


def basis_line(bases: Mapping[str, int], what: str = "runs") -> str:
    """``priced: 412 runs recorded, 263 at catalogue prices (...)``: a count of
    ``what`` per basis, most trusted first, in one line."""
    counts = Counter({b: n for b, n in bases.items() if n})
    parts = [f"{counts[b]:,} {what if i == 0 else ''}".rstrip() + f" {BASIS_TEXT[b]}"
             for i, b in enumerate(b for b in BASES if counts[b])]
    return "priced: " + (", ".join(parts) if parts else f"no {what}")


@dataclass(frozen=True)
class RunPrices:
    """Runs' one prices: ``usd`` (NaN: no price) and ``basis`` per run in the
    order given, and ``models``, the price of each model's untrusted calls."""

    usd: list[float]
    basis: list[str]
    models: dict[str, ModelPrice]

    def by_basis(self) -> dict[str, dict[str, float]]:
        """``{basis: {"runs", "usd"}}``, most trusted first, bases with no run left out."""
        out: dict[str, dict[str, float]] = {}
        for b in BASES:
            usd = [u for u, x in zip(self.usd, self.basis, strict=True) if x == b]
            if usd:
                out[b] = {"runs": len(usd), "usd": math.fsum(u for u in usd if math.isfinite(u))}
        return out


def run_prices(runs: Sequence[tuple[str, str, float | None]],
               calls: Iterable[tuple[str, str | None, Usage | None, float | None]],
               listed: Listed, scenario: Prices | None = None) -> RunPrices:
    """The one price of each run of ``runs`` (``(run_id, model, recorded
    cost)``) from ``calls`` (``(run_id, model or None: the run's, usage,
    recorded cost)``, in order): each model's prices fitted to the recorded
    costs of all the runs (:func:`model_price`; a run recording only its total
    counts as one record of its model), then :func:`run_price` per run. A run
    with no calls and no recorded cost has no price (NaN, ``unpriced``)."""
    run_model = {r: m for r, m, _ in runs}
    by_run: dict[str, list[tuple[float | None, Usage | None, str]]] = {}
    for run, model, usage, cost in calls:
        by_run.setdefault(run, []).append((cost, usage, model or run_model.get(run) or ""))
    records = model_records(((model, total, by_run.get(run, [])) for run, model, total in runs),
                            {m: [] for m in run_model.values()})
    for mine in by_run.values():  # a model only named by calls of a run recording its total
        for _, _, call_model in mine:
            records.setdefault(call_model, [])
    models = model_prices(records, listed, scenario)
    usd, bases = [], []
    for run, _, total in runs:
        mine = by_run.get(run, [])
        if not mine and total is None:
            usd.append(math.nan)
            bases.append(UNPRICED)
            continue
        price, basis = run_price([(c, u, models[m]) for c, u, m in mine], total)
        usd.append(price)
        bases.append(basis)
    return RunPrices(usd, bases, models)
