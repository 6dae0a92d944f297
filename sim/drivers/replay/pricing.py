"""Prices for a replay: each recorded call is priced at the prices of the
model that answered it (:func:`price_models`; see :mod:`sim.drivers.replay`).

Two prices per model: ``prices``, what the candidate harness charges a call
at (its money budget: the catalogue's, else the scenario's scaled to the
model's recorded costs, else the scenario's), and ``fill``, the one price of
a recorded call whose recorded cost is missing or $0 with tokens used
(:mod:`sim.cost.recorded`, the same price every command gives the call)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sim.cost.recorded import (
    FITTED,
    ModelPrice,
    RunCalls,
    call_cost,
    model_prices,
    model_records,
)
from sim.harness.params import HarnessParams, Prices
from sim.traces.model import CallRecord, RunRecord


@dataclass(frozen=True)
class ModelPricing:
    """How a replay prices each model its recorded calls name (:func:`price_models`).

    ``prices`` by model name; ``catalogue``: the models priced from the price
    catalogue; ``fill``: each model's one price for its recorded calls whose
    cost is missing or $0 with tokens used
    (:func:`sim.cost.recorded.model_price`), which also says how a model the
    catalogue does not know is priced (:attr:`recorded`, :attr:`default`)."""

    prices: dict[str, Prices]
    catalogue: tuple[str, ...] = ()
    fill: dict[str, ModelPrice] = field(default_factory=dict)
    own: bool = False
    """Every model is priced at the scenario's own prices (a named price set,
    or no price source): none is catalogue-priced, and that is no warning."""

    @property
    def recorded(self) -> dict[str, dict[str, float]]:
        """The models the catalogue does not know, priced from their recorded
        costs, each ``{"calls", "recorded_usd", "scale"}`` (the scenario's
        prices times ``scale``)."""
        return {m: {"calls": float(p.calls), "recorded_usd": p.recorded_usd, "scale": p.scale}
                for m, p in self.fill.items() if m not in self.catalogue and p.basis == FITTED}

    @property
    def default(self) -> tuple[str, ...]:
        """The models neither the catalogue nor a recorded cost prices, priced
        at the scenario's prices."""
        return tuple(m for m, p in self.fill.items()
                     if m not in self.catalogue and p.basis != FITTED)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The models not in the catalogue (priced from recorded costs or by default)."""
        return tuple(sorted({*self.recorded, *self.default}))

    def notes(self) -> list[str]:
        """What a user must be told: one line per way a model was not
        catalogue-priced (none when the scenario prices every model itself)."""
        out: list[str] = []
        if self.own:
            return out
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
                "scenario_prices": sorted(self.default),
                "unrecorded_calls": {m: {"basis": p.basis, "scale": p.scale}
                                     for m, p in sorted(self.fill.items())}}


def call_model(call: CallRecord, run: RunRecord, template: HarnessParams) -> str:
    """The model that answered ``call``: its own, else the run's, else the template's."""
    return call.model or run.model or template.model


def price_models(runs: Iterable[RunRecord], template: HarnessParams,
                 prices_for: Callable[[str | None], Prices | None] | None = None
                 ) -> ModelPricing:
    """Prices for every model the recorded calls name (see the module), in
    one pass over ``runs`` (a list, or a folder's runs read a range at a
    time: :mod:`sim.drivers.replay.reading`), the models in order of first
    appearance: both prices of a model come from
    :func:`sim.cost.recorded.model_price`, its listed prices
    ``prices_for(model)`` (the catalogue; None: unknown; no ``prices_for``,
    or one that prices every model at a named set: the template's, said as
    the scenario's prices, not the catalogue's), scaled to the recorded
    costs of that model's calls (a run recording only its total is one
    record of its own model), else the template's prices."""
    names: dict[str, None] = {}

    def costs(run: RunRecord) -> RunCalls:
        calls = [(c.cost_usd, c.usage, call_model(c, run, template)) for c in run.calls]
        names.update(dict.fromkeys(name for _, _, name in calls))
        return run.model or template.model, run.cost_usd, calls

    costed = model_records(costs(run) for run in runs)
    listed = {name: prices_for(name) if prices_for is not None else template.prices
              for name in names}
    # a named price set (or no price source) is the scenario's own prices,
    # not the catalogue's: a recorded call's fill says so
    own = prices_for is None or getattr(prices_for, "named", None) is not None
    fill = model_prices({name: costed.get(name, []) for name in names},
                        (lambda name: None) if own else listed.__getitem__, template.prices)
    prices = {name: found if found is not None else fill[name].prices or template.prices
              for name, found in listed.items()}
    return ModelPricing(prices, () if own else tuple(m for m, found in listed.items()
                                                     if found is not None), fill, own)


def priced_calls(params: HarnessParams, run: RunRecord) -> list[float]:
    """Each recorded call of ``run`` at the prices the candidate ``params``
    charge it (USD): its model's (:meth:`~sim.harness.params.HarnessParams.prices_for`;
    a call naming no model is ``params.model``'s), the figure the money budget
    adds for it (:func:`sim.cost.recorded.call_cost`). Replay's
    ``priced_usd`` and tune's money needs read it."""
    model = params.model
    return [call_cost(params.prices_for(c.model or model), c.usage) for c in run.calls]
