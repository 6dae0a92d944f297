"""Prices for a replay: each recorded call is priced at the prices of the
model that answered it (:func:`price_models`; see :mod:`sim.drivers.replay`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sim.drivers.recorded_runs import RecordedCall, RecordedRun
from sim.harness.params import HarnessParams, Prices


@dataclass(frozen=True)
class ModelPricing:
    """How a replay prices each model its recorded calls name (:func:`price_models`).

    ``prices`` by model name; ``catalogue``: the models priced from the price
    catalogue; ``recorded``: the models the catalogue does not know, priced
    from their recorded costs, each ``{"calls", "recorded_usd", "scale"}``
    (the scenario's prices times ``scale``); ``default``: the models neither
    the catalogue nor a recorded cost prices, priced at the scenario's prices."""

    prices: dict[str, Prices]
    catalogue: tuple[str, ...] = ()
    recorded: dict[str, dict[str, float]] = field(default_factory=dict)
    default: tuple[str, ...] = ()

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The models not in the catalogue (priced from recorded costs or by default)."""
        return tuple(sorted({*self.recorded, *self.default}))

    def notes(self) -> list[str]:
        """What a user must be told: one line per way a model was not catalogue-priced."""
        out = []
        for model, entry in sorted(self.recorded.items()):
            out.append(f"warning: model {model!r} is not in the price catalogue: priced from "
                       f"the recorded cost of its {int(entry['calls']):,} calls "
                       f"(${entry['recorded_usd']:,.4f}; the scenario's prices times "
                       f"{entry['scale']:.4g})")
        for model in self.default:
            out.append(f"warning: model {model!r} is not in the price catalogue and no call "
                       "of it records a cost: priced at the scenario's prices")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"catalogue": sorted(self.catalogue),
                "from_recorded_cost": {m: dict(e) for m, e in sorted(self.recorded.items())},
                "scenario_prices": sorted(self.default)}


def call_model(call: RecordedCall, run: RecordedRun, template: HarnessParams) -> str:
    """The model that answered ``call``: its own, else the run's, else the template's."""
    return call.model or run.model or template.model


def price_models(runs: list[RecordedRun], template: HarnessParams,
                 prices_for: Callable[[str | None], Prices | None] | None = None
                 ) -> ModelPricing:
    """Prices for every model the recorded calls name (see the module):
    ``prices_for(model)`` (the catalogue; None: unknown), else from the
    recorded costs of that model's calls, else the template's prices."""
    costed: dict[str, list[RecordedCall]] = {}
    names: dict[str, None] = {}
    for run in runs:
        for call in run.calls:
            name = call_model(call, run, template)
            names.setdefault(name, None)
            if call.cost_usd is not None:
                costed.setdefault(name, []).append(call)
    return models_pricing(list(names), lambda name: costed.get(name, []), template, prices_for)


def models_pricing(names: list[str], costed: Callable[[str], list[RecordedCall]],
                   template: HarnessParams,
                   prices_for: Callable[[str | None], Prices | None] | None = None
                   ) -> ModelPricing:
    """:func:`price_models` given the model names in order of first
    appearance and ``costed(name)``: that model's calls with a recorded cost
    (asked only for a model ``prices_for`` does not know)."""
    prices: dict[str, Prices] = {}
    catalogue, default = [], []
    recorded: dict[str, dict[str, float]] = {}
    for name in names:
        found = prices_for(name) if prices_for is not None else template.prices
        if found is not None:
            prices[name] = found
            catalogue.append(name)
            continue
        calls = costed(name)
        paid = math.fsum(c.cost_usd for c in calls if c.cost_usd is not None)
        priced = math.fsum(call_cost(template.prices, c) for c in calls)
        scale = paid / priced if priced > 0 else math.nan
        if math.isfinite(scale) and scale > 0:
            base = template.prices.base
            prices[name] = replace(base, input=base.input * scale, output=base.output * scale,
                                   cache_read=base.cache_read * scale,
                                   cache_write=base.cache_write * scale,
                                   thinking=None if base.thinking is None
                                   else base.thinking * scale)
            recorded[name] = {"calls": float(len(calls)), "recorded_usd": paid, "scale": scale}
        else:
            prices[name] = template.prices
            default.append(name)
    return ModelPricing(prices, tuple(catalogue), recorded, tuple(default))


def call_cost(prices: Prices, call: RecordedCall) -> float:
    """The cost in USD of a recorded call's usage at ``prices``
    (:meth:`~sim.harness.prices.Prices.call_cost`, the harness's one price rule)."""
    u = call.usage
    return prices.call_cost(u.input_tokens, u.output_tokens, u.cache_read_tokens,
                            u.cache_write_tokens, u.thinking_tokens)
